"""KG Usage metrics (TRIAGE §4.3, eq. 25–35): hand-computed examples, N/A conventions, properties."""

from __future__ import annotations

import math
import random

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage_plugins.contract.events import GenerationEvent, Gold, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.diagnosis.chain import signature
from triage_plugins.kg.grounding import Grounder
from triage_plugins.metrics.per_query import chain_head_metrics, usage_metrics
from triage_plugins.metrics.registry import BUILTIN_METRICS
from triage_plugins.metrics.result import MetricResult
from triage_plugins.metrics.usage import (
    aggregate_usage,
    entity_retrieval_coverage,
    hard_gold_answers,
    hard_hits_rate,
    hop_depth,
    query_grounding_rate,
    reasoning_failure_rate,
    reasoning_hop_depth,
    reasoning_readiness_score,
    relation_stated,
    rhd_distribution,
)

FIG4_QUERY = "Did the director of Inception also direct Interstellar?"
T_INCEPTION = Triple("t1", "Inception", "directed_by", "Christopher Nolan")
T_INTERSTELLAR_SPLIT = Triple("t2", "Interstellar", "directed_by", "Chris Nolan")
T_INTERSTELLAR_MERGED = Triple("t2", "Interstellar", "directed_by", "Christopher Nolan")


def retrieval(
    triples: tuple[Triple, ...] = (),
    mentions: dict[str, str | None] | None = None,
    *,
    query: str = "q",
    nodes: tuple[str, ...] = (),
    gold: Gold | None = None,
    expanded: int | None = 10,
    note: str | None = None,
) -> RetrievalEvent:
    mentions = mentions or {}
    return RetrievalEvent(
        "test",
        "q1",
        query,
        mentions=tuple(mentions),
        grounding=mentions,
        subgraph=Subgraph(triples, nodes),
        expanded_nodes=expanded,
        expanded_nodes_note=note,
        gold=gold,
    )


def answer(text: str, mentions: dict[str, str | None], context: str = "retrieved") -> GenerationEvent:
    return GenerationEvent("test", "q1", text, tuple(mentions), mentions, context=context)


# --------------------------------------------------------------------------- Fig. 4


def test_fig4_unmerged_alias_is_a_connectivity_gap() -> None:
    # Both films are KG nodes (QGR = 2/2) and retrieved (ERC = 2/2), but their shared director is
    # split across "Christopher Nolan" / "Chris Nolan": no path joins them (RRS = 0/1 pairs).
    event = retrieval(
        (T_INCEPTION, T_INTERSTELLAR_SPLIT),
        {"Inception": "Inception", "Interstellar": "Interstellar"},
        query=FIG4_QUERY,
    )
    m = usage_metrics(event)
    assert m["QGR"].value == 1.0
    assert m["ERC"].value == 1.0
    assert m["RRS"].value == 0.0
    assert m["RHD"].value is None and m["RHD"].details["hops"] == "inf"
    assert signature(m) == "connectivity_gap"


def test_fig4_merging_the_alias_restores_the_two_hop_path() -> None:
    event = retrieval(
        (T_INCEPTION, T_INTERSTELLAR_MERGED),
        {"Inception": "Inception", "Interstellar": "Interstellar"},
        query=FIG4_QUERY,
    )
    m = usage_metrics(event)
    assert m["RRS"].value == 1.0
    assert m["RHD"].value == 2.0  # Inception - Christopher Nolan - Interstellar
    assert signature(m) == "supported"


def test_fig4_with_mentions_derived_by_the_default_grounder() -> None:
    graph = GraphView([T_INCEPTION, T_INTERSTELLAR_SPLIT])
    event = retrieval((T_INCEPTION, T_INTERSTELLAR_SPLIT), query=FIG4_QUERY)  # no mentions supplied
    m = usage_metrics(event, grounder=Grounder(graph))
    assert (m["QGR"].value, m["ERC"].value, m["RRS"].value) == (1.0, 1.0, 0.0)
    assert m["QGR"].details["mentions"] == 2


# --------------------------------------------------------------------------- eq. 25–29


def test_partial_grounding_and_retrieval() -> None:
    # M_q = {Inception, Interstellar, Steven Spielberg(⊥)}; V_S = {Inception, Christopher Nolan}.
    event = retrieval(
        (T_INCEPTION,),
        {"Inception": "Inception", "Interstellar": "Interstellar", "Steven Spielberg": None},
    )
    m = usage_metrics(event)
    assert m["QGR"].value == pytest.approx(2 / 3)  # 2 grounded of 3 mentions
    assert m["ERC"].value == pytest.approx(1 / 3)  # only Inception retrieved
    assert m["ERP"].value == pytest.approx(1 / 2)  # 1 query node among 2 retrieved nodes
    assert m["RRS"].value == 0.0  # 0 of C(3,2) = 3 pairs connected
    assert m["RRS"].details["pairs"] == 3
    assert m["RHD"].details["hops"] == "inf"  # Interstellar grounded but not in K_S
    assert m["QGR"].details["unresolved"] == 1
    assert signature(m) == "retrieval_gap"  # QGR 0.67 >= 0.5, ERC 0.33 < 0.67


def test_mentions_grounding_to_one_node_are_coalesced() -> None:
    event = retrieval(
        (T_INCEPTION,),
        {"Christopher Nolan": "Christopher Nolan", "Nolan": "Christopher Nolan", "Inception": "Inception"},
    )
    m = usage_metrics(event)
    assert m["QGR"].details["mentions_raw"] == 3
    assert m["QGR"].details["mentions"] == 2
    assert m["RRS"].value == 1.0  # one pair, joined by t1
    assert m["RHD"].value == 1.0


def test_unresolved_mentions_are_coalesced_by_normalized_surface() -> None:
    event = retrieval((T_INCEPTION,), {"Foo Bar": None, "foo_bar": None})
    m = usage_metrics(event)
    assert m["QGR"].value == 0.0 and m["QGR"].n == 1
    assert m["RRS"].value == 0.0 and m["RRS"].details["single_entity"] == 1
    assert signature(m) == "out_of_scope"


def test_single_entity_readiness_and_depth() -> None:
    hit = usage_metrics(retrieval((T_INCEPTION,), {"Inception": "Inception"}))
    assert hit["RRS"].value == 1.0 and hit["RHD"].value == 0.0
    miss = usage_metrics(retrieval((T_INCEPTION,), {"Memento": "Memento"}))
    assert miss["RRS"].value == 0.0 and miss["ERC"].value == 0.0
    assert miss["RHD"].details["hops"] == "inf"


def test_connectivity_is_undirected_and_hop_depth_is_the_largest_pair() -> None:
    # a -> b <- c -> d : undirected path a-b-c-d, d(a,d) = 3, d(a,c) = 2, d(c,d) = 1
    path = (Triple.of("a", "r", "b"), Triple.of("c", "r", "b"), Triple.of("c", "r", "d"))
    m = usage_metrics(retrieval(path, {"A": "a", "C": "c", "D": "d"}))
    assert m["RRS"].value == 1.0  # 3 of 3 pairs
    assert m["RHD"].value == 3.0
    assert hop_depth(retrieval(path, {"A": "a", "C": "c"})) == 2


def test_two_components_among_three_entities() -> None:
    triples = (Triple.of("a", "r", "b"), Triple.of("c", "r", "x"))
    m = usage_metrics(retrieval(triples, {"A": "a", "B": "b", "C": "c"}))
    assert m["RRS"].value == pytest.approx(1 / 3)  # only {a, b} of 3 pairs
    assert m["RRS"].details["connected_pairs"] == 1
    assert hop_depth(retrieval(triples, {"A": "a", "B": "b", "C": "c"})) == math.inf


def test_isolated_retrieved_nodes_count_in_v_s_but_connect_nothing() -> None:
    event = retrieval((T_INCEPTION,), {"Inception": "Inception", "Memento": "Memento"}, nodes=("Memento",))
    m = usage_metrics(event)
    assert m["ERC"].value == 1.0
    assert m["ERP"].value == pytest.approx(2 / 3)  # V_S = {Inception, Christopher Nolan, Memento}
    assert m["RRS"].value == 0.0


def test_rpc_reports_the_expansion_count_or_why_not() -> None:
    assert usage_metrics(retrieval((T_INCEPTION,), expanded=42))["RPC"].value == 42.0
    hidden = usage_metrics(retrieval((T_INCEPTION,), expanded=None, note="LightRAG hides its expansion"))[
        "RPC"
    ]
    assert hidden.value is None and hidden.reason == "LightRAG hides its expansion"


def test_each_public_function_matches_usage_metrics() -> None:
    event = retrieval((T_INCEPTION,), {"Inception": "Inception", "Interstellar": "Interstellar"})
    gen = answer(
        "Christopher Nolan directed Inception.",
        {"Christopher Nolan": "Christopher Nolan", "Inception": "Inception"},
    )
    together = usage_metrics(event, gen)
    for name, fn in ((s.symbol, s.function) for s in BUILTIN_METRICS.per_query):
        alone = fn(event, gen)
        assert isinstance(alone, MetricResult)
        assert alone.value == together[name].value, name
    assert chain_head_metrics(event)["ERC"].value == together["ERC"].value


# --------------------------------------------------------------------------- eq. 30–32


def test_answer_side_metrics_on_the_merged_graph() -> None:
    event = retrieval(
        (T_INCEPTION, T_INTERSTELLAR_MERGED),
        {"Inception": "Inception", "Interstellar": "Interstellar"},
    )
    good = answer(
        "Yes: Christopher Nolan directed both Inception and Interstellar.",
        {"Christopher Nolan": "Christopher Nolan", "Inception": "Inception", "Interstellar": "Interstellar"},
    )
    m = usage_metrics(event, good)
    assert m["AGR"].value == 1.0  # 3 of 3 answer entities retrieved
    assert m["AUR"].value == 1.0  # 3 of |V_S| = 3 retrieved nodes used
    assert m["ARF"].value == 1.0  # C_q = {t1, t2}; "directed" states directed_by
    assert m["ARF"].n == 2

    wrong = answer(
        "Christopher Nolan wrote Inception, but Steven Spielberg made Interstellar.",
        {
            "Christopher Nolan": "Christopher Nolan",
            "Inception": "Inception",
            "Steven Spielberg": None,
            "Interstellar": "Interstellar",
        },
    )
    m = usage_metrics(event, wrong)
    assert m["AGR"].value == pytest.approx(3 / 4)
    assert m["ARF"].value == 0.0  # neither retrieved relation is stated
    assert signature(m) == "relational_gap"


def test_generation_gap_when_answer_leaves_the_evidence() -> None:
    event = retrieval(
        (T_INCEPTION, T_INTERSTELLAR_MERGED), {"Inception": "Inception", "Interstellar": "Interstellar"}
    )
    gen = answer(
        "It was Steven Spielberg and Kathleen Kennedy.",
        {"Steven Spielberg": None, "Kathleen Kennedy": "Kathleen Kennedy"},
    )
    m = usage_metrics(event, gen)
    assert m["AGR"].value == 0.0
    assert m["ARF"].value is None  # C_q empty: skipped by the chain
    assert signature(m) == "generation_gap"


@pytest.mark.parametrize(
    ("predicate", "text", "stated"),
    [
        ("directed_by", "He directs films", True),
        ("directed_by", "the director of both", True),
        ("DIRECTED_BY", "Nolan directed it", True),
        ("directed_by", "Nolan wrote it", False),
        ("film.film.release_year", "released in the year 2010", True),
        ("film.film.release_year", "released in 2010", False),
    ],
)
def test_relation_label_is_matched_lexically(predicate: str, text: str, stated: bool) -> None:
    assert relation_stated(predicate, text) is stated


# --------------------------------------------------------------------------- §4.3.1 N/A conventions


class _EmptyGrounder:
    def ground(self, text: str):
        class G:
            mentions: tuple[str, ...] = ()
            grounding: dict[str, str | None] = {}

        return G()

    def link(self, surface: str) -> None:
        return None


def test_no_query_mention_makes_qgr_erc_rrs_na_and_rhd_infinite() -> None:
    m = usage_metrics(retrieval((T_INCEPTION,)), grounder=_EmptyGrounder())
    for name in ("QGR", "ERC", "RRS"):
        assert m[name].value is None and m[name].details["cause"] == "no_mentions", name
    assert m["ERP"].value == 0.0  # |V_S| = 2 is a defined denominator
    assert m["RHD"].details["hops"] == "inf"
    assert signature(m) == "out_of_scope"


def test_mentions_unavailable_are_na_not_zero_and_not_counted_in_rhd() -> None:
    m = usage_metrics(retrieval((T_INCEPTION,)))  # no mentions, no grounder
    for name in ("QGR", "ERC", "RRS", "ERP", "RHD"):
        assert m[name].value is None and m[name].details["cause"] == "unavailable", name
    assert rhd_distribution([m["RHD"], 1]) == {1: 1.0}


def test_empty_retrieval_makes_erp_and_aur_na() -> None:
    event = retrieval((), {"Inception": "Inception"})
    gen = answer("Inception.", {"Inception": "Inception"})
    m = usage_metrics(event, gen)
    assert m["ERP"].value is None and "|V_S|=0" in m["ERP"].reason
    assert m["AUR"].value is None and "|V_S|=0" in m["AUR"].reason
    assert m["ERC"].value == 0.0  # |M_q| = 1 > 0: defined, and zero
    assert m["AGR"].value == 0.0


def test_answer_without_entities_makes_agr_na() -> None:
    m = usage_metrics(
        retrieval((T_INCEPTION,), {"Inception": "Inception"}), answer("Yes.", {}), grounder=_EmptyGrounder()
    )
    assert m["AGR"].value is None and m["AGR"].details["cause"] == "no_mentions"
    assert m["ARF"].value is None


def test_empty_cq_makes_arf_na() -> None:
    gen = answer("Inception is good.", {"Inception": "Inception"})  # one answer entity: no pair
    m = usage_metrics(retrieval((T_INCEPTION,), {"Inception": "Inception"}), gen)
    assert m["ARF"].value is None and "|C_q|=0" in m["ARF"].reason


def test_answer_side_and_gold_metrics_need_their_inputs() -> None:
    m = usage_metrics(retrieval((T_INCEPTION,), {"Inception": "Inception"}))
    for name in ("AGR", "AUR", "ARF", "KNI"):
        assert m[name].value is None and "generation" in m[name].reason
    for name in ("GPC", "RPP", "RPR", "CC", "Hits@1", "F1"):
        assert m[name].value is None and "gold" in m[name].reason


# --------------------------------------------------------------------------- gold and outcome metrics


def test_gold_metrics() -> None:
    extra = (Triple.of("Inception", "released", "2010"), Triple.of("Interstellar", "released", "2014"))
    gold_path = (T_INCEPTION, T_INTERSTELLAR_MERGED)
    gold = Gold(answers=("Christopher Nolan",), paths=(gold_path,), entities=("Inception", "Interstellar"))
    event = retrieval(
        (T_INCEPTION, T_INTERSTELLAR_MERGED, *extra),
        {"Inception": "Inception", "Interstellar": "Interstellar"},
        gold=gold,
    )
    gen = answer(
        "Christopher Nolan, produced with Emma Thomas, made Inception.",
        {"Christopher Nolan": "Christopher Nolan", "Emma Thomas": "Emma Thomas", "Inception": "Inception"},
    )
    m = usage_metrics(event, gen)
    assert m["GPC"].value == 1.0
    assert m["RPP"].value == pytest.approx(2 / 4)  # 2 gold edges among 4 retrieved
    assert m["RPR"].value == 1.0
    assert m["CC"].value == 1.0
    assert m["Hits@1"].value == 1.0
    # predicted = {Christopher Nolan, Emma Thomas} (Inception is a question entity): P = 1/2, R = 1
    assert m["F1"].value == pytest.approx(2 / 3)

    partial = retrieval(
        (T_INCEPTION, *extra), gold=Gold(answers=("Christopher Nolan", "Emma Thomas"), paths=(gold_path,))
    )
    m = usage_metrics(partial, answer("Chris Nolan", {}), grounder=_EmptyGrounder())
    assert m["GPC"].value == 0.0  # t2 missing
    assert m["RPR"].value == pytest.approx(1 / 2)
    assert m["CC"].value == 0.0  # Emma Thomas not in V_S: not *all* gold answers present
    assert m["Hits@1"].value == 0.0  # "chris nolan" is not "christopher nolan"
    assert m["F1"].value == 0.0  # the answer names no entity: empty predicted set, recall 0
    assert usage_metrics(partial, answer("Chris Nolan", {}))["F1"].value is None  # mentions unavailable


def test_kg_net_impact_compares_with_a_closed_book_answer() -> None:
    event = retrieval((T_INCEPTION, T_INTERSTELLAR_MERGED), {"Inception": "Inception"})
    with_kg = answer("Christopher Nolan.", {"Christopher Nolan": "Christopher Nolan"})
    closed = answer(
        "Christopher Nolan or Steven Spielberg.",
        {"Christopher Nolan": "Christopher Nolan", "Steven Spielberg": "Steven Spielberg"},
        context="none",
    )
    m = usage_metrics(event, with_kg, closed_book=closed)
    assert m["KNI"].value == pytest.approx(1.0 - 0.5)
    assert usage_metrics(event, with_kg)["KNI"].value is None


def test_reasoning_failure_rate_is_conditional_on_context_coverage() -> None:
    rfr = reasoning_failure_rate([1, 1, 1, 0, None], [1, 0, 0, 1, 1])
    assert rfr.value == pytest.approx(2 / 3)  # 3 in context, 2 of them wrong
    assert reasoning_failure_rate([0, 0], [1, 0]).value is None


def test_hard_hits_rate_and_hard_answers() -> None:
    graph = GraphView([Triple.of("A", "r", "B"), Triple.of("B", "r", "C")])
    assert hard_gold_answers(Gold(answers=("B", "C"), entities=("A",)), graph) == ("C",)
    hhr = hard_hits_rate([1, 1, 0, 1], [1, 0, 0, None])
    assert hhr.value == pytest.approx((1 / 3) / (2 / 3))
    assert hard_hits_rate([0, 0], [0, 0]).value is None


def test_rhd_distribution_sums_to_one_including_infinity() -> None:
    dist = rhd_distribution([0, 1, 1, math.inf])
    assert dist == {0: 0.25, 1: 0.5, math.inf: 0.25}
    assert list(dist)[-1] == math.inf
    assert rhd_distribution([]) == {}


def test_aggregate_usage_means_defined_values_and_counts_na() -> None:
    rows = [
        {
            "ERC": MetricResult("ERC", 1.0),
            "CC": MetricResult("CC", 1.0),
            "Hits@1": MetricResult("Hits@1", 0.0),
        },
        {
            "ERC": MetricResult("ERC", 0.5),
            "CC": MetricResult("CC", 1.0),
            "Hits@1": MetricResult("Hits@1", 1.0),
        },
        {
            "ERC": MetricResult("ERC", None, "no mentions"),
            "CC": MetricResult("CC", 0.0),
            "Hits@1": MetricResult("Hits@1", 1.0),
        },
    ]
    agg = aggregate_usage(rows)
    assert agg["ERC"].value == pytest.approx(0.75) and agg["ERC"].details["na_queries"] == 1
    assert agg["CC"].value == pytest.approx(2 / 3)
    assert agg["RFR"].value == pytest.approx(1 / 2)


# --------------------------------------------------------------------------- properties

NODES = [f"n{i}" for i in range(8)]


@st.composite
def queries(draw):
    edges = draw(
        st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(NODES)), max_size=12, unique=True)
    )
    triples = tuple(Triple(f"t{i}", s, "rel", o) for i, (s, o) in enumerate(edges))
    extra = tuple(draw(st.lists(st.sampled_from(NODES), max_size=2, unique=True)))
    n_mentions = draw(st.integers(0, 5))
    grounding = {f"m{i}": draw(st.one_of(st.none(), st.sampled_from(NODES))) for i in range(n_mentions)}
    answer_grounding = {
        f"a{i}": draw(st.one_of(st.none(), st.sampled_from(NODES))) for i in range(draw(st.integers(0, 4)))
    }
    event = retrieval(triples, grounding, nodes=extra)
    gen = answer(" ".join(["rel", *answer_grounding]), answer_grounding)
    return event, gen


@settings(max_examples=200, deadline=None)
@given(queries())
def test_ratios_are_in_unit_interval_and_erc_never_exceeds_qgr(case) -> None:
    event, gen = case
    m = usage_metrics(event, gen, grounder=_EmptyGrounder())
    for name in ("QGR", "ERC", "ERP", "RRS", "AGR", "AUR", "ARF"):
        if m[name].value is not None:
            assert 0.0 <= m[name].value <= 1.0, name
    if m["QGR"].value is not None:
        assert m["ERC"].value <= m["QGR"].value


@settings(max_examples=200, deadline=None)
@given(queries())
def test_rrs_and_rhd_match_networkx(case) -> None:
    event, _ = case
    g = nx.Graph()
    g.add_nodes_from(event.subgraph.node_ids)
    g.add_edges_from((t.subject, t.object) for t in event.subgraph.triples)
    grounded = {n for n in event.grounding.values() if n is not None}
    m_q = len(grounded) + sum(1 for v in event.grounding.values() if v is None)  # "m0", "m1"... all distinct
    rrs = reasoning_readiness_score(event, grounder=_EmptyGrounder())
    if m_q == 0:
        assert rrs.value is None
    elif m_q == 1:
        assert rrs.value == (1.0 if grounded & set(g) else 0.0)
    else:
        present = [n for n in grounded if n in g]
        joined = sum(1 for i, a in enumerate(present) for b in present[i + 1 :] if nx.has_path(g, a, b))
        assert rrs.value == pytest.approx(joined / (m_q * (m_q - 1) / 2))
    hops = hop_depth(event, grounder=_EmptyGrounder())
    unresolved = any(v is None for v in event.grounding.values())
    if not grounded or unresolved or any(n not in g for n in grounded):  # eq. 33: failed grounding is ∞
        assert hops == math.inf
    else:
        pairs = [(a, b) for a in grounded for b in grounded if a < b]
        if all(nx.has_path(g, a, b) for a, b in pairs):
            assert hops == max((nx.shortest_path_length(g, a, b) for a, b in pairs), default=0)
        else:
            assert hops == math.inf
    rhd = reasoning_hop_depth(event, grounder=_EmptyGrounder())
    assert rhd.details.get("hops") == ("inf" if hops == math.inf else hops)


@settings(max_examples=50, deadline=None)
@given(st.lists(queries(), min_size=1, max_size=6))
def test_rhd_distribution_of_random_queries_sums_to_one(cases) -> None:
    dist = rhd_distribution(reasoning_hop_depth(event, grounder=_EmptyGrounder()) for event, _ in cases)
    assert math.isclose(sum(dist.values()), 1.0)
    assert all(k == math.inf or (isinstance(k, int) and k >= 0) for k in dist)


def test_query_level_functions_accept_a_grounder() -> None:
    graph = GraphView([T_INCEPTION, T_INTERSTELLAR_SPLIT])
    event = retrieval((T_INCEPTION,), query=FIG4_QUERY)
    grounder = Grounder(graph)
    assert query_grounding_rate(event, grounder=grounder).value == 1.0
    assert entity_retrieval_coverage(event, grounder=grounder).value == 0.5


# --------------------------------------------------------------------------- speed


def _two_hundred_triples() -> RetrievalEvent:
    rng = random.Random(0)
    nodes = [f"Entity {i}" for i in range(120)]
    triples = [Triple.of(nodes[i], f"rel_{i % 7}", nodes[rng.randrange(i)]) for i in range(1, 120)]
    seen = {t.id for t in triples}
    while len(triples) < 200:
        s, o = rng.sample(nodes, 2)
        t = Triple.of(s, f"rel_{rng.randrange(7)}", o)
        if t.id not in seen:
            seen.add(t.id)
            triples.append(t)
    mentions = {"Entity 5": "Entity 5", "Entity 77": "Entity 77", "Entity 110": "Entity 110", "Nobody": None}
    return retrieval(tuple(triples), mentions)


def test_gold_free_usage_metrics_on_200_triples() -> None:
    # latency (≈ 0.1 ms) is measured in benchmarks/bench_core.py and bench_metrics.py
    event = _two_hundred_triples()
    gen = answer("Entity 5 rel 3 Entity 3", {"Entity 5": "Entity 5", "Entity 3": "Entity 3"})
    assert len(event.subgraph.triples) == 200
    first, again = usage_metrics(event, gen), usage_metrics(event, gen)
    assert first == again  # a pure function of its inputs
    assert first["QGR"].value == 3 / 4  # "Nobody" is not in the graph
