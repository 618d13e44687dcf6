"""The EvoRAG protocol's data, offline: KB noise and localized training queries (EvoRAG §6.1).

- :func:`inject_noise` — on a fraction of the (node, relation, direction) steps that test questions'
  gold paths use, add a **conflicting / outdated fact**: the same node and relation leading to
  another entity n′ that plays the same role of the relation elsewhere in the KB and *continues the
  question's remaining relation path* (so the wrong branch reads exactly like the true one), and
  one **irrelevant fact** linking the node to an entity far from it (not within two hops) by a
  relation the question does not ask for.
- :func:`training_queries` — EvoRAG §6.1's training set: "for each subgraph, we sample alternative
  reasoning paths (up to two hops) that differ from the paths used to form test queries". By
  default a training path is a segment of 1–2 consecutive triples of a path *retrieved* for a test
  query (the subgraph EvoRAG samples in; it may hold injected triples — that is how feedback on it
  reaches the noise); alternatives: random walks from the topic in the searched graph, or walks
  from a gold-path node in the clean KB. It is verbalized from templates over the relation names,
  and its gold answers are every end of its relation path from its start in the **clean** KB. A
  training query never has a test question's (start, relation path) nor a test gold path's
  triples; it may share triples with test paths (that is how feedback on it helps them).

Directions follow :class:`~triage_plugins.datasets.kb.KBIndex`: ``"+"`` walks subject → object,
``"-"`` object → subject.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from triage_plugins.contract.errors import ConfigError, DatasetError
from triage_plugins.contract.events import Gold, Triple
from triage_plugins.datasets.kb import KBIndex
from triage_plugins.datasets.qa import QAItem

__all__ = [
    "NoisyKB",
    "Step",
    "TrainingQuery",
    "gold_steps",
    "inject_noise",
    "relation_path",
    "training_queries",
    "verbalize",
]

log = logging.getLogger("triage.evolve_noise")

Step = tuple[str, str, str]
"""``(node, relation, direction)``: one step of a gold path, taken at ``node``."""


def _step_of(t: Triple, node: str) -> tuple[str, str, str]:
    """(relation, direction, next node) of triple ``t`` walked from ``node``."""
    if t.subject == node:
        return t.predicate, "+", t.object
    return t.predicate, "-", t.subject


def relation_path(path: Sequence[Triple], start: str) -> tuple[tuple[str, str], ...]:
    """``[(relation, direction)]`` of ``path`` walked from ``start``."""
    out: list[tuple[str, str]] = []
    node = start
    for t in path:
        rel, d, node = _step_of(t, node)
        out.append((rel, d))
    return tuple(out)


def gold_steps(question: QAItem) -> list[tuple[Step, tuple[tuple[str, str], ...]]]:
    """Every step of every gold path of ``question``, with the relation path that remains after it."""
    out: list[tuple[Step, tuple[tuple[str, str], ...]]] = []
    topic = question.topic_entities[0] if question.topic_entities else None
    for path in question.gold_paths:
        if not path:
            continue
        node = topic if topic is not None and topic in (path[0].subject, path[0].object) else path[0].subject
        rel_path = relation_path(path, node)
        for k, t in enumerate(path):
            rel, d, nxt = _step_of(t, node)
            out.append(((node, rel, d), rel_path[k + 1 :]))
            node = nxt
    return out


@dataclass(frozen=True)
class NoisyKB:
    """The KB with injected noise.

    :param triples: clean triples followed by the injected ones.
    :param conflicting: injected conflicting facts (one per noisy step).
    :param irrelevant: injected irrelevant facts.
    :param noisy_steps: the (node, relation, direction) steps that received a conflicting fact.
    :param n_steps: distinct steps used by the test questions' gold paths.
    :param n_continuing: conflicting facts whose wrong entity continues the whole remaining path.
    """

    triples: tuple[Triple, ...]
    conflicting: tuple[Triple, ...]
    irrelevant: tuple[Triple, ...]
    noisy_steps: tuple[Step, ...]
    n_steps: int
    n_continuing: int
    injected_ids: frozenset[str] = field(default=frozenset())

    @property
    def fraction(self) -> float:
        return len(self.noisy_steps) / self.n_steps if self.n_steps else 0.0


def _role_members(kb: KBIndex) -> dict[tuple[str, str], list[str]]:
    """(relation, direction) -> the entities reached by that step anywhere in the KB (sorted)."""
    members: dict[tuple[str, str], set[str]] = {}
    for t in kb.triples.values():
        members.setdefault((t.predicate, "+"), set()).add(t.object)
        members.setdefault((t.predicate, "-"), set()).add(t.subject)
    return {k: sorted(v) for k, v in members.items()}


def _continues(kb: KBIndex, node: str, rest: Sequence[tuple[str, str]]) -> bool:
    return not rest or bool(kb.walk(node, rest, limit=1))


def _within_two(kb: KBIndex, node: str) -> set[str]:
    near = {node}
    frontier = {node}
    for _ in range(2):
        nxt: set[str] = set()
        for n in frontier:
            nxt.update(v for _, _, v in kb.steps(n, directed=False))
        near |= nxt
        frontier = nxt
    return near


def inject_noise(
    kb_triples: Sequence[Triple],
    questions: Sequence[QAItem],
    fraction: float,
    *,
    seed: int = 0,
    irrelevant_per_step: int = 1,
    candidates: int = 64,
) -> NoisyKB:
    """Add conflicting and irrelevant facts on ``fraction`` of the test questions' gold steps.

    Exactly ``round(fraction · n)`` steps are chosen (n = distinct steps of the gold paths) among
    those that admit a wrong entity; fewer only when fewer admit one (logged). For a chosen step
    (x, r, d) the wrong entity n′ is drawn from the entities reached by (r, d) elsewhere in the KB,
    never one that (x, r, d) truly reaches nor x itself, preferring — among up to ``candidates``
    draws — one from which the question's remaining relation path can be walked. The conflicting
    fact is (x, r, n′) for d = "+" and (n′, r, x) for d = "-". Each irrelevant fact is
    (x, r″, e) or (e, r″, x) with r″ not on the question's relation path and e not within two
    hops of x.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ConfigError(f"noise fraction must lie in [0, 1], got {fraction!r}")
    kb = KBIndex(kb_triples)
    rng = random.Random(f"noise-{seed}")
    remaining, asked = _asked_steps(questions)
    steps = sorted(remaining)
    n_steps = len(steps)
    target = round(fraction * n_steps)
    members = _role_members(kb)
    relations = sorted({t.predicate for t in kb.triples.values()})
    entities = sorted({n for t in kb.triples.values() for n in (t.subject, t.object)})
    order = list(steps)
    rng.shuffle(order)
    conflicting: list[Triple] = []
    irrelevant: list[Triple] = []
    chosen: list[Step] = []
    existing = set(kb.triples)
    continuing = 0
    for step in order:
        if len(chosen) >= target:
            break
        wrong, continues = _wrong_entity(kb, rng, step, members, remaining[step], candidates)
        if wrong is None:
            continue
        node, rel, d = step
        fact = Triple.of(node, rel, wrong) if d == "+" else Triple.of(wrong, rel, node)
        continuing += continues
        if fact.id in existing:
            continue
        existing.add(fact.id)
        conflicting.append(fact)
        chosen.append(step)
        off_path = [r for r in relations if r not in asked[step]] or relations
        near = _within_two(kb, node)
        for _ in range(irrelevant_per_step):
            found = _irrelevant_fact(rng, node, near, entities, off_path, existing, candidates)
            if found is not None:
                existing.add(found.id)
                irrelevant.append(found)
    if len(chosen) < target:
        log.warning("noise: only %d of %d requested steps admit a wrong entity", len(chosen), target)
    injected = tuple(conflicting) + tuple(irrelevant)
    return NoisyKB(
        triples=tuple(kb_triples) + injected,
        conflicting=tuple(conflicting),
        irrelevant=tuple(irrelevant),
        noisy_steps=tuple(chosen),
        n_steps=n_steps,
        n_continuing=continuing,
        injected_ids=frozenset(t.id for t in injected),
    )


def _asked_steps(
    questions: Sequence[QAItem],
) -> tuple[dict[Step, tuple[tuple[str, str], ...]], dict[Step, set[str]]]:
    """Each gold step's remaining relation path (first question's) and the relations asked around it."""
    remaining: dict[Step, tuple[tuple[str, str], ...]] = {}
    asked: dict[Step, set[str]] = {}
    for q in questions:
        rels = {rel for p in q.gold_paths for rel in (t.predicate for t in p)}
        for step, rest in gold_steps(q):
            remaining.setdefault(step, rest)
            asked.setdefault(step, set()).update(rels)
    return remaining, asked


def _wrong_entity(
    kb: KBIndex,
    rng: random.Random,
    step: Step,
    members: Mapping[tuple[str, str], list[str]],
    rest: Sequence[tuple[str, str]],
    candidates: int,
) -> tuple[str | None, bool]:
    """A wrong entity n′ for ``step`` and whether it continues ``rest``; ``None`` when none admits."""
    node, rel, d = step
    true_next = {v for t, dd, v in kb.steps(node, directed=False) if t.predicate == rel and dd == d}
    pool = members.get((rel, d), [])
    if len(pool) <= len(true_next) + 1:
        return None, False
    fallback: str | None = None
    for _ in range(candidates):
        cand = pool[rng.randrange(len(pool))]
        if cand == node or cand in true_next:
            continue
        if fallback is None:
            fallback = cand
        if _continues(kb, cand, rest):
            return cand, True
    return fallback, False


def _irrelevant_fact(
    rng: random.Random,
    node: str,
    near: set[str],
    entities: Sequence[str],
    off_path: Sequence[str],
    existing: set[str],
    candidates: int,
) -> Triple | None:
    """(node, r″, e) or (e, r″, node) with e not within two hops and r″ off the question's path."""
    for _attempt in range(candidates):
        other = entities[rng.randrange(len(entities))]
        if other in near:
            continue
        r2 = off_path[rng.randrange(len(off_path))]
        fact = Triple.of(node, r2, other) if rng.random() < 0.5 else Triple.of(other, r2, node)
        if fact.id not in existing:
            return fact
    return None


# --------------------------------------------------------------------------- training queries


@dataclass(frozen=True)
class TrainingQuery:
    """A generated training query.

    :param path: the sampled reasoning path (may contain injected triples: it was retrieved).
    :param answers: every end of ``rel_path`` walked from ``topic`` in the clean KB.
    :param gold_paths: those clean walks.
    :param source: id of the test question whose subgraph it was sampled in.
    """

    id: str
    text: str
    topic: str
    rel_path: tuple[tuple[str, str], ...]
    answers: tuple[str, ...]
    gold_paths: tuple[tuple[Triple, ...], ...]
    source: str
    path: tuple[Triple, ...] = ()

    def gold(self) -> Gold:
        return Gold(answers=self.answers, paths=self.gold_paths, entities=(self.topic,))


def _words(relation: str) -> str:
    return relation.replace("_", " ").replace(".", " ").strip()


def verbalize(topic: str, rel_path: Sequence[tuple[str, str]], template: int, bracket: bool) -> str:
    """A question over relation names (templates in the style of PathQuestion; a "-" step is
    phrased "X of which ..."). ``bracket`` marks the topic as MetaQA does (``[topic]``)."""
    name = f"[{topic}]" if bracket else topic
    phrases = [_words(r) if d == "+" else f"{_words(r)} reverse" for r, d in rel_path]
    if template % 2 == 0:
        inner = " of the ".join(reversed(phrases))
        return f"what is the {inner} of {name} ?"
    chain = " 's ".join(phrases)
    return f"what is {name} 's {chain} ?"


def training_queries(
    kb_triples: Sequence[Triple],
    questions: Sequence[QAItem],
    n: int,
    *,
    seed: int = 0,
    paths: Mapping[str, Sequence[Sequence[Triple]]] | None = None,
    neighbourhood: Sequence[Triple] | None = None,
    max_hops: int = 2,
    rank_decay: float = 1.0,
    max_answers: int = 50,
    bracket: bool | None = None,
    attempts: int = 50,
) -> list[TrainingQuery]:
    """``n`` training queries in the local subgraphs of ``questions`` (module docstring).

    :param kb_triples: the **clean** KB (gold answers are facts, never injected noise).
    :param paths: question id -> the reasoning paths retrieved for it (EvoRAG: "within the
        subgraphs retrieved based on the test queries"): a training path is a random segment of
        1–``max_hops`` consecutive triples of one of them, read in the retrieved path's direction
        from the topic. Without it, walks start on a non-final node of a gold path and follow the
        clean KB.
    :param neighbourhood: instead of ``paths``, the graph the retriever searches (noisy KB): a
        training path starts at the topic entity or one hop from it and walks 1–``max_hops``
        random hops of this graph (KRAG's candidate subgraph is the topic's k-hop neighbourhood).
    :param rank_decay: a retrieved path of rank k (0 = best) is drawn with weight 1/(k + 1)^decay —
        the paths a query actually reasons over come first (1.0 was chosen on PQ-2H; 0 = uniform).
    :param bracket: mark the topic as ``[topic]``; default: when the test questions do.
    """
    if max_hops < 1:
        raise ConfigError(f"max_hops must be >= 1, got {max_hops}")
    kb = KBIndex(kb_triples)
    rng = random.Random(f"train-{seed}")
    usable = _usable(questions, paths)
    if bracket is None:
        bracket = any("[" in q.text for q in usable)
    directions = {d for q in usable for p in q.gold_paths for _, d in relation_path(p, q.topic_entities[0])}
    test_paths = {
        (q.topic_entities[0], relation_path(p, q.topic_entities[0])) for q in usable for p in q.gold_paths
    }
    test_triples = {tuple(t.id for t in p) for q in usable for p in q.gold_paths}
    graph = KBIndex(neighbourhood) if neighbourhood is not None else kb
    out: list[TrainingQuery] = []
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for _ in range(n * attempts):
        if len(out) >= n:
            break
        q = usable[rng.randrange(len(usable))]
        if paths is not None:
            start, walk = _retrieved_segment(rng, paths[q.id], q.topic_entities[0], max_hops, rank_decay)
        elif neighbourhood is not None:
            start, walk = _neighbourhood_walk(rng, graph, q.topic_entities[0], directions, max_hops)
        else:
            start, walk = _gold_path_walk(rng, kb, q, directions, max_hops)
        rel_path = relation_path(walk, start)
        if not walk or any(d not in directions for _, d in rel_path):
            continue
        key = (start, rel_path)
        if key in seen or key in test_paths or tuple(t.id for t in walk) in test_triples:
            continue
        walks = kb.walk(start, rel_path)
        answers = tuple(dict.fromkeys(_end(p, start) for p in walks))
        if not answers or len(answers) > max_answers:
            continue
        seen.add(key)
        out.append(
            TrainingQuery(
                id=f"train-{seed}-{len(out)}",
                text=verbalize(start, rel_path, rng.randrange(2), bracket),
                topic=start,
                rel_path=rel_path,
                answers=answers,
                gold_paths=tuple(walks[:max_answers]),
                source=q.id,
                path=tuple(walk),
            )
        )
    if len(out) < n:
        log.warning("training queries: only %d of %d could be sampled", len(out), n)
    return out


def _usable(
    questions: Sequence[QAItem], paths: Mapping[str, Sequence[Sequence[Triple]]] | None
) -> list[QAItem]:
    """The test questions training paths can start from (gold path, topic and, with ``paths``, a subgraph)."""
    usable = [q for q in questions if q.gold_paths and q.topic_entities]
    if paths is not None:
        usable = [q for q in usable if paths.get(q.id)]
    if not usable:
        raise DatasetError(
            "no test question has a gold path (and a subgraph): cannot sample training queries"
        )
    return usable


def _retrieved_segment(
    rng: random.Random, retrieved: Sequence[Sequence[Triple]], topic: str, max_hops: int, rank_decay: float
) -> tuple[str, list[Triple]]:
    """1–``max_hops`` consecutive triples of a retrieved path (drawn by rank), with their start node."""
    path = retrieved[_rank_draw(rng, len(retrieved), rank_decay)]
    nodes = _walk_nodes(path, topic)
    length = rng.randint(1, min(max_hops, len(path)))
    first = rng.randrange(len(path) - length + 1)
    return nodes[first], list(path[first : first + length])


def _neighbourhood_walk(
    rng: random.Random, graph: KBIndex, topic: str, directions: set[str], max_hops: int
) -> tuple[str, list[Triple]]:
    """A random walk in the searched graph from the topic or (half the time) one hop from it."""
    start = topic
    if rng.random() < 0.5:
        first_hop = _options(graph, topic, directions, [topic])
        if first_hop:
            start = first_hop[rng.randrange(len(first_hop))][1]
    return start, _random_walk(rng, graph, start, directions, max_hops)


def _gold_path_walk(
    rng: random.Random, kb: KBIndex, q: QAItem, directions: set[str], max_hops: int
) -> tuple[str, list[Triple]]:
    """A random walk in the clean KB from a non-final node of one of ``q``'s gold paths."""
    path = q.gold_paths[rng.randrange(len(q.gold_paths))]
    nodes = _walk_nodes(path, q.topic_entities[0])
    start = nodes[rng.randrange(len(nodes) - 1)]
    return start, _random_walk(rng, kb, start, directions, max_hops)


def _random_walk(
    rng: random.Random, index: KBIndex, start: str, directions: set[str], max_hops: int
) -> list[Triple]:
    """1–``max_hops`` random steps from ``start`` in allowed directions, never revisiting a node."""
    walk: list[Triple] = []
    visited = [start]
    for _ in range(rng.randint(1, max_hops)):
        options = _options(index, visited[-1], directions, visited)
        if not options:
            break
        t, v = options[rng.randrange(len(options))]
        walk.append(t)
        visited.append(v)
    return walk


def _options(
    index: KBIndex, node: str, directions: set[str], visited: Sequence[str]
) -> list[tuple[Triple, str]]:
    """The steps from ``node`` in allowed directions to unvisited nodes, in a stable order."""
    steps = ((t, v) for t, d, v in index.steps(node, directed=False) if d in directions and v not in visited)
    return sorted(steps, key=lambda tv: tv[0].id)


def _rank_draw(rng: random.Random, n: int, decay: float) -> int:
    """A retrieved path's index, drawn with weight 1/(rank + 1)^decay (0 = uniform)."""
    weights = [1.0 / (k + 1) ** decay for k in range(n)]
    return rng.choices(range(n), weights=weights)[0]


def _walk_nodes(path: Sequence[Triple], topic: str) -> list[str]:
    """The nodes of ``path`` walked from ``topic`` (or from the end not shared with the next triple)."""
    first = path[0]
    if topic in (first.subject, first.object):
        node = topic
    elif len(path) > 1 and first.subject in (path[1].subject, path[1].object):
        node = first.object
    else:
        node = first.subject
    nodes = [node]
    for t in path:
        nodes.append(_step_of(t, nodes[-1])[2])
    return nodes


def _end(path: Sequence[Triple], start: str) -> str:
    node = start
    for t in path:
        node = _step_of(t, node)[2]
    return node
