"""The probe builder yields TRIAGE §5.1's category structure; distances are checked with networkx."""

from __future__ import annotations

import random
from collections import Counter

import networkx as nx
import pytest

from triage_plugins.contract.errors import DatasetError
from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.reference.probe_builder import CATEGORIES, build_probe


def _random_kb(seed: int = 3) -> GraphView:
    rng = random.Random(seed)
    triples = []
    # two components: a sparse random tree-like graph of 120 nodes and a separate one of 40
    for lo, hi in ((0, 120), (200, 240)):
        for i in range(lo + 1, hi):
            j = rng.randrange(lo, i)
            triples.append(Triple.of(f"e_{j}", rng.choice(["spouse", "parents", "born_in"]), f"e_{i}"))
        for _ in range((hi - lo) // 4):
            a, b = rng.randrange(lo, hi), rng.randrange(lo, hi)
            if a != b:
                triples.append(Triple.of(f"e_{a}", "knows", f"e_{b}"))
    return GraphView(triples)


def test_category_structure_and_distances():
    graph = _random_kb()
    und = graph.to_networkx().to_undirected()
    questions = build_probe(graph, per_category=12, seed=1)
    assert Counter(q.category for q in questions) == dict.fromkeys(CATEGORIES, 12)
    assert len({q.id for q in questions}) == 108
    for q in questions:
        for e in q.entities:
            assert graph.has_node(e)
        if q.category == "off-topic":
            assert q.entities == () and len(q.fictional) == 2 and q.gold_answers == ()
        elif q.category == "semi":
            assert len(q.entities) == 1 and len(q.fictional) == 1
            assert all(not graph.has_node(f) for f in q.fictional)
            # the fictional name is a gold answer, so no retrieval can cover a semi question
            assert set(q.gold_answers) == {q.entities[0], q.fictional[0]}
        elif q.category.startswith("pair-"):
            k = int(q.category[-1])
            a, b = q.entities
            assert nx.shortest_path_length(und, a, b) == k == q.distance
            assert len(q.gold_path) == k + 1
            assert set(q.gold_answers) == set(q.gold_path)
        elif q.category == "disc":
            a, b = q.entities
            assert not nx.has_path(und, a, b)
            assert set(q.gold_answers) == {a, b}
        else:
            m = 3 if q.category == "triple" else 4
            assert len(q.entities) == m
            path = q.gold_path
            assert nx.shortest_path_length(und, path[0], path[-1]) == len(path) - 1
            assert set(q.entities) <= set(path)
            assert set(q.gold_answers) == set(path)
        # the template names every entity
        assert q.text.startswith("How are ") and q.text.endswith(" related?")
        for name in q.fictional:
            assert name in q.text
        for e in q.entities:
            assert e.replace("_", " ") in q.text


def test_fictional_names_never_collide_with_the_kb():
    graph = _random_kb()
    labels = {normalize_label(n) for n in graph.nodes}
    for q in build_probe(graph, per_category=12, seed=5):
        for f in q.fictional:
            assert normalize_label(f) not in labels


def test_deterministic_per_seed():
    graph = _random_kb()
    assert build_probe(graph, seed=7) == build_probe(graph, seed=7)
    assert build_probe(graph, seed=7) != build_probe(graph, seed=8)


def test_connected_kb_has_no_disc_questions():
    graph = GraphView([Triple.of(f"n{i}", "r", f"n{i + 1}") for i in range(30)])
    questions = build_probe(graph, per_category=3, seed=0, max_tries=500)
    counts = Counter(q.category for q in questions)
    assert counts["disc"] == 0
    assert counts["pair-4"] == 3


def test_empty_kb_is_a_clear_error():
    with pytest.raises(DatasetError, match="at least two entities"):
        build_probe(GraphView([]))
