"""Reference retrievers on tiny hand-built graphs: which nodes they expand, which paths they keep."""

from __future__ import annotations

import networkx as nx
import numpy as np

from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.reference.retrievers import RelevanceIndex, beam_expand, krag_retrieve, path_retrieve

T = Triple.of


class BagOfWords:
    """Embeds text as a normalized bag of words: cosine = word overlap, fully predictable."""

    def __init__(self, vocab: list[str]) -> None:
        self.vocab = {w: i for i, w in enumerate(vocab)}

    def embed(self, texts):
        out = np.zeros((len(texts), len(self.vocab) + 1), dtype=np.float32)
        for i, text in enumerate(texts):
            for w in text.lower().replace("?", " ").split():
                out[i, self.vocab.get(w, len(self.vocab))] += 1.0
            n = np.linalg.norm(out[i])
            if n:
                out[i] /= n
        return out


CHAIN = GraphView([T("a", "r1", "b"), T("b", "r2", "c"), T("c", "r3", "d"), T("d", "r4", "e"), T("a", "r5", "x")])
VOCAB = ["a", "b", "c", "d", "e", "x", "r1", "r2", "r3", "r4", "r5", "how", "are", "and", "related"]


def _index(graph: GraphView = CHAIN) -> RelevanceIndex:
    return RelevanceIndex(graph, BagOfWords(VOCAB))


def test_beam_one_hop_expands_only_the_seed():
    r = beam_expand(CHAIN, _index(), "a", ["a"], hops=1, beam=10)
    assert r.expanded_nodes == 1
    assert sorted(r.paths) == [("a|r1|b",), ("a|r5|x",)]
    assert r.nodes == ("a",)


def test_beam_two_hops_keeps_all_simple_paths_when_wide():
    r = beam_expand(CHAIN, _index(), "a", ["a"], hops=2, beam=100)
    assert r.expanded_nodes == 3  # a, then b and x
    assert set(r.paths) == {("a|r1|b",), ("a|r5|x",), ("a|r1|b", "b|r2|c")}
    assert {t.id for t in r.triples} == {"a|r1|b", "a|r5|x", "b|r2|c"}


def test_beam_width_one_follows_the_most_relevant_edge():
    # the query mentions r5, so a-r5-x is the more relevant first hop
    r = beam_expand(CHAIN, _index(), "a r5", ["a"], hops=2, beam=1)
    assert r.paths[0] == ("a|r5|x",)
    assert ("a|r1|b",) not in r.paths


def test_unknown_seeds_give_an_empty_retrieval():
    r = beam_expand(CHAIN, _index(), "q", ["nowhere"])
    assert r.triples == () and r.expanded_nodes == 0


def test_path_retriever_joins_two_anchors_through_the_chain():
    r = path_retrieve(CHAIN, _index(), "how are a and d related", ["a", "d"], alpha=0.9, threshold=0.01)
    assert r.paths[0] == ("a|r1|b", "b|r2|c", "c|r3|d")
    # distance check against networkx
    assert nx.shortest_path_length(CHAIN.to_networkx().to_undirected(), "a", "d") == len(r.paths[0])


def test_path_retriever_flow_pruning_stops_early():
    # from a: flow 0.9*1/2 = 0.45 to b and x; b would pass 0.9*0.45/2 = 0.2025 < 0.3 (pruned),
    # x passes 0.405 (only back to a). From e: 0.9 to d; d passes 0.405 to c; c would pass 0.18 (pruned).
    # Reached sets {b, x} and {d, c} never meet: no path; a, x, e, d pushed resource.
    r = path_retrieve(CHAIN, _index(), "q", ["a", "e"], alpha=0.9, threshold=0.3)
    assert r.paths == ()
    assert r.expanded_nodes == 4


def test_krag_uses_the_priority_hook_to_pick_paths():
    graph = GraphView([T("s", "p", "good"), T("s", "p", "bad"), T("good", "q", "g2"), T("bad", "q", "b2")])
    vocab = ["s", "p", "q", "good", "bad", "g2", "b2"]
    idx = RelevanceIndex(graph, BagOfWords(vocab))
    plain = krag_retrieve(graph, idx, "s", ["s"], n_seeds=1, hops=2, paths_per_seed=1)
    assert plain.paths and plain.expanded_nodes >= 1

    def prefer_bad(ids, relevance):
        return [0.99 if "bad" in i else 0.01 for i in ids]

    def prefer_good(ids, relevance):
        return [0.99 if "good" in i else 0.01 for i in ids]

    bad = krag_retrieve(graph, idx, "s", ["s"], n_seeds=1, hops=2, paths_per_seed=1, priority=prefer_bad)
    good = krag_retrieve(graph, idx, "s", ["s"], n_seeds=1, hops=2, paths_per_seed=1, priority=prefer_good)
    assert all("bad" in t for t in bad.paths[0])
    assert all("good" in t for t in good.paths[0])


def test_krag_fills_seeds_by_similarity():
    r = krag_retrieve(CHAIN, _index(), "e", [], n_seeds=1, hops=1, paths_per_seed=5)
    assert r.seeds == ("e",)
    assert r.paths == (("d|r4|e",),)


def test_krag_per_length_keeps_m_paths_of_each_length():
    # from a: one-hop paths a-b, a-x; two-hop a-b-c. With M = 1 the shared top-1 is one path;
    # per length, the best one-hop path and the (only) two-hop path are both kept.
    shared = krag_retrieve(CHAIN, _index(), "a", ["a"], n_seeds=1, hops=2, paths_per_seed=1)
    split = krag_retrieve(CHAIN, _index(), "a", ["a"], n_seeds=1, hops=2, paths_per_seed=1, per_length=True)
    assert len(shared.paths) == 1
    assert sorted(len(p) for p in split.paths) == [1, 2]


def test_krag_walks_reach_paths_that_come_back_to_a_node():
    # "the place of birth of ann's child's parent": the gold path walks back to ann
    g = GraphView(
        [
            T("ann", "children", "bob"),
            T("bob", "parents", "ann"),
            T("ann", "place_of_birth", "paris"),
            T("bob", "place_of_birth", "rome"),
        ]
    )
    loop = ("ann|children|bob", "bob|parents|ann", "ann|place_of_birth|paris")
    idx = RelevanceIndex(g, BagOfWords(["ann", "bob", "children", "parents", "place", "birth"]))
    simple = krag_retrieve(g, idx, "ann", ["ann"], n_seeds=1, hops=3, paths_per_seed=50)
    walks = krag_retrieve(g, idx, "ann", ["ann"], n_seeds=1, hops=3, paths_per_seed=50, walks=True)
    assert loop not in simple.paths
    assert loop in walks.paths
    assert set(simple.paths) < set(walks.paths)
    assert all(len(set(p)) == len(p) for p in walks.paths)  # never the same triple twice
