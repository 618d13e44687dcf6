"""GraphView (DESIGN §2, §4 DNR): indices, undirected CSR structure, conversions, validation."""

from __future__ import annotations

import itertools
import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage_plugins.contract.errors import EventError
from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView, normalize_label


@pytest.fixture
def small() -> GraphView:
    # a -p-> b, b -q-> c, a -r-> c, c -loop-> c, a -p2-> b (parallel edge, own id), isolated z
    return GraphView(
        [
            Triple.of("a", "p", "b"),
            Triple.of("b", "q", "c"),
            Triple.of("a", "r", "c"),
            Triple.of("c", "loop", "c"),
            Triple.of("a", "p2", "b"),
        ],
        nodes=["z", "a"],
        labels={"a": "Alpha", "ghost": "not a node"},
        sources={"a|p|b": ["ch1", "ch2"], "nope|x|y": ["ch9"]},
    )


# ---------------------------------------------------------------------------- indices and accessors


def test_nodes_in_first_seen_order_with_extra_nodes_first(small: GraphView) -> None:
    assert small.nodes == ("z", "a", "b", "c")
    assert [small.node_index(n) for n in small.nodes] == [0, 1, 2, 3]
    assert len(small) == 5
    assert repr(small) == "GraphView(4 nodes, 5 triples)"


def test_degree_counts_distinct_incident_triples(small: GraphView) -> None:
    # a: a|p|b, a|r|c, a|p2|b = 3; b: a|p|b, b|q|c, a|p2|b = 3;
    # c: b|q|c, a|r|c, c|loop|c (a self-loop counts once) = 3; z: isolated = 0
    assert small.degrees().tolist() == [0, 3, 3, 3]
    assert small.degree("c") == 3
    assert small.degree("z") == 0


def test_neighbours_are_distinct_and_undirected(small: GraphView) -> None:
    assert small.neighbours("a") == ["b", "c"]
    assert sorted(small.neighbours("b")) == ["a", "c"]
    assert sorted(small.neighbours("c")) == ["a", "b", "c"]  # the self-loop makes c its own neighbour
    assert small.neighbours("z") == []


def test_incident_triples(small: GraphView) -> None:
    assert {t.id for t in small.incident_triples("b")} == {"a|p|b", "b|q|c", "a|p2|b"}
    assert {t.id for t in small.incident_triples("c")} == {"b|q|c", "a|r|c", "c|loop|c"}
    assert small.incident_triples("z") == []


def test_lookups(small: GraphView) -> None:
    assert small.triple("b|q|c") == Triple.of("b", "q", "c")
    assert small.triple_index("a|r|c") == 2
    assert small.has_triple("a|p|b") and not small.has_triple("a|p|c")
    assert small.has_node("z") and not small.has_node("ghost")
    assert small.label("a") == "Alpha" and small.label("b") == "b"
    # labels and sources of unknown nodes/triples are dropped
    assert dict(small.labels) == {"a": "Alpha"}
    assert dict(small.sources) == {"a|p|b": ("ch1", "ch2")}
    with pytest.raises(KeyError):
        small.neighbours("ghost")
    with pytest.raises(KeyError):
        small.triple("nope")


def test_subject_and_object_index(small: GraphView) -> None:
    assert small.subject_index.tolist() == [1, 2, 1, 3, 1]
    assert small.object_index.tolist() == [2, 3, 3, 3, 2]


def test_arrays_are_read_only(small: GraphView) -> None:
    for arr in (small.indptr, small.indices, small.incident, small.subject_index, small.object_index):
        with pytest.raises(ValueError):
            arr[0] = 7


def test_duplicate_triple_ids_are_kept_once() -> None:
    first = Triple("t1", "a", "p", "b")
    g = GraphView([first, Triple("t1", "x", "q", "y"), Triple("t2", "a", "p", "b")])
    assert [t.id for t in g.triples] == ["t1", "t2"]
    assert g.triple("t1") is first
    assert g.nodes == ("a", "b")  # x, y only appeared in the dropped duplicate
    assert g.degree("a") == 2  # t1 and t2: distinct ids with the same (s, p, o) both count


def test_many_parallel_triples_keep_the_graph_connected() -> None:
    g = GraphView([Triple(f"t{i}", "a", "p", "b") for i in range(300)])
    assert g.degrees().tolist() == [300, 300]
    labels = g.component_labels()
    assert labels[0] == labels[1]
    assert g.shortest_path_length("a", "b") == 1


def test_empty_graph() -> None:
    g = GraphView([])
    assert g.nodes == () and g.triples == ()
    assert g.degrees().tolist() == []
    assert g.component_labels().tolist() == []
    assert g.indptr.tolist() == [0]
    assert g.shortest_path_length("a", "b") is None


def test_isolated_nodes_only() -> None:
    g = GraphView([], nodes=["x", "y"])
    assert g.degrees().tolist() == [0, 0]
    assert len(set(g.component_labels().tolist())) == 2
    assert g.shortest_path_length("x", "y") is None
    assert g.shortest_path_length("x", "x") == 0


# ---------------------------------------------------------------------------- paths


def test_shortest_path_length_is_undirected_and_respects_max_hops() -> None:
    g = GraphView([Triple.of("a", "p", "b"), Triple.of("c", "p", "b"), Triple.of("c", "p", "d")])
    assert g.shortest_path_length("a", "d") == 3
    assert g.shortest_path_length("d", "a") == 3
    assert g.shortest_path_length("a", "d", max_hops=3) == 3
    assert g.shortest_path_length("a", "d", max_hops=2) is None
    assert g.shortest_path_length("a", "missing") is None


# ---------------------------------------------------------------------------- cross-check with networkx

_NODE = st.integers(0, 11).map(lambda i: f"n{i}")
_EDGES = st.lists(st.tuples(_NODE, st.sampled_from(["p", "q"]), _NODE), max_size=25)


@settings(max_examples=80, deadline=None)
@given(edges=_EDGES, extra=st.lists(_NODE, max_size=4))
def test_structure_matches_networkx(edges: list[tuple[str, str, str]], extra: list[str]) -> None:
    g = GraphView([Triple.of(*e) for e in edges], nodes=extra)
    ref = nx.Graph()
    ref.add_nodes_from(extra)
    distinct = dict.fromkeys(edges)  # Triple.of ids dedupe identical (s, p, o)
    for s, _, o in distinct:
        ref.add_edge(s, o)
    assert set(g.nodes) == set(ref.nodes)
    # degree: distinct incident triples, a self-loop counted once
    for n in g.nodes:
        assert g.degree(n) == sum(1 for s, _, o in distinct if n in (s, o))
        assert set(g.neighbours(n)) == set(ref.neighbors(n))
    # components: the same partition of the nodes
    labels = g.component_labels()
    ours = {frozenset(n for n in g.nodes if labels[g.node_index(n)] == c) for c in set(labels.tolist())}
    assert ours == {frozenset(c) for c in nx.connected_components(ref)}
    # shortest path lengths for every pair
    lengths = dict(nx.all_pairs_shortest_path_length(ref))
    for u, v in itertools.product(g.nodes, repeat=2):
        expected = lengths[u].get(v)
        assert g.shortest_path_length(u, v) == expected
        if expected is not None and expected > 0:
            assert g.shortest_path_length(u, v, max_hops=expected - 1) is None
    # the networkx export holds every triple once, keyed by id
    multi = g.to_networkx()
    assert multi.number_of_edges() == len(distinct)
    assert {k for _, _, k in multi.edges(keys=True)} == {t.id for t in g.triples}


# ---------------------------------------------------------------------------- conversions


def test_to_dict_from_dict_round_trip(small: GraphView) -> None:
    data = json.loads(json.dumps(small.to_dict()))
    again = GraphView.from_dict(data)
    assert again == small
    assert again.nodes == small.nodes
    assert again.degrees().tolist() == small.degrees().tolist()
    assert dict(again.labels) == {"a": "Alpha"}
    assert dict(again.sources) == {"a|p|b": ("ch1", "ch2")}
    assert GraphView.from_dict({}) == GraphView([])


def test_equality_and_unhashable(small: GraphView) -> None:
    assert small != GraphView(small.triples)  # labels, sources and node order differ
    assert small.__eq__("x") is NotImplemented
    with pytest.raises(TypeError):
        hash(small)


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"triples": [("a", "p", "b")]}, "triples"),
        ({"triples": "a|p|b"}, "triples"),
        ({"triples": None}, "triples"),
        ({"triples": [], "nodes": ["ok", " "]}, "nodes"),
        ({"triples": [], "nodes": [3]}, "nodes"),
        ({"triples": [], "nodes": "abc"}, "nodes"),
        ({"triples": [], "labels": [("a", "A")]}, "labels"),
        ({"triples": [], "nodes": ["a"], "labels": {"a": 3}}, "labels"),
        ({"triples": [], "sources": {"t": "chunk-1"}}, "sources"),
        ({"triples": [], "sources": {"t": [1]}}, "sources"),
        ({"triples": [], "sources": ["t"]}, "sources"),
    ],
)
def test_bad_input_raises_event_error(kwargs: dict, field: str) -> None:
    with pytest.raises(EventError, match=f"GraphView.{field}"):
        GraphView(**kwargs)


def test_from_dict_rejects_bad_shapes() -> None:
    with pytest.raises(EventError, match="GraphView.graph"):
        GraphView.from_dict([])  # type: ignore[arg-type]
    with pytest.raises(EventError, match="GraphView.triples"):
        GraphView.from_dict({"triples": "a|p|b"})
    with pytest.raises(EventError, match="Triple.subject"):
        GraphView.from_dict({"triples": [{"id": "t", "subject": "", "predicate": "p", "object": "o"}]})


# ---------------------------------------------------------------------------- normalization


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Christopher_Nolan", "christopher nolan"),
        ("  Mecklenburg-Strelitz  ", "mecklenburg strelitz"),
        ("ＡＢＣ", "abc"),  # NFKC folds full-width letters
        ("Straße", "strasse"),  # casefold, not lower
        ("Taxi!", "taxi"),
        ("?!", ""),
    ],
)
def test_normalize_label(raw: str, expected: str) -> None:
    assert normalize_label(raw) == expected


def test_component_labels_are_dense_ints(small: GraphView) -> None:
    labels = small.component_labels()
    assert labels.dtype.kind == "i"
    # z alone; a, b, c together
    assert labels[0] != labels[1] and labels[1] == labels[2] == labels[3]
    assert np.array_equal(np.unique(labels), np.arange(2))
