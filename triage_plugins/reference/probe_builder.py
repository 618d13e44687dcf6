"""The distance-controlled probe set of TRIAGE §5.1, built from any KB.

Categories (12 questions each by default, 108 in all): ``off-topic`` (only fictional entities),
``semi`` (one KB entity, one fictional), ``pair-1`` … ``pair-4`` (two KB entities at undirected
distance exactly k), ``disc`` (two entities in different components), ``triple`` and ``quad``
(three or four entities on one connected shortest path). Questions use the fixed template
"How are X and Y related?" (extended to three and four entities).

Gold answers are fixed when a question is built: every KB entity it names plus the interior nodes
of one shortest path connecting them. A fictional entity is never in the KB, so a ``semi``
question can never be covered; ``off-topic`` questions have no gold answer (the paper excludes them
from the predictive analysis).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from triage_plugins.contract.errors import DatasetError
from triage_plugins.contract.graph_view import GraphView, normalize_label

__all__ = ["CATEGORIES", "PAPER_TABLE5", "PAPER_THETA_ERC", "ProbeQuestion", "build_probe"]

#: TRIAGE Table 5 (PQ-3H, five retrievers pooled, 480 observations), for side-by-side reporting.
PAPER_TABLE5: dict[str, dict[str, float]] = {
    "ERC < 0.5": {"CC": 44.3, "Hits@1": 77.1},
    "0.5 <= ERC < 1": {"CC": 45.5},
    "ERC = 1": {"CC": 98.4, "Hits@1": 91.4},
    "RRS = 0": {"CC": 54.8},
    "RRS > 0": {"CC": 93.2},
}
#: The paper's ERC threshold on this probe (Youden's J).
PAPER_THETA_ERC = 0.67

CATEGORIES: tuple[str, ...] = (
    "off-topic",
    "semi",
    "pair-1",
    "pair-2",
    "pair-3",
    "pair-4",
    "disc",
    "triple",
    "quad",
)

_SYLLABLES = (
    "zor",
    "bla",
    "quin",
    "mir",
    "ela",
    "vas",
    "kor",
    "thal",
    "uma",
    "dre",
    "vix",
    "olo",
    "pra",
    "neth",
)


@dataclass(frozen=True)
class ProbeQuestion:
    """One probe question.

    :param entities: the KB node ids it names (fictional names are in ``fictional``).
    :param gold_answers: named KB entities plus the interior nodes of the fixed shortest path.
    :param gold_path: the node sequence of that path (empty when there is none).
    :param distance: the undirected distance between the named entities (pairs), else ``None``.
    """

    id: str
    category: str
    text: str
    entities: tuple[str, ...]
    fictional: tuple[str, ...]
    gold_answers: tuple[str, ...]
    gold_path: tuple[str, ...]
    distance: int | None


def _verbalize(names: Sequence[str]) -> str:
    if len(names) == 2:
        return f"How are {names[0]} and {names[1]} related?"
    return f"How are {', '.join(names[:-1])} and {names[-1]} related?"


def _display(graph: GraphView, node: str) -> str:
    return graph.label(node).replace("_", " ")


def _bfs(graph: GraphView, source: int, max_depth: int) -> tuple[dict[int, int], dict[int, int]]:
    dist = {source: 0}
    parent: dict[int, int] = {}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        if dist[u] >= max_depth:
            continue
        for v in graph.indices[graph.indptr[u] : graph.indptr[u + 1]].tolist():
            if v not in dist:
                dist[v] = dist[u] + 1
                parent[v] = u
                queue.append(v)
    return dist, parent


def _path_to(parent: dict[int, int], source: int, target: int) -> list[int]:
    out = [target]
    while out[-1] != source:
        out.append(parent[out[-1]])
    return out[::-1]


class _Fiction:
    def __init__(self, graph: GraphView, rng: random.Random) -> None:
        self.taken = {normalize_label(_display(graph, n)) for n in graph.nodes}
        self.rng = rng

    def name(self) -> str:
        while True:
            first = "".join(self.rng.choice(_SYLLABLES) for _ in range(2)).capitalize()
            last = "".join(self.rng.choice(_SYLLABLES) for _ in range(3)).capitalize()
            name = f"{first} {last}"
            if normalize_label(name) not in self.taken:
                self.taken.add(normalize_label(name))
                return name


def build_probe(
    graph: GraphView,
    *,
    per_category: int = 12,
    seed: int = 0,
    max_tries: int = 20_000,
    candidates: set[str] | None = None,
) -> list[ProbeQuestion]:
    """Sample the probe from ``graph`` (deterministic for a seed).

    :param candidates: when given, the named KB entities are drawn from these node ids only (for
        example the entities a benchmark's questions mention); interior path nodes may be any node.

    A category the KB cannot supply (e.g. ``disc`` in a connected KB) yields fewer questions; the
    caller reports the shortfall.
    """
    if per_category < 1:
        raise DatasetError("per_category must be >= 1")
    if len(graph.nodes) < 2 or len(graph.triples) == 0:
        raise DatasetError("the KB needs at least two entities and one triple to build a probe")
    sampler = _ProbeSampler(graph, random.Random(seed), candidates)
    for category in CATEGORIES:
        made = tries = 0
        while made < per_category and tries < max_tries:
            tries += 1
            made += sampler.draw(category)
    return sampler.out


class _ProbeSampler:
    """Draws probe questions of each category from one KB, never the same entities twice."""

    def __init__(self, graph: GraphView, rng: random.Random, candidates: set[str] | None) -> None:
        self.graph = graph
        self.rng = rng
        self.fiction = _Fiction(graph, rng)
        self.allowed = (
            None if candidates is None else {graph.node_index(c) for c in candidates if graph.has_node(c)}
        )
        self.connected = [
            i
            for i in range(len(graph.nodes))
            if graph.indptr[i + 1] > graph.indptr[i] and (self.allowed is None or i in self.allowed)
        ]
        if not self.connected:
            raise DatasetError("no candidate entity of the KB has an edge: cannot build a probe")
        self.comp = graph.component_labels()
        self.out: list[ProbeQuestion] = []
        self.used: set[tuple[str, ...]] = set()

    def _ok(self, v: int) -> bool:
        return self.allowed is None or v in self.allowed

    def draw(self, category: str) -> bool:
        """Try once to add a question of ``category``; whether one was added."""
        rng, graph, fiction, connected = self.rng, self.graph, self.fiction, self.connected
        if category == "off-topic":
            return self.add(category, [], [fiction.name(), fiction.name()], [], None)
        if category == "semi":
            return self.add(category, [rng.choice(connected)], [fiction.name()], [], None)
        if category.startswith("pair-"):
            k = int(category[-1])
            s = rng.choice(connected)
            dist, parent = _bfs(graph, s, k)
            at_k = sorted(v for v, d in dist.items() if d == k and self._ok(v))
            if not at_k:
                return False
            t = rng.choice(at_k)
            return self.add(category, [s, t], [], _path_to(parent, s, t), k)
        if category == "disc":
            a, b = rng.choice(connected), rng.choice(connected)
            return self.comp[a] != self.comp[b] and self.add(category, [a, b], [], [], None)
        # triple / quad: entities spread along one shortest path
        m = 3 if category == "triple" else 4
        s = rng.choice(connected)
        dist, parent = _bfs(graph, s, 2 * (m - 1))
        far = sorted(v for v, d in dist.items() if d >= m - 1 and self._ok(v))
        if not far:
            return False
        t = rng.choice(far)
        path = _path_to(parent, s, t)
        picks = sorted({0, len(path) - 1, *rng.sample(range(1, len(path) - 1), m - 2)})
        return len(picks) == m and self.add(category, [path[i] for i in picks], [], path, None)

    def add(
        self, category: str, ents: list[int], fict: list[str], path: list[int], distance: int | None
    ) -> bool:
        """Append the question (unless these entities were already asked); whether it was new."""
        graph = self.graph
        names_ids = tuple(graph.nodes[i] for i in ents)
        key = (category, *sorted(names_ids), *fict)
        if key in self.used:
            return False
        self.used.add(key)
        names = [_display(graph, n) for n in names_ids] + fict
        order = list(range(len(names)))
        self.rng.shuffle(order)
        text = _verbalize([names[i] for i in order])
        gold: list[str] = []
        if category != "off-topic":
            # a fictional entity is a gold answer no KG retrieval can cover (so semi is never covered)
            gold = list(dict.fromkeys(list(names_ids) + [graph.nodes[i] for i in path] + fict))
        n = sum(1 for q in self.out if q.category == category)
        self.out.append(
            ProbeQuestion(
                id=f"{category}-{n + 1:02d}",
                category=category,
                text=text,
                entities=names_ids,
                fictional=tuple(fict),
                gold_answers=tuple(gold),
                gold_path=tuple(graph.nodes[i] for i in path),
                distance=distance,
            )
        )
        return True
