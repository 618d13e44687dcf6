"""KG Implementation metrics (TRIAGE §4.1): each on a small example computed by hand here."""

from __future__ import annotations

import math
from itertools import permutations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import Chunk, ExtractedTriple, ExtractionEvent, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg.ontology import Ontology, PredicateSpec
from triage_plugins.metrics import extraction as X
from triage_plugins.metrics.registry import BUILTIN_METRICS

# --------------------------------------------------------------------------- helpers


def lp(*probs: float) -> tuple[float, ...]:
    return tuple(math.log(p) for p in probs)


def xt(s: str, p: str, o: str, probs: tuple[float, ...] | None = None, evidence: str | None = None, **types):
    return ExtractedTriple(Triple.of(s, p, o, **types), None if probs is None else lp(*probs), evidence)


def event(
    chunk: str, run: str, *triples: ExtractedTriple, doc: str = "d1", text: str = ""
) -> ExtractionEvent:
    return ExtractionEvent("test", run, Chunk(chunk, doc, text or f"text of {chunk}"), triples)


def one_hot_embedder(texts: list[str]) -> np.ndarray:
    """Every distinct string gets its own axis: sim = 1 for equal strings, 0 otherwise."""
    vocab = {t: i for i, t in enumerate(sorted(set(texts)))}
    out = np.zeros((len(texts), len(vocab)))
    for row, t in enumerate(texts):
        out[row, vocab[t]] = 1.0
    return out


def table_embedder(table: dict[str, tuple[float, ...]]):
    return lambda texts: np.array([table[t] for t in texts], dtype=float)


FILMS = Ontology(
    classes=("Person", "Director", "Film", "Place"),
    subclass_of={"Director": "Person"},
    predicates={
        "directed_by": PredicateSpec("directed_by", domain="Film", range="Person"),
        "born_in": PredicateSpec("born_in", domain="Person", range="Place"),
    },
)


# --------------------------------------------------------------------------- TCS (eq. 7)


def test_tcs_is_the_geometric_mean_of_token_probabilities():
    result = X.triple_confidence_score(xt("a", "p", "b", (0.5, 0.8, 0.25)))
    assert result.value == pytest.approx(0.1 ** (1 / 3))  # (0.5·0.8·0.25)^(1/3)
    assert result.n == 3


def test_tcs_is_none_without_logprobs():
    result = X.triple_confidence_score(xt("a", "p", "b"))
    assert result.value is None
    assert "log-probabilities" in result.reason


def test_tcs_is_none_for_a_record_without_tokens():
    result = X.triple_confidence_score(ExtractedTriple(Triple.of("a", "p", "b"), ()))
    assert result.value is None and result.reason


def test_mean_tcs_over_triples_with_logprobs_counts_the_rest():
    result = X.mean_triple_confidence(
        [xt("a", "p", "b", (0.5,)), xt("a", "p", "c", (0.9,)), xt("a", "p", "d")], tau=0.6
    )
    assert result.value == pytest.approx(0.7)
    assert result.details["without_logprobs"] == 1
    assert result.details["flagged"] == 1  # 0.5 < τ = 0.6
    assert "lack log-probabilities" in result.reason


def test_mean_tcs_none_without_any_logprobs():
    assert X.mean_triple_confidence([xt("a", "p", "b")]).value is None
    assert X.mean_triple_confidence([]).value is None


def test_tau_outside_unit_interval_is_rejected():
    with pytest.raises(ConfigError):
        X.mean_triple_confidence([], tau=1.5)


# --------------------------------------------------------------------------- SCR (eq. 8)


def test_scr_counts_passages_with_a_confident_triple():
    events = [
        event("c1", "r1", xt("a", "p", "b", (0.9,))),
        event("c2", "r1", xt("a", "p", "c", (0.3,))),
        event("c3", "r1"),
    ]
    assert X.source_coverage_ratio(events).value == pytest.approx(1 / 3)
    assert X.source_coverage_ratio(events, tau=0.25).value == pytest.approx(2 / 3)


def test_scr_averages_runs_within_a_chunk():
    events = [
        event("c1", "r1", xt("a", "p", "b", (0.9,))),
        event("c1", "r2", xt("a", "p", "b", (0.2,))),
        event("c2", "r1", xt("x", "p", "y", (0.6,))),
    ]
    # c1 covered in one of two runs (0.5), c2 covered (1.0)
    assert X.source_coverage_ratio(events).value == pytest.approx(0.75)


def test_scr_is_none_without_a_confidence_source():
    result = X.source_coverage_ratio([event("c1", "r1", xt("a", "p", "b"))])
    assert result.value is None
    assert "confidence source" in result.reason


def test_scr_leaves_out_undetermined_runs():
    events = [
        event(
            "c1", "r1", xt("a", "p", "b", (0.2,)), xt("a", "p", "c")
        ),  # undetermined: the unscored triple may be confident
        event("c2", "r1", xt("a", "p", "b", (0.2,))),
    ]
    result = X.source_coverage_ratio(events)
    assert result.value == 0.0
    assert result.details["undetermined_runs"] == 1


# --------------------------------------------------------------------------- EC (eq. 9)


def test_ec_is_mean_pairwise_jaccard_averaged_over_chunks():
    a, b, c, d = (
        ("Inception", "directed_by", "Nolan"),
        ("Heat", "directed_by", "Mann"),
        ("X", "p", "Y"),
        ("D", "q", "E"),
    )
    events = [
        event("c1", "r1", xt(*a), xt(*b)),
        event("c1", "r2", xt("inception", "Directed By", "nolan"), xt(*c)),  # a after normalization
        event("c1", "r3", xt(*a), xt(*b)),
        event("c2", "r1", xt(*d)),
        event("c2", "r2"),
        event("c3", "r1", xt(*a)),  # a single run: no pair, left out
    ]
    # c1: J(r1,r2)=1/3, J(r1,r3)=1, J(r2,r3)=1/3 -> 5/9; c2: J({d}, {}) = 0
    result = X.extraction_consistency(events)
    assert result.value == pytest.approx((5 / 9 + 0) / 2)
    assert result.n == 2


def test_ec_none_without_repeated_runs_and_for_empty_runs_only():
    assert X.extraction_consistency([event("c1", "r1", xt("a", "p", "b"))]).value is None
    both_empty = X.extraction_consistency([event("c1", "r1"), event("c1", "r2")])
    assert both_empty.value is None
    assert both_empty.details["empty_pairs"] == 1


def test_semantic_ec_credits_partial_matches():
    events = [event("c1", "r1", xt("a", "p", "b")), event("c1", "r2", xt("a", "p", "c"))]
    # Score = (1 + 1 + 0)/3; Soft-F1 = 2·(2/3)/(1+1) = 2/3, while set Jaccard is 0
    assert X.extraction_consistency(events).value == 0.0
    assert X.semantic_extraction_consistency(events, embedder=one_hot_embedder).value == pytest.approx(2 / 3)
    assert X.semantic_extraction_consistency(events, embedder=None).value is None


# --------------------------------------------------------------------------- CSC (eq. 10)


def test_csc_counts_distinct_triples_from_two_documents():
    events = [
        event("c1", "r1", xt("A", "p", "B"), xt("A", "q", "C"), doc="d1"),
        event("c2", "r1", xt("a", "p", "b"), xt("X", "r", "Y"), doc="d2"),
    ]
    assert X.cross_source_corroboration(events).value == pytest.approx(1 / 3)
    events.append(event("c3", "r1", xt("Chris", "q", "C"), doc="d2"))
    result = X.cross_source_corroboration(events, aliases={"Chris": "A"})
    assert result.value == pytest.approx(2 / 3)


def test_csc_needs_two_documents():
    events = [event("c1", "r1", xt("A", "p", "B")), event("c2", "r1", xt("A", "p", "B"))]
    assert X.cross_source_corroboration(events).value is None
    assert X.cross_source_corroboration([]).value is None


# --------------------------------------------------------------------------- SC, CVR (eq. 11–13)

SCHEMA_TRIPLES = [
    Triple.of("Inception", "directed_by", "Nolan", subject_type="Film", object_type="Director"),  # (1,1,1)
    Triple.of("Nolan", "directed_by", "Inception", subject_type="Director", object_type="Film"),  # (1,0,0)
    Triple.of("Nolan", "likes", "Inception", subject_type="Director", object_type="Film"),  # (0,1,1)
    Triple.of("Nolan", "born_in", "London", subject_type="Director"),  # (1,1,?)
    Triple.of("Inception", "born_in", "London", subject_type="Film"),  # (1,0,?)
]


def test_schema_compliance_over_determined_triples():
    result = X.schema_compliance_rate(SCHEMA_TRIPLES, FILMS)
    assert result.value == pytest.approx(1 / 4)  # valid: only the first of the four determined
    assert result.details["undetermined"] == 1


def test_constraint_violation_rate_overall_and_per_type():
    assert X.constraint_violation_rate(SCHEMA_TRIPLES, FILMS, constraint="pred").value == pytest.approx(1 / 5)
    assert X.constraint_violation_rate(SCHEMA_TRIPLES, FILMS, constraint="dom").value == pytest.approx(2 / 5)
    assert X.constraint_violation_rate(SCHEMA_TRIPLES, FILMS, constraint="rng").value == pytest.approx(1 / 3)
    overall = X.constraint_violation_rate(SCHEMA_TRIPLES, FILMS)
    assert overall.value == pytest.approx((0 + 2 / 3 + 1 / 3) / 3)
    assert overall.details["CVR_dom"] == pytest.approx(2 / 5)


def test_schema_metrics_need_an_ontology():
    assert X.schema_compliance_rate(SCHEMA_TRIPLES, None).value is None
    assert X.constraint_violation_rate(SCHEMA_TRIPLES, None).value is None
    assert X.constraint_violation_rate(SCHEMA_TRIPLES, None, constraint="rng").value is None
    with pytest.raises(ConfigError):
        X.constraint_violation_rate(SCHEMA_TRIPLES, FILMS, constraint="type")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- CSR_link (eq. 14)

LINK_TRIPLES = [
    Triple.of("Inception", "directed_by", "Chris Nolan", subject_type="Film", object_type="Person"),
    Triple.of("Interstellar", "directed_by", "bob", subject_type="Film", object_type="Person"),
    Triple.of("inception", "year", "2010"),
    Triple.of("Interstellar", "directed_by", "Christopher Nolan", subject_type="Film"),
]
LINK_GRAPH = GraphView([], nodes=["Inception", "Christopher Nolan", "Interstellar"])
LINK_ALIASES = {"Chris Nolan": "Christopher Nolan", "Bob": None}


def test_csr_link_resolution_regime():
    result = X.canonicalization_success_rate(LINK_TRIPLES, aliases=LINK_ALIASES, graph=LINK_GRAPH)
    # 1: both link; 2: "bob" ~ alias "Bob" -> None (⊥); 3: "2010" links nowhere; 4: both nodes
    assert result.value == pytest.approx(2 / 4)
    assert result.details["regime"] == "resolution"


def test_csr_link_ontology_regime_also_needs_a_declared_class():
    onto = Ontology(classes=("Film", "Person"))
    result = X.canonicalization_success_rate(
        LINK_TRIPLES, aliases=LINK_ALIASES, graph=LINK_GRAPH, ontology=onto
    )
    assert result.value == pytest.approx(1 / 4)  # the 4th triple's object is untyped
    assert result.details["regime"] == "ontology"


def test_csr_link_none_without_a_canonical_map():
    assert X.canonicalization_success_rate(LINK_TRIPLES).value is None
    assert X.canonicalization_success_rate(LINK_TRIPLES, graph=LINK_GRAPH, regime="ontology").value is None


# --------------------------------------------------------------------------- EAR (eq. 15)


def test_ear_counts_non_blank_evidence():
    triples = [xt("a", "p", "b", evidence="a p b."), xt("a", "p", "c", evidence="   "), xt("a", "p", "d")]
    assert X.evidence_attribution_rate(triples).value == pytest.approx(1 / 3)
    assert X.evidence_attribution_rate([]).value is None


# --------------------------------------------------------------------------- TRIAGE-TI (eq. 16)


def test_ti_drops_sc_and_renormalizes():
    parts = {"TCS": 0.8, "SCR": 0.6, "EC": 0.5, "CSC": 0.4, "SC": None, "CSR_link": 0.9}
    result = X.trustworthiness_index(parts)
    assert result.value == pytest.approx((0.8 + 0.6 + 0.5 + 0.4 + 0.9) / 5)
    assert "SC" in result.reason and result.details["dropped"] == "SC"


def test_ti_with_custom_weights():
    parts = {"TCS": 0.8, "SCR": 0.6, "EC": 0.5, "CSC": 0.4, "SC": None, "CSR_link": 0.9}
    result = X.trustworthiness_index(parts, weights={"TCS": 2, "EC": 1, "SC": 1})
    assert result.value == pytest.approx((2 * 0.8 + 0.5) / 3)
    assert X.trustworthiness_index(dict.fromkeys(parts, 0.5) | {"TCS": 1.0}).value == pytest.approx(3.5 / 6)


def test_ti_rejects_bad_weights_and_is_none_with_nothing_defined():
    with pytest.raises(ConfigError):
        X.trustworthiness_index({}, weights={"XYZ": 1.0})
    with pytest.raises(ConfigError):
        X.trustworthiness_index({}, weights={"TCS": -1.0})
    assert X.trustworthiness_index({"TCS": None}).value is None


# --------------------------------------------------------------------------- fidelity (eq. 1–6)


def test_embedding_similarity_is_mean_best_match_cosine():
    e1, e2 = Triple.of("a", "p", "b"), Triple.of("c", "p", "d")
    g1, g2 = Triple.of("x", "p", "y"), Triple.of("u", "p", "v")
    table = {"a p b": (1, 0), "c p d": (1, 1), "x p y": (1, 0), "u p v": (0, 1)}
    result = X.embedding_similarity([e1, e2], [g1, g2], embedder=table_embedder(table))
    assert result.value == pytest.approx((1 + 1 / math.sqrt(2)) / 2)
    assert X.embedding_similarity([e1], [g1], embedder=None).value is None
    assert X.embedding_similarity([], [g1], embedder=one_hot_embedder).value is None


def test_component_score_averages_subject_predicate_object():
    score = X.component_score(Triple.of("a", "p", "b"), Triple.of("a", "q", "b"), embedder=one_hot_embedder)
    assert score.value == pytest.approx(2 / 3)


def test_soft_f1_uses_maximum_weight_matching():
    extracted = [Triple.of("a", "p", "b"), Triple.of("a", "p", "c"), Triple.of("x", "q", "y")]
    gold = [Triple.of("a", "p", "c"), Triple.of("x", "q", "z")]
    result = X.soft_f1(extracted, gold, embedder=one_hot_embedder)
    # best matching: (a p c)-(a p c) = 1, (x q y)-(x q z) = 2/3 -> ΣM = 5/3
    assert result.details["soft_p"] == pytest.approx(5 / 9)
    assert result.details["soft_r"] == pytest.approx(5 / 6)
    assert result.value == pytest.approx(2 * (5 / 9) * (5 / 6) / (5 / 9 + 5 / 6))


def test_soft_f1_na_conventions():
    g = [Triple.of("a", "p", "b")]
    empty_e = X.soft_f1([], g, embedder=one_hot_embedder)
    assert empty_e.value == 0.0 and empty_e.details["soft_p"] is None and empty_e.details["soft_r"] == 0.0
    assert X.soft_f1([], [], embedder=one_hot_embedder).value is None
    assert X.soft_f1(g, g, embedder=None).value is None


def _brute_force_matching(weights: np.ndarray) -> float:
    w = np.clip(weights, 0.0, None)
    if w.shape[0] > w.shape[1]:
        w = w.T
    best = 0.0
    for cols in permutations(range(w.shape[1]), w.shape[0]):
        best = max(best, float(sum(w[i, j] for i, j in enumerate(cols))))
    return best


words = st.sampled_from(["a", "b", "c", "d", "e"])
triple_lists = st.lists(st.tuples(words, words, words), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(triple_lists, triple_lists, st.integers(0, 2**16))
def test_soft_f1_matching_equals_brute_force(e_raw, g_raw, seed):
    rng = np.random.default_rng(seed)
    vectors = {w: rng.normal(size=3) for w in "abcde"}  # cosines of both signs

    def embedder(texts: list[str]) -> np.ndarray:
        return np.array([vectors[t] for t in texts])

    extracted = [Triple.of(*t) for t in e_raw]
    gold = [Triple.of(*t) for t in g_raw]
    best = _brute_force_matching(X.component_scores(extracted, gold, embedder))
    result = X.soft_f1(extracted, gold, embedder=embedder)
    assert result.details["matched_score"] == pytest.approx(best)
    assert result.value == pytest.approx(2 * best / (len(extracted) + len(gold)))


def test_entailment_ratio_with_a_pluggable_nli():
    def nli(premise: str, hypothesis: str) -> float:
        return 0.9 if all(w in premise.split() for w in hypothesis.split()) else 0.2

    events = [
        event(
            "c1",
            "r1",
            xt("Nolan", "directed", "Inception"),
            xt("Nolan", "born", "London"),
            text="Nolan directed Inception",
        ),
        event("c2", "r1", xt("Mann", "directed", "Heat"), text="Mann directed Heat"),
    ]
    assert X.entailment_ratio(events, nli=nli).value == pytest.approx((0.9 + 0.2 + 0.9) / 3)
    assert X.entailment_ratio(events, nli=None).value is None


def test_tfi_weights_and_conventions():
    assert X.triple_fidelity_index(0.8, 0.6, 0.4).value == pytest.approx(0.6)
    assert X.triple_fidelity_index(0.8, 0.6, 0.4, weights=(0.5, 0.5, 0.0)).value == pytest.approx(0.7)
    no_nli = X.triple_fidelity_index(0.8, 0.6, None)
    assert no_nli.value == pytest.approx(0.7) and "EntRatio" in no_nli.reason
    assert X.triple_fidelity_index(-0.2, 0.6, 0.4).value == pytest.approx(1 / 3)  # cos̄ clipped at 0
    assert X.triple_fidelity_index(None, None, 0.9).value is None


# --------------------------------------------------------------------------- everything at once


def test_implementation_metrics_black_box_extractor():
    events = [
        event("c1", "r1", xt("a", "p", "b", evidence="a p b"), doc="d1"),
        event("c1", "r2", xt("a", "p", "b")),
        event("c2", "r1", xt("a", "p", "b"), doc="d2"),
    ]
    graph = GraphView([Triple.of("a", "p", "b")])
    out = X.implementation_metrics(events, graph=graph)
    assert out["TCS"].value is None and out["SCR"].value is None
    assert out["SC"].value is None and out["CVR_dom"].value is None
    assert out["EC"].value == 1.0
    assert out["CSC"].value == 1.0  # (a, p, b) from d1 and d2
    assert out["CSR_link"].value == 1.0
    assert out["EAR"].value == pytest.approx(1 / 3)
    ti = out["TRIAGE-TI"]
    assert ti.value == pytest.approx(1.0)  # mean of EC, CSC, CSR_link
    assert set(ti.details["dropped"].split(",")) == {"TCS", "SCR", "SC"}
    assert "cos" not in out and "EntRatio" not in out


def test_implementation_metrics_with_gold_embedder_and_nli():
    events = [event("c1", "r1", xt("a", "p", "b", (0.9,))), event("c1", "r2", xt("a", "p", "b", (0.8,)))]
    out = X.implementation_metrics(
        events, embedder=one_hot_embedder, nli=lambda p, h: 0.5, gold=[Triple.of("a", "p", "b")]
    )
    assert out["Soft-F1"].value == pytest.approx(1.0)  # distinct extracted triples vs gold
    assert out["cos"].value == pytest.approx(1.0)
    assert out["EntRatio"].value == pytest.approx(0.5)
    assert out["TFI"].value == pytest.approx((1 + 1 + 0.5) / 3)
    assert out["EC_soft"].value == pytest.approx(1.0)


def test_registry_maps_symbols_to_functions():
    extraction = {
        s.symbol: s.function for s in BUILTIN_METRICS.select(phase="implementation", stage="extraction")
    }
    assert extraction["TCS"] is X.triple_confidence_score
    assert extraction["CSR_link"] is X.canonicalization_success_rate
    assert {"SCR", "EC", "CSC", "SC", "CVR", "EAR", "TRIAGE-TI", "Soft-F1", "EntRatio", "TFI", "cos"} <= set(
        extraction
    )


# --------------------------------------------------------------------------- ratios stay in [0, 1]

labels = st.sampled_from(["Nolan", "nolan", "Inception", "Heat", "London", "Mann"])
predicates = st.sampled_from(["directed_by", "born_in", "likes"])
types = st.sampled_from([None, "Film", "Person", "Director", "Place", "Alien"])
extracted_triples = st.builds(
    lambda s, p, o, ts, to, probs, ev: ExtractedTriple(
        Triple.of(s, p, o, subject_type=ts, object_type=to),
        None if probs is None else tuple(math.log(x) for x in probs),
        ev,
    ),
    labels,
    predicates,
    labels,
    types,
    types,
    st.one_of(st.none(), st.lists(st.floats(0.01, 1.0), min_size=1, max_size=4)),
    st.one_of(st.none(), st.just(""), st.just("span")),
)
events_strategy = st.lists(
    st.builds(
        lambda c, r, d, ts: ExtractionEvent("t", r, Chunk(c, d, "text"), tuple(ts)),
        st.sampled_from(["c1", "c2", "c3"]),
        st.sampled_from(["r1", "r2"]),
        st.sampled_from(["d1", "d2"]),
        st.lists(extracted_triples, max_size=4),
    ),
    max_size=6,
)


@settings(max_examples=80, deadline=None)
@given(events_strategy, st.booleans(), st.floats(0.0, 1.0))
def test_every_ratio_is_in_unit_interval(events, with_ontology, tau):
    graph = GraphView([Triple.of("Nolan", "directed_by", "Inception")], nodes=["Heat"])

    def positive_embedder(texts: list[str]) -> np.ndarray:
        return np.array([[1.0 + len(t), 1.0 + t.count("n"), 1.0] for t in texts])

    out = X.implementation_metrics(
        events,
        ontology=FILMS if with_ontology else None,
        tau=tau,
        graph=graph,
        aliases={"nolan": "Nolan", "Mann": None},
        embedder=positive_embedder,
        nli=lambda p, h: 0.3,
        gold=[Triple.of("Nolan", "born_in", "London")],
    )
    for name, result in out.items():
        if result.value is None:
            assert result.reason, name
        else:
            assert 0.0 <= result.value <= 1.0 + 1e-12, (name, result.value)
