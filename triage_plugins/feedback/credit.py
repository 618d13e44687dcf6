"""Which retrieved paths a rated answer came from: credit where it is due (EvoRAG §2.1, §3 ➋, §4.2).

A reasoning path "e0 → e1 → … → ei" starts at a query entity (§2.1), and path retrieval collects
"the top-M reasoning paths starting from the query entities and connecting them to potential
target answers" (§3 ➋). Feedback on an answer A is therefore credited to the paths that *connect*
a query entity to A (§4.2: a path's utility is how much it "contributes to the response"), not to
every path that touches A somewhere: for "Who directed Jaws?" answered "Spielberg", a planted
(Inception, directed_by, Spielberg) touches the answer but did not produce it.

:func:`path_roles` gives every path one role:

- :data:`SUPPORTS` — it leads from a query entity to an answer entity:

  * a retriever's path: the node it ends on, walked from its start (its query entity when it has
    one), is an answer entity — passing through one and walking on does not count; a one-hop path
    with no query entity has no direction, and supports when it touches an answer entity;
  * flat retrieval (the retriever reported no paths, so each retrieved triple is a one-hop path,
    ``flat=True``): the triple lies on a shortest chain, through the retrieved triples, of at most
    ``max_hops`` triples from a query entity to an answer entity — the path §3 ➋ would have
    retrieved, rebuilt from the triples the framework did retrieve. An answer entity no chain
    reaches (the reader took it from an entity description or a chunk of the context) is credited
    to the retrieved triples that name it, the only retrieved relations it can have come from;
  * a chunk: its text names an answer entity.

- :data:`COMPETES` — it touches a query entity but does not lead to the answer (evidence for a
  different answer to the same question); every chunk that does not name the answer.
- :data:`UNRELATED` — it does not support, touches no query entity and (flat) lies on no chain: it
  neither produced nor contradicted the answer.

Flat retrieval without query entities has nothing to walk from, and falls back to the earlier
rule: a triple supports when it touches an answer entity, and competes otherwise; likewise when
every answer entity is a query entity (a chain of length 0 credits nothing). The evaluators'
``credit="entity"`` keeps that earlier rule everywhere, for comparison.

**Relation-aware credit** (``relations`` given: the stems of the relation the question asks about,
:func:`triage_plugins.kg.relations.question_stems`; DESIGN §4 "Credit in the real frameworks",
where EvoRAG is silent — its paths are reasoning paths, the frameworks retrieve relationships):

- flat triples. *Parallel statements*: where several retrieved triples join the same two entities
  and some state the asked relation, only those are walked ("Who praised Pulp Fiction?" walks
  "Cameron praised Pulp Fiction", never its false twin "Cameron directed Pulp Fiction"). The
  question is *relation-bound* when its relation words are stated by some retrieved triple; then a
  chain to an answer entity is credited only when one of its triples states the asked relation,
  and an answer entity no chain reaches credits nothing (the earlier rule credited the triples
  naming it: "Titanic directed by Ridley Scott" for "Who directed Alien?"). A *rejected* answer's
  chains (``roles(..., misled=True)``) are blamed even when none states the asked relation: the
  reader took the wrong answer from them ("Who starred in Interstellar?" answered from
  "Christopher Nolan directed Interstellar"), and a rejected answer no chain reaches is blamed on
  the triples naming it (those stating the asked relation, when any do); parallel statements are
  still filtered, so a true twin is never blamed for its false one. A triple off every credited
  chain *competes* only when it is an alternative answer — it leaves a query entity (or a credited
  chain's inner node: the conflicting second hop of a two-hop question) by the asked relation to
  another object — and is *unrelated* otherwise. Where the question is not relation-bound (a
  paraphrase: "couple" for ``spouse``), chains are credited relation-blind and nothing competes:
  no triple is lowered without evidence that it answers the same question.
- chunks are credited by the statements they state (``statements``: the retrieved triples). The
  triples are credited as above; a chunk *supports* when one of its sentences states a supporting
  triple (names both its entities), *competes* when its sentences state only competing ones, and
  is *unrelated* otherwise — so each hop of a multi-hop chain credits the chunk that states it, and
  a chunk naming the answer alone is never credited. Without retrieved triples (a chunk-only
  retrieval) a chunk *supports* when one of its sentences names a query entity, an answer entity
  and (relation-bound question) a stem of the asked relation, and *competes* when a sentence names
  a query entity and the asked relation but no answer entity. A rejected answer that no chunk
  states so is blamed on the chunks naming both it and a query entity (in any of their sentences).

Reasoning paths a retriever reported (not flat) keep the rules above this paragraph.

Normalized labels are computed once per distinct triple and call (:class:`Ends`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Literal

from triage_plugins.contract.events import Chunk, Triple
from triage_plugins.contract.graph_view import normalize_label
from triage_plugins.kg.relations import asks_about, statement_stems, text_stems

__all__ = [
    "COMPETES",
    "CREDIT_RULES",
    "SUPPORTS",
    "UNRELATED",
    "Credit",
    "Ends",
    "PathFacts",
    "chain_triples",
    "ends_on",
    "relation_roles",
    "stating_roles",
    "has_phrase",
    "path_roles",
    "touches",
]

SUPPORTS, COMPETES, UNRELATED = "supports", "competes", "unrelated"
#: ``"relation"`` (default): chains plus the asked relation for flat triples, content for chunks;
#: ``"path"``: the relation-blind rules; ``"entity"``: touching the answer entity is enough.
Credit = Literal["relation", "path", "entity"]
CREDIT_RULES: tuple[str, ...] = ("relation", "path", "entity")

Unit = Triple | Chunk


def has_phrase(text: str, phrase: str) -> bool:
    """Whole-word occurrence of a normalized phrase in a normalized text."""
    return bool(phrase) and f" {phrase} " in f" {text} "


class Ends:
    """Normalized (subject, object) of each triple, computed once per triple id within one evaluation."""

    __slots__ = ("cache", "stated")

    def __init__(self) -> None:
        self.cache: dict[str, tuple[str, str]] = {}
        self.stated: dict[str, frozenset[str]] = {}

    def statement(self, t: Triple) -> frozenset[str]:
        """The relation stems ``t`` states (:func:`~triage_plugins.kg.relations.statement_stems`)."""
        got = self.stated.get(t.id)
        if got is None:
            got = self.stated[t.id] = statement_stems(t.predicate, t.subject, t.object)
        return got

    def __call__(self, t: Triple) -> tuple[str, str]:
        got = self.cache.get(t.id)
        if got is None:
            got = self.cache[t.id] = (normalize_label(t.subject), normalize_label(t.object))
        return got

    def entities(self, paths: Iterable[Sequence[Unit]]) -> set[str]:
        """Every normalized entity of the triples on ``paths``."""
        out: set[str] = set()
        for path in paths:
            for u in path:
                if isinstance(u, Triple):
                    out.update(self(u))
        return out


def touches(path: Sequence[Unit], targets: set[str], ends: Ends) -> bool:
    """A triple path touches a target when one of its entities is it; a chunk, when its text names it."""
    if not targets:
        return False
    for unit in path:
        if isinstance(unit, Triple):
            s, o = ends(unit)
            if s in targets or o in targets:
                return True
        else:
            text = normalize_label(unit.text)
            if any(has_phrase(text, t) for t in targets):
                return True
    return False


def _walk(pairs: Sequence[tuple[str, str]], topics: set[str]) -> str | None:
    """The node a triple path ends on, walked from its start; ``None`` for a one-hop path with no topic.

    The start is the end of the first triple that is a topic entity (else the end the first triple
    does not share with the second).
    """
    s, o = pairs[0]
    if s in topics:
        node = s
    elif o in topics:
        node = o
    elif len(pairs) > 1:
        nxt = pairs[1]
        node = o if s in nxt and o not in nxt else s
    else:
        return None
    for ts, to in pairs:
        node = to if ts == node else ts if to == node else to
    return node


def end_node(path: Sequence[Triple], topics: set[str], ends: Ends) -> str | None:
    """:func:`_walk` over a triple path."""
    return _walk([ends(t) for t in path], topics)


def ends_on(path: Sequence[Unit], targets: set[str], topics: set[str], ends: Ends) -> bool:
    """A triple path *leads to* a target when the node it ends on (:func:`end_node`) is one; a
    one-hop path with no topic entity, when it touches one; a chunk path, when its text names one."""
    if not targets or not path:
        return False
    if not all(isinstance(u, Triple) for u in path):
        return touches(path, targets, ends)
    node = end_node(path, topics, ends)  # type: ignore[arg-type]
    if node is None:
        s, o = ends(path[0])  # type: ignore[arg-type]
        return s in targets or o in targets
    return node in targets


def _distances(adj: dict[str, set[str]], sources: set[str], limit: int) -> dict[str, int]:
    dist = {s: 0 for s in sources if s in adj}
    queue = deque(dist)
    while queue:
        node = queue.popleft()
        d = dist[node]
        if d >= limit:
            continue
        for nb in adj[node]:
            if nb not in dist:
                dist[nb] = d + 1
                queue.append(nb)
    return dist


def chain_triples(
    triples: Sequence[Triple],
    topics: set[str],
    targets: set[str],
    max_hops: int,
    ends: Ends,
    *,
    unreached: bool = False,
) -> list[bool]:
    """For each triple: does it lie on a shortest chain (≤ ``max_hops``) from a topic to a target?

    Each target gets its own shortest chains. The chains run through ``triples`` taken as
    undirected edges (EvoRAG's paths follow relations either way: "Inception directed_by Nolan"
    answers "What did Nolan direct?").

    :param unreached: also mark, for a target no chain reaches, the triples that touch it.
    """
    adj: dict[str, set[str]] = {}
    pairs = [ends(t) for t in triples]
    for s, o in pairs:
        adj.setdefault(s, set()).add(o)
        adj.setdefault(o, set()).add(s)
    from_topic = _distances(adj, topics, max_hops)
    out = [False] * len(pairs)
    for target in targets:
        length = from_topic.get(target)
        if length is None:
            if unreached:
                out = [hit or target in pair for hit, pair in zip(out, pairs, strict=True)]
            continue
        to_target = _distances(adj, {target}, max_hops)
        for k, (s, o) in enumerate(pairs):
            if out[k]:
                continue
            ds, do = from_topic.get(s), from_topic.get(o)
            ts, to = to_target.get(s), to_target.get(o)
            out[k] = (ds is not None and to is not None and ds + 1 + to == length) or (
                do is not None and ts is not None and do + 1 + ts == length
            )
    return out


_SENTENCE = re.compile(r"[.!?;\n]+")


def relation_roles(
    triples: Sequence[Triple],
    topics: set[str],
    answers: set[str],
    relations: frozenset[str],
    max_hops: int,
    ends: Ends,
    *,
    misled: bool = False,
) -> list[str]:
    """The role of each flat one-hop triple under relation-aware credit (module docstring).

    :param answers: normalized answer entities that are not query entities.
    :param relations: stems of the relation the question asks about.
    :param misled: ``answers`` is a rejected answer: its chains are credited even when none states
        the asked relation (what produced a wrong answer is blamed, whatever its relation).
    """
    pairs = [frozenset(ends(t)) for t in triples]
    stated = [asks_about(relations, ends.statement(t)) for t in triples]
    bound = any(stated)
    stating = {pair for pair, m in zip(pairs, stated, strict=True) if m}
    walk = [k for k, pair in enumerate(pairs) if stated[k] or pair not in stating]
    walked = [triples[k] for k in walk]
    on = [False] * len(triples)
    for target in sorted(answers):
        hits = [walk[j] for j, c in enumerate(chain_triples(walked, topics, {target}, max_hops, ends)) if c]
        if not hits and misled:  # no chain: the rejected answer came from the triples naming it
            hits = [k for k in walk if target in pairs[k]]
            hits = [k for k in hits if stated[k]] or hits
        if bound and not misled and not any(stated[k] for k in hits):
            continue  # a relation-bound question: this chain states no asked relation
        for k in hits:
            on[k] = True
    # an alternative answer leaves a query entity or a chain's inner node by an asked relation
    inner = set(topics).union(*(pairs[k] for k in range(len(pairs)) if on[k])) - answers
    roles: list[str] = []
    for k, pair in enumerate(pairs):
        if on[k]:
            roles.append(SUPPORTS)
        elif stated[k] and not inner.isdisjoint(pair) and answers.isdisjoint(pair):
            roles.append(COMPETES)  # same entity, same relation, another object
        else:
            roles.append(UNRELATED)
    return roles


def chunk_roles(
    sentences: Sequence[Sequence[str]], topics: set[str], answers: set[str], relations: frozenset[str]
) -> list[str]:
    """The role of each chunk, given its normalized sentences, under credit by content (module docstring)."""
    stems = [[text_stems(s) for s in chunk] for chunk in sentences]
    bound = bool(relations) and any(not relations.isdisjoint(st) for chunk in stems for st in chunk)
    roles: list[str] = []
    for chunk, chunk_stems in zip(sentences, stems, strict=True):
        role = UNRELATED
        for sentence, st in zip(chunk, chunk_stems, strict=True):
            if topics and not any(has_phrase(sentence, t) for t in topics):
                continue
            if bound and relations.isdisjoint(st):
                continue
            if any(has_phrase(sentence, a) for a in answers):
                role = SUPPORTS
                break
            if bound and topics:
                role = COMPETES
        roles.append(role)
    return roles


def stating_roles(
    sentences: Sequence[Sequence[str]],
    triples: Sequence[Triple],
    roles: Sequence[str],
    ends: Ends,
    relations: frozenset[str],
) -> list[str]:
    """The role of each chunk by the retrieved triples its sentences state (provenance by content: a
    sentence states a triple when it names both its entities and, when the triple was credited for
    stating the asked relation, a stem of it too — so a planted "Affleck directed Good Will Hunting"
    does not state the credited "Affleck wrote Good Will Hunting"): it *supports* when it states a
    supporting triple, *competes* when it states only competing ones, and is *unrelated* otherwise.
    """
    stated = [
        (ends(t), role, asks_about(relations, ends.statement(t)))
        for t, role in zip(triples, roles, strict=True)
        if role != UNRELATED
    ]
    out: list[str] = []
    for chunk in sentences:
        stems = [text_stems(x) for x in chunk]
        role = UNRELATED
        for (s, o), r, asked in stated:
            if any(
                has_phrase(x, s) and has_phrase(x, o) and (not asked or not relations.isdisjoint(st))
                for x, st in zip(chunk, stems, strict=True)
            ):
                role = r
                if r == SUPPORTS:
                    break
        out.append(role)
    return out


_EMPTY, _CHUNK = 0, -1


class PathFacts:
    """What :func:`path_roles` needs of each path, computed once per evaluation (labels normalized
    once per triple, each path walked once), so several answer sets cost only set lookups.

    :param flat: the paths are the retrieved triples one by one (the retriever reported none).
    :param relations: stems of the relation the question asks about: relation-aware credit of flat
        triples and of chunks (module docstring); ``None``: the relation-blind rules.
    """

    __slots__ = (
        "_kind",
        "relations",
        "statements",
        "_nodes",
        "_probe",
        "_on_topic",
        "_texts",
        "paths",
        "topics",
        "flat",
        "max_hops",
        "ends",
    )

    def __init__(
        self,
        paths: Sequence[Sequence[Unit]],
        topics: set[str],
        *,
        flat: bool = False,
        max_hops: int = 3,
        ends: Ends | None = None,
        relations: frozenset[str] | None = None,
        statements: Sequence[Triple] = (),
    ) -> None:
        self.paths, self.topics, self.flat, self.max_hops = paths, topics, flat, max_hops
        self.relations = relations
        self.statements = statements
        self.ends = ends = ends or Ends()
        n = len(paths)
        self._kind: list[int] = [_EMPTY] * n  # _EMPTY, _CHUNK, or the number of triples (>= 2 = _TRIPLES)
        self._nodes: list[Sequence[str]] = [()] * n  # every endpoint of the path's triples
        self._probe: list[Sequence[str]] = [()] * n  # supports iff one of these is a target
        self._on_topic = [False] * n
        self._texts: dict[int, list[str]] = {}
        cache = ends.cache
        no_topic = not topics
        for k, path in enumerate(paths):
            if not path:
                continue
            pairs = []
            nodes: list[str] = []
            chunk = False
            for u in path:
                if isinstance(u, Triple):
                    pair = cache.get(u.id) or ends(u)
                    pairs.append(pair)
                    nodes += pair
                else:
                    chunk = True
            self._nodes[k] = nodes
            self._on_topic[k] = not no_topic and not topics.isdisjoint(nodes)
            if chunk:
                self._kind[k] = _CHUNK
                texts = [u.text for u in path if isinstance(u, Chunk)]
                if relations is not None:
                    texts = [part for text in texts for part in _SENTENCE.split(text)]
                self._texts[k] = [n for n in map(normalize_label, texts) if n]
                continue
            self._kind[k] = len(pairs)
            end = _walk(pairs, topics)
            self._probe[k] = nodes if end is None else (end,)

    def _touches(self, k: int, targets: set[str]) -> bool:
        if not targets.isdisjoint(self._nodes[k]):
            return True
        return any(has_phrase(text, t) for text in self._texts.get(k, ()) for t in targets)

    def _unwalked(self, k: int, answers: set[str]) -> str:
        """Relation-aware role of a flat triple when no chain can be walked: with no query entity, it
        supports when it names an answer entity and states the asked relation; otherwise unrelated."""
        if self.topics or answers.isdisjoint(self._nodes[k]):
            return UNRELATED
        relations = self.relations or frozenset()
        stated = asks_about(relations, self.ends.statement(self.paths[k][0]))  # type: ignore[arg-type]
        return SUPPORTS if stated or not relations else UNRELATED

    def roles(self, targets: set[str], *, misled: bool = False) -> list[str]:
        """The role of every path for the normalized answer entities ``targets`` (module docstring).

        :param misled: ``targets`` is an answer the feedback rejects (relation-aware credit only).
        """
        topics, flat, on_topic = self.topics, self.flat, self._on_topic
        answers = targets - topics
        chains = flat and bool(topics) and bool(answers)
        disjoint = targets.isdisjoint
        roles: list[str] = []
        one_hop: list[int] = []
        for k, kind in enumerate(self._kind):
            if kind >= 1:  # triples
                if flat and kind == 1:
                    if chains:
                        roles.append(UNRELATED)  # decided below, from the chains
                        one_hop.append(k)
                    elif self.relations is not None:
                        roles.append(self._unwalked(k, answers))
                    else:
                        roles.append(COMPETES if disjoint(self._nodes[k]) else SUPPORTS)
                elif not disjoint(self._probe[k]):
                    roles.append(SUPPORTS)
                else:
                    roles.append(COMPETES if not topics or on_topic[k] else UNRELATED)
            elif kind == _CHUNK:
                roles.append(SUPPORTS if self._touches(k, targets) else COMPETES)
            else:
                roles.append(UNRELATED)
        relations = self.relations
        if one_hop:
            triples: list[Triple] = [self.paths[k][0] for k in one_hop]  # type: ignore[misc]
            if relations is not None:
                found = relation_roles(
                    triples, topics, answers, relations, self.max_hops, self.ends, misled=misled
                )
            else:
                on_chain = chain_triples(triples, topics, answers, self.max_hops, self.ends, unreached=True)
                found = [
                    SUPPORTS if c else COMPETES if on_topic[k] else UNRELATED
                    for k, c in zip(one_hop, on_chain, strict=True)
                ]
            for k, role in zip(one_hop, found, strict=True):
                roles[k] = role
        if relations is not None and self._texts:
            chunks = sorted(self._texts)
            sentences = [self._texts[k] for k in chunks]
            if self.statements and topics and answers:
                credited = relation_roles(
                    self.statements, topics, answers, relations, self.max_hops, self.ends, misled=misled
                )
                found = stating_roles(sentences, self.statements, credited, self.ends, relations)
            else:
                found = chunk_roles(sentences, topics, answers or targets, relations)
            if misled and SUPPORTS not in found:  # blamed on the chunks naming it and the question's entity
                names = answers or targets
                found = [
                    SUPPORTS
                    if any(has_phrase(x, a) for x in chunk for a in names)
                    and (not topics or any(has_phrase(x, t) for x in chunk for t in topics))
                    else UNRELATED
                    for chunk in sentences
                ]
            for k, role in zip(chunks, found, strict=True):
                roles[k] = role
        return roles


def path_roles(
    paths: Sequence[Sequence[Unit]],
    targets: set[str],
    topics: set[str],
    *,
    flat: bool = False,
    max_hops: int = 3,
    ends: Ends | None = None,
    relations: frozenset[str] | None = None,
    misled: bool = False,
) -> list[str]:
    """The role of every path for the answer entities ``targets`` (module docstring).

    :param targets: normalized answer entities.
    :param topics: normalized query entities.
    :param flat: the paths are the retrieved triples one by one (the retriever reported none):
        one-hop paths are credited through chains (``False``: every path is taken as a reasoning path).
    :param relations: stems of the asked relation (relation-aware credit), or ``None``.
    :param misled: ``targets`` is an answer the feedback rejects.
    """
    facts = PathFacts(paths, topics, flat=flat, max_hops=max_hops, ends=ends, relations=relations)
    return facts.roles(targets, misled=misled)
