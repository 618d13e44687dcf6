"""Connected components: the symmetric adjacency handed to scipy as is, same labels as before."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView, normalize_label


def random_view(seed: int, m: int) -> GraphView:
    rng = random.Random(seed)
    n = max(2, m // 2)
    triples = [Triple(f"t{i}", f"n{rng.randrange(n)}", "r", f"n{rng.randrange(n)}") for i in range(m)]
    triples += [
        Triple("loop", "n0", "r", "n0"),
        Triple("again", "n1", "r", "n2"),
        Triple("again2", "n1", "s", "n2"),
    ]
    return GraphView(triples, nodes=["alone", "n0"])


def both_directions(view: GraphView) -> np.ndarray:
    """The labels the previous call gave: the undirected CSR (each edge twice), converted by scipy."""
    n = len(view.nodes)
    mat = csr_matrix((np.ones(len(view.indices), dtype=np.int8), view.indices, view.indptr), shape=(n, n))
    return connected_components(mat, directed=False)[1]


@pytest.mark.parametrize("seed", range(8))
def test_labels_are_those_of_the_two_direction_call_and_networkx(seed):
    view = random_view(seed, [0, 1, 5, 40, 300, 2000, 10, 3][seed])
    labels = view.component_labels()
    assert labels.tolist() == both_directions(view).tolist()
    g = view.to_networkx()
    by_label: dict[int, set[str]] = {}
    for node, label in zip(view.nodes, labels.tolist(), strict=True):
        by_label.setdefault(label, set()).add(node)
    assert sorted(map(sorted, by_label.values())) == sorted(map(sorted, nx.weakly_connected_components(g)))


def test_scipy_gets_the_symmetric_adjacency_in_its_own_index_type():
    import triage_plugins.contract.graph_view as graph_view

    view = random_view(0, 50)
    assert view.indices.dtype == view._indptr32.dtype == np.int32  # handed over unconverted
    assert view._indptr32.tolist() == view.indptr.tolist()
    assert graph_view._scipy_undirected_routine() is not None  # the fast path, with this scipy


@pytest.mark.parametrize("seed", range(4))
def test_without_scipys_undirected_routine_the_public_call_gives_the_same_labels(seed, monkeypatch):
    import triage_plugins.contract.graph_view as graph_view

    view = random_view(seed, [40, 300, 7, 2000][seed])
    fast = view.component_labels()
    monkeypatch.setattr(graph_view, "_scipy_undirected_routine", lambda: None)
    assert view.component_labels().tolist() == fast.tolist() == both_directions(view).tolist()


def test_an_empty_graph_has_no_components():
    assert GraphView([]).component_labels().size == 0
    assert GraphView([], nodes=["a", "b"]).component_labels().tolist() == [0, 1]


def test_normalize_label_is_memoized_and_unchanged():
    normalize_label.cache_clear()
    for text in ("Chris_Nolan", "  Ünïcode—Dash  ", "ﬁ ligature", "Chris_Nolan"):
        assert normalize_label(text) == normalize_label.__wrapped__(text)
    info = normalize_label.cache_info()
    assert (info.hits, info.misses) == (1, 3) and info.maxsize is not None  # bounded
    with pytest.raises(TypeError):
        normalize_label(None)  # type: ignore[arg-type]
