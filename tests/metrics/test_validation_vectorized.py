"""LC over integer arrays gives exactly what the per-triple loop it replaced gave.

``reference_lc`` is that loop (TRIAGE eq. 19 as first written); random typed graphs against random
ontologies (subclass chains and cycles, disjointness through the hierarchy, domain/range,
functional and max-cardinality predicates, types the ontology does not declare, empty types,
self-loops) must give the same value and the same per-axiom counts.
"""

from __future__ import annotations

import random
from collections import defaultdict
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg.ontology import Ontology, PredicateSpec
from triage_plugins.metrics.validation import logical_consistency

CLASSES = ("Thing", "Agent", "Person", "Director", "Work", "Film", "Place", "Loop1", "Loop2")


def reference_lc(graph: GraphView, ontology: Ontology) -> dict[str, float | int]:
    triples = graph.triples
    asserted: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, t in enumerate(triples):
        if t.subject_type:
            asserted[t.subject][t.subject_type].append(i)
        if t.object_type:
            asserted[t.object][t.object_type].append(i)
    disjoint: set[int] = set()
    if ontology.disjoint:
        for by_type in asserted.values():
            for a, b in combinations(by_type, 2):
                if ontology.are_disjoint(a, b):
                    disjoint.update(by_type[a])
                    disjoint.update(by_type[b])
    domain_range: set[int] = set()
    objects: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, t in enumerate(triples):
        spec = ontology.predicates.get(t.predicate)
        if spec is None:
            continue
        for node, cls in ((t.subject, spec.domain), (t.object, spec.range)):
            types = asserted.get(node)
            if cls is not None and types and not any(ontology.is_a(x, cls) for x in types):
                domain_range.add(i)
        if spec.cardinality_limit is not None:
            objects[(t.subject, t.predicate)][t.object].append(i)
    cardinality: set[int] = set()
    for (_, predicate), by_object in objects.items():
        if len(by_object) > ontology.predicates[predicate].cardinality_limit:
            for ids in by_object.values():
                cardinality.update(ids)
    conflicting = disjoint | domain_range | cardinality
    return {
        "value": 1.0 - len(conflicting) / len(triples),
        "conflicting": len(conflicting),
        "disjointness": len(disjoint),
        "domain_range": len(domain_range),
        "cardinality": len(cardinality),
    }


def random_ontology(rng: random.Random) -> Ontology:
    parents = {"Agent": "Thing", "Person": "Agent", "Director": "Person", "Work": "Thing", "Film": "Work"}
    if rng.random() < 0.5:
        parents.update({"Loop1": "Loop2", "Loop2": "Loop1"})  # a cycle: ancestors() cuts it
    pairs = [
        ("Person", "Film"),
        ("Agent", "Work"),
        ("Place", "Agent"),
        ("Loop1", "Film"),
        ("Director", "Place"),
    ]
    disjoint = tuple(p for p in pairs if rng.random() < 0.5)
    preds = {}
    for k in range(6):
        if rng.random() < 0.8:
            preds[f"p{k}"] = PredicateSpec(
                f"p{k}",
                rng.choice([None, *CLASSES]),
                rng.choice([None, *CLASSES]),
                rng.random() < 0.3,
                rng.choice([None, None, 1, 2, 3]),
            )
    return Ontology(CLASSES, parents, disjoint, preds)


def random_graph(rng: random.Random, m: int) -> GraphView:
    kinds = [None, None, "", *CLASSES, "Undeclared"]
    n_entities = rng.randint(2, max(3, m // 2))
    triples = []
    for i in range(m):
        s, o = f"e{rng.randrange(n_entities)}", f"e{rng.randrange(n_entities)}"
        p = f"p{rng.randrange(8)}"  # p6, p7: not in the ontology
        triples.append(Triple(f"t{i}", s, p, o, rng.choice(kinds), rng.choice(kinds)))
    if triples and rng.random() < 0.3:
        triples.append(triples[0])  # a repeated triple id keeps the first
    return GraphView(triples, nodes=["isolated"])


def assert_same(graph: GraphView, ontology: Ontology) -> None:
    got = logical_consistency(graph, ontology)
    want = reference_lc(graph, ontology)
    assert got.value == want["value"]
    assert {k: got.details[k] for k in want if k != "value"} == {
        k: v for k, v in want.items() if k != "value"
    }
    assert got.n == len(graph)


@pytest.mark.parametrize("seed", range(60))
def test_random_graphs_match_the_loop(seed):
    rng = random.Random(seed)
    assert_same(random_graph(rng, rng.choice([1, 3, 10, 40, 200])), random_ontology(rng))


def test_a_larger_graph_matches_the_loop():
    rng = random.Random(7)
    assert_same(random_graph(rng, 5000), random_ontology(rng))


def test_untyped_graphs_and_ontologies_without_predicates():
    graph = GraphView([Triple.of("a", "p0", "b"), Triple.of("b", "p1", "c")])
    assert_same(graph, Ontology(CLASSES))
    assert_same(graph, random_ontology(random.Random(1)))
    assert logical_consistency(graph, Ontology(CLASSES)).value == 1.0


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30))
def test_generated_graphs_match_the_loop(seed, m):
    rng = random.Random(seed)
    assert_same(random_graph(rng, m), random_ontology(rng))
