"""Validation metrics at scale (issue 20): SRR's float32 node vectors, COR/CMP on integer keys,
the per-graph arrays the metrics share."""

from __future__ import annotations

import random

import numpy as np
import pytest

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.metrics import validation as V
from triage_plugins.metrics.extraction import unit_embeddings
from triage_plugins.offline.embedder import HashingEmbedder

NAMES = ["Christopher Nolan", "Chris Nolan", "Christopher Nolan.", "christopher_nolan", "Nolan", "Heat",
         "Heat (film)", "Michael Mann", "Michael Mann Jr", "Inception", "Inception film", "Los Angeles",
         "Los Angeles, CA", "1995", "1995 film"]  # fmt: skip
PREDS = ["directed_by", "directed by", "director", "year", "released in", "genre", "Genre"]


def noisy_graph(seed: int, m: int = 400) -> GraphView:
    rng = random.Random(seed)
    return GraphView(
        [Triple(f"t{i}", rng.choice(NAMES), rng.choice(PREDS), rng.choice(NAMES)) for i in range(m)]
    )


def _float64_srr(graph: GraphView, embedder, delta: float) -> tuple[int, float]:
    """SRR by all pairs of one normalized subject label, cosines in float64 (the definition); and
    the smallest distance of a node cosine from the cut."""
    vec = {}
    labels = sorted({graph.label(n) for n in graph.nodes} | {t.predicate for t in graph.triples})
    for text, v in zip(labels, unit_embeddings(embedder, labels), strict=True):
        vec[text] = v
    cut = delta - V.SIMILARITY_TOLERANCE
    closest = np.inf

    def sim(x: str, y: str, node: bool) -> float:
        nonlocal closest
        if x == y:
            return 1.0
        value = float(vec[x] @ vec[y])
        if node:
            closest = min(closest, abs(value - cut))
        return value

    ts = graph.triples
    red = 0
    for j in range(len(ts)):
        for i in range(j):
            a, b = ts[i], ts[j]
            if normalize_label(a.subject) != normalize_label(b.subject):
                continue
            if (
                sim(a.predicate, b.predicate, False) >= cut
                and sim(a.object, b.object, True) >= cut
                and sim(a.subject, b.subject, True) >= cut
            ):
                red += 1
                break
    return red, closest


@pytest.mark.parametrize("budget", [64 * 4 * 2 * 3, 1 << 31])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("delta", [0.5, 0.7, 0.9])
def test_srr_float32_equals_the_float64_definition(
    seed: int, delta: float, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Equal to all pairs in float64, whether the vectors of all blocks are held at once or a few
    blocks at a time (a budget of 3 triples' vectors: every block of this graph is its own window)."""
    monkeypatch.setattr(V, "_VECTOR_BUDGET", budget)
    calls = []
    embed = V._unit_vectors32
    monkeypatch.setattr(V, "_unit_vectors32", lambda e, texts: calls.append(len(texts)) or embed(e, texts))
    graph = noisy_graph(seed)
    embedder = HashingEmbedder(dim=64)
    expected, closest = _float64_srr(graph, embedder, delta)
    result = V.semantic_redundancy_rate(graph, delta=delta, embedder=embedder)
    # a probe, then one call for all nodes, or one per window (a block of subject and predicate group)
    assert len(calls) == 2 if budget > 1 << 20 else len(calls) > 10
    assert closest > V.FLOAT32_COSINE_ERROR  # no node cosine within float32 rounding of the cut
    assert result.details["redundant"] == expected
    assert expected > 0


def test_float32_vectors_are_within_the_stated_tolerance(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [f"{a} {b}" for a in NAMES for b in PREDS]
    embedder = HashingEmbedder(dim=256)
    exact = unit_embeddings(embedder, texts)
    monkeypatch.setattr(V, "_EMBED_BATCH", 7)  # many batches, one array
    vecs = V._unit_vectors32(embedder, texts)
    assert vecs.dtype == np.float32 and vecs.shape == exact.shape
    np.testing.assert_array_equal(vecs, exact.astype(np.float32))
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, len(texts), (2, 5000))
    row = np.arange(len(texts))
    ours = V._node_similarity(vecs, row, a, b, a == b, 0.9)
    ref = np.einsum("ij,ij->i", exact[a], exact[b])
    ref[a == b] = 1.0
    assert np.abs(ours - ref).max() <= V.FLOAT32_COSINE_ERROR


def test_near_the_cut_the_sum_is_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pairs whose float32 sum lies within the summation error of the cut are summed again in float64."""
    vecs = V._unit_vectors32(HashingEmbedder(dim=256), NAMES)
    row = np.arange(len(NAMES))
    a, b = np.array([0, 5]), np.array([1, 6])
    wide = V._node_similarity(vecs, row, a, b, a == b, 0.0)
    cut = float(wide[0])  # the first pair sits on the cut
    sims = V._node_similarity(vecs, row, a, b, a == b, cut)
    expected = np.einsum("ij,ij->i", vecs[a], vecs[b], dtype=np.float64)
    assert sims[0] == expected[0]


def test_an_embedder_changing_dimension_between_batches_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(V, "_EMBED_BATCH", 2)
    calls = iter([np.ones((2, 4)), np.ones((1, 5))])
    with pytest.raises(ConfigError, match="dimensional"):
        V._unit_vectors32(lambda texts: next(calls), ["a", "b", "c"])


def _set_keys(graph: GraphView) -> set[tuple[str, str, str]]:
    return {
        (
            normalize_label(graph.label(t.subject)),
            normalize_label(t.predicate),
            normalize_label(graph.label(t.object)),
        )
        for t in graph.triples
    }


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_cor_cmp_equal_the_set_definition(seed: int, packed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not packed:
        monkeypatch.setattr(V, "_INT64_KEYS", 0)  # the row-wise fallback for huge label counts
    graph, reference = noisy_graph(seed, 150), noisy_graph(seed + 10, 150)
    facts, gold = _set_keys(graph), _set_keys(reference)
    cor, cmp_ = V.correctness(graph, reference), V.completeness(graph, reference)
    assert cor.value == pytest.approx(len(facts & gold) / len(facts))
    assert cmp_.value == pytest.approx(len(facts & gold) / len(gold))
    assert 0 < cor.details["correct"] < len(facts)
    assert cor.n == len(facts) and cmp_.n == len(gold)


def test_per_graph_arrays_are_never_shared_between_graphs() -> None:
    first = GraphView([Triple.of("a", "p", "b"), Triple.of("b", "q", "c")])
    second = GraphView([Triple.of("a", "q", "b")])
    assert V._predicates(first)[1] == ["p", "q"]
    assert V._predicates(first) is V._predicates(first)
    assert V._predicates(second)[1] == ["q"]
    for _ in range(V._MEMO_SIZE + 2):  # older graphs are dropped, recomputed when asked again
        V._predicates(GraphView([Triple.of("x", "r", "y")]))
    assert V._predicates(first)[1] == ["p", "q"]


def test_label_pass_normalizes_as_normalize_label() -> None:
    for text in [
        "Christopher_Nolan",
        "  The  Who!! ",
        "A.B-C",
        "$",
        "x\ty",
        "Franzén",
        "ﬁlm Ⅻ",
        "İstanbul",
        "ß",
    ]:
        assert V._normalize_all(text) == normalize_label(text)


@pytest.mark.parametrize("bound_factor", [1, 1000])
def test_unique_inverse_both_paths_match_numpy(bound_factor: int) -> None:
    rng = np.random.default_rng(bound_factor)
    keys = rng.integers(0, 500 * bound_factor, 2000)
    distinct, inverse = V._unique_inverse(keys, 500 * bound_factor)
    ref, ref_inverse = np.unique(keys, return_inverse=True)
    np.testing.assert_array_equal(distinct, ref)
    np.testing.assert_array_equal(inverse, ref_inverse)


@pytest.mark.parametrize("seed", range(3))
def test_packed_and_dense_code_paths_agree(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """DNR and exact SRR pack (s, p, o) into one int64 when it fits; the dense-code path (huge
    graphs) gives the same values."""
    rng = random.Random(seed)
    triples = [Triple(f"t{i}", rng.choice(NAMES), rng.choice(PREDS), rng.choice(NAMES)) for i in range(300)]
    graph = GraphView(triples + [Triple("loop", "Heat", "year", "Heat")], nodes=["Alone"])
    packed = (V.dead_node_ratio(graph), V.semantic_redundancy_rate(graph))
    monkeypatch.setattr(V, "_INT64_KEYS", 0)
    dense = (V.dead_node_ratio(GraphView(graph.triples, ["Alone"])), V.semantic_redundancy_rate(graph))
    assert [(r.value, r.details) for r in packed] == [(r.value, r.details) for r in dense]
    assert packed[1].details["redundant"] > 0 and packed[0].details["isolated"] == 1
