"""KG Validation metrics (TRIAGE §4.2): hand-computed examples, N/A conventions, SRR blocking."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage_plugins.contract.errors import ConfigError, OntologyError
from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.kg.ontology import Ontology, PredicateSpec
from triage_plugins.metrics import validation as V
from triage_plugins.metrics.registry import BUILTIN_METRICS

FILMS = Ontology(
    classes=("Person", "Director", "Film", "Place"),
    subclass_of={"Director": "Person"},
    disjoint=(("Person", "Film"),),
    predicates={
        "directed_by": PredicateSpec("directed_by", domain="Film", range="Person"),
        "born_in": PredicateSpec("born_in", domain="Person", range="Place", functional=True),
        "acted_in": PredicateSpec("acted_in", max_cardinality=2),
    },
)


def T(s: str, p: str, o: str, st_: str | None = None, ot: str | None = None) -> Triple:
    return Triple.of(s, p, o, subject_type=st_, object_type=ot)


# --------------------------------------------------------------------------- LC (eq. 19)


def test_logical_consistency_counts_triples_in_violated_axioms():
    graph = GraphView(
        [
            T("Inception", "directed_by", "Nolan", "Film", "Director"),  # 0: Inception typed Film ...
            T("Nolan", "born_in", "London", "Director", "Place"),  # 1: functional, two objects
            T("Nolan", "born_in", "Paris", "Director", "Place"),  # 2
            T("Inception", "friend_of", "Bob", "Person"),  # 3: ... and Person (disjoint)
            T("Heat", "directed_by", "Mann", "Film", "Place"),  # 4: range Person, Mann is a Place
            T("Pacino", "acted_in", "Heat"),  # 5: max cardinality 2, three objects
            T("Pacino", "acted_in", "Heat 2"),  # 6
            T("Pacino", "acted_in", "Heat 3"),  # 7
            T("X", "directed_by", "Y"),  # 8: untyped: contradicts nothing
            T("Rome", "located_in", "Italy"),  # 9: predicate outside the ontology: no axiom
        ]
    )
    result = V.logical_consistency(graph, FILMS)
    assert result.value == pytest.approx(1 - 8 / 10)
    assert result.details["disjointness"] == 2
    assert result.details["cardinality"] == 5
    assert result.details["domain_range"] == 1


def test_logical_consistency_na():
    assert V.logical_consistency(GraphView([T("a", "p", "b")]), None).value is None
    assert V.logical_consistency(GraphView([]), FILMS).value is None


# --------------------------------------------------------------------------- OC (eq. 20)


def test_ontology_coverage_counts_classes_with_ancestors_and_predicates():
    graph = GraphView([T("Inception", "directed_by", "Nolan", "Film", "Director")])
    result = V.ontology_coverage(graph, FILMS)
    # classes: Film, Director and (ancestor) Person of 4; predicates: directed_by of 3
    assert result.value == pytest.approx(4 / 7)
    assert result.details["oc_classes"] == pytest.approx(3 / 4)
    assert result.details["oc_predicates"] == pytest.approx(1 / 3)
    assert V.ontology_coverage(graph, FILMS, relevant=["Film", "Place", "born_in"]).value == pytest.approx(
        1 / 3
    )


def test_ontology_coverage_na_and_errors():
    graph = GraphView([T("a", "p", "b")])
    assert V.ontology_coverage(graph, None).value is None
    assert V.ontology_coverage(graph, Ontology()).value is None
    with pytest.raises(OntologyError):
        V.ontology_coverage(graph, FILMS, relevant=["Spaceship"])


# --------------------------------------------------------------------------- DNR (eq. 21)


def test_dead_node_ratio_degree_is_distinct_incident_triples():
    graph = GraphView([T("a", "p", "b"), T("b", "p", "c"), T("a", "q", "a")], nodes=["z"])
    # a: 2 triples (one a self-loop, counted once); b: 2; c: 1; z: 0
    result = V.dead_node_ratio(graph)
    assert result.value == pytest.approx(2 / 4)
    assert result.details == {"isolated": 1, "leaves": 1}


def test_dead_node_ratio_parallel_triples_both_count():
    graph = GraphView([T("a", "p", "b"), T("a", "q", "b")])
    assert V.dead_node_ratio(graph).value == 0.0
    assert V.dead_node_ratio(GraphView([])).value is None


# --------------------------------------------------------------------------- SRR (eq. 22)


def test_srr_exact_counts_normalized_duplicates_once():
    graph = GraphView(
        [
            T("Inception", "directed_by", "Nolan"),
            T("inception", "Directed By", "nolan"),  # same after normalize_label
            T("Inception", "directed_by", "Mann"),
            T("Heat", "directed_by", "Nolan"),
        ]
    )
    result = V.semantic_redundancy_rate(graph)
    assert result.value == pytest.approx(1 / 4)
    assert result.details["subject_block_pairs"] == 3  # the three "inception" triples
    assert result.details["candidate_pairs"] == 3


def test_srr_with_an_embedder_uses_the_threshold():
    table = {
        "Inception": (1, 0, 0),
        "Heat": (0, 1, 0),
        "directed_by": (1, 0, 0),
        "Nolan": (0, 0, 1),
        "C. Nolan": (0, 0.3, 0.954),  # cos with Nolan ≈ 0.954
        "Mann": (0, 1, 0),
    }

    def embedder(texts: list[str]) -> np.ndarray:
        return np.array([table[t] for t in texts], dtype=float)

    graph = GraphView(
        [
            T("Inception", "directed_by", "Nolan"),
            T("Inception", "directed_by", "C. Nolan"),
            T("Inception", "directed_by", "Mann"),
            T("Heat", "directed_by", "Nolan"),
        ]
    )
    result = V.semantic_redundancy_rate(graph, embedder=embedder)
    assert result.value == pytest.approx(1 / 4)
    assert result.details["candidate_pairs"] == 3
    assert V.semantic_redundancy_rate(graph, embedder=embedder, delta=0.96).value == 0.0


def test_srr_pair_exactly_at_delta_is_redundant_despite_rounding():
    # objects with 20 unit axes each, 18 shared: cos = 18/20 = 0.9 exactly, 0.8999999999999999 in floats
    a, b = np.zeros(22), np.zeros(22)
    a[:20] = 1.0
    b[2:] = 1.0
    table = {"s": np.eye(22)[0], "p": np.eye(22)[0], "o1": a, "o2": b}
    graph = GraphView([T("s", "p", "o1"), T("s", "p", "o2")])
    result = V.semantic_redundancy_rate(
        graph, embedder=lambda xs: np.array([table[x] for x in xs]), delta=0.9
    )
    assert result.value == pytest.approx(1 / 2)


def test_srr_na_and_guards():
    assert V.semantic_redundancy_rate(GraphView([])).value is None
    with pytest.raises(ConfigError):
        V.semantic_redundancy_rate(GraphView([T("a", "p", "b")]), delta=0.0)
    hub = GraphView([Triple(f"t{i}", "hub", "p", f"o{i}") for i in range(50)])
    capped = V.semantic_redundancy_rate(hub, embedder=lambda xs: np.ones((len(xs), 2)), max_pairs=100)
    assert capped.value is None
    assert capped.details["candidate_pairs"] == 50 * 49 // 2


def _brute_force_exact(graph: GraphView) -> int:
    keys = [
        (normalize_label(t.subject), normalize_label(t.predicate), normalize_label(t.object))
        for t in graph.triples
    ]
    return sum(any(keys[i] == keys[j] for i in range(j)) for j in range(len(keys)))


SUBJECTS = ["Nolan", "nolan", "NOLAN!", "Mann", "mann", "Heat"]
PREDICATES = ["p1", "p2", "p3", "P_1"]
OBJECTS = ["o1", "o2", "o3", "o4", "O1"]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(PREDICATES), st.sampled_from(OBJECTS)),
        max_size=25,
    )
)
def test_srr_exact_blocking_matches_all_pairs(raw):
    graph = GraphView([Triple(f"t{i}", s, p, o) for i, (s, p, o) in enumerate(raw)])
    result = V.semantic_redundancy_rate(graph)
    if not raw:
        assert result.value is None
        return
    assert result.details["redundant"] == _brute_force_exact(graph)


def _vectors() -> dict[str, np.ndarray]:
    """Subjects: one axis per normalized name; predicates: angles 0°, 20°, 40° (p1~p2~p3, p1≁p3);
    objects: o1/o2 10° apart, o3 orthogonal, o4 opposite."""
    vec: dict[str, np.ndarray] = {}
    axis = {"nolan": 0, "mann": 1, "heat": 2}
    for s in SUBJECTS:
        v = np.zeros(9)
        v[axis[normalize_label(s)]] = 1.0
        vec[s] = v
    for name, deg in (("p1", 0), ("p2", 20), ("p3", 40), ("P_1", 0)):
        v = np.zeros(9)
        v[3:5] = math.cos(math.radians(deg)), math.sin(math.radians(deg))
        vec[name] = v
    for name, xy in (
        ("o1", (1, 0)),
        ("o2", (math.cos(0.1745), math.sin(0.1745))),
        ("o3", (0, 1)),
        ("o4", (-1, 0)),
        ("O1", (1, 0)),
    ):
        v = np.zeros(9)
        v[5:7] = xy
        vec[name] = v
    return vec


VECTORS = _vectors()


def _embed(texts: list[str]) -> np.ndarray:
    return np.array([VECTORS[t] for t in texts])


def _brute_force_embedded(graph: GraphView, delta: float) -> int:
    def sim(x: str, y: str) -> float:
        if x == y:
            return 1.0
        a, b = VECTORS[x], VECTORS[y]
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    ts = graph.triples
    red = 0
    for j in range(len(ts)):
        if any(
            min(
                sim(ts[i].subject, ts[j].subject),
                sim(ts[i].predicate, ts[j].predicate),
                sim(ts[i].object, ts[j].object),
            )
            >= delta - V.SIMILARITY_TOLERANCE
            for i in range(j)
        ):
            red += 1
    return red


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(PREDICATES), st.sampled_from(OBJECTS)),
        min_size=1,
        max_size=25,
    ),
    st.sampled_from([0.9, 0.95, 0.5]),
    st.sampled_from([3, 1 << 25]),
)
def test_srr_embedder_blocking_matches_all_pairs(raw, delta, budget):
    graph = GraphView([Triple(f"t{i}", s, p, o) for i, (s, p, o) in enumerate(raw)])
    old = V._PAIR_BUDGET
    V._PAIR_BUDGET = budget * 9  # width 9: a few pairs per chunk exercises the chunking
    try:
        result = V.semantic_redundancy_rate(graph, embedder=_embed, delta=delta)
    finally:
        V._PAIR_BUDGET = old
    assert result.details["redundant"] == _brute_force_embedded(graph, delta)
    assert result.details["candidate_pairs"] <= len(raw) * (len(raw) - 1) // 2


# --------------------------------------------------------------------------- COR, CMP (eq. 23–24)


def test_correctness_and_completeness_against_a_reference():
    graph = GraphView(
        [T("Inception", "directed_by", "Nolan"), T("Heat", "directed_by", "Mann"), T("Heat", "year", "1995")]
    )
    reference = GraphView(
        [
            T("inception", "Directed_By", "nolan"),
            T("Heat", "directed_by", "Michael Mann"),
            T("Alien", "directed_by", "Scott"),
            T("Heat", "year", "1995"),
        ]
    )
    assert V.correctness(graph, reference).value == pytest.approx(2 / 3)
    assert V.completeness(graph, reference).value == pytest.approx(2 / 4)


def test_correctness_and_completeness_na():
    graph = GraphView([T("a", "p", "b")])
    assert V.correctness(graph, None).value is None
    assert V.completeness(graph, None).value is None
    assert V.correctness(GraphView([]), graph).value is None
    assert V.completeness(graph, GraphView([])).value is None


def test_validation_metrics_keys_and_registry():
    out = V.validation_metrics(GraphView([T("a", "p", "b")]))
    assert set(out) == {"LC", "OC", "DNR", "SRR", "COR", "CMP"}
    assert out["LC"].value is None and out["COR"].value is None and out["DNR"].value == 1.0
    assert BUILTIN_METRICS["DNR"].function is V.dead_node_ratio


# --------------------------------------------------------------------------- ratios stay in [0, 1]

typed = st.tuples(
    st.sampled_from(["a", "b", "c", "d", "A"]),
    st.sampled_from(["directed_by", "born_in", "acted_in", "other"]),
    st.sampled_from(["a", "b", "c", "e"]),
    st.sampled_from([None, "Film", "Person", "Director", "Place"]),
    st.sampled_from([None, "Film", "Person", "Place"]),
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(typed, max_size=15),
    st.lists(typed, max_size=6),
    st.lists(st.sampled_from(["x", "y"]), max_size=2),
)
def test_every_validation_ratio_is_in_unit_interval(raw, ref_raw, isolated):
    graph = GraphView([T(*r) for r in raw], nodes=isolated)
    reference = GraphView([T(*r) for r in ref_raw])
    out = V.validation_metrics(graph, ontology=FILMS, reference=reference, embedder=_embed_any)
    for name, result in out.items():
        if result.value is None:
            assert result.reason, name
        else:
            assert 0.0 <= result.value <= 1.0, (name, result.value)


def _embed_any(texts: list[str]) -> np.ndarray:
    return np.array([[1.0, len(t), t.count("a")] for t in texts])
