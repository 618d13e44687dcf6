"""KG Validation metrics (TRIAGE §4.2, Table 2), computed over the whole assembled graph K.

Gold-free: LC (eq. 19, ontology §), OC (eq. 20, ontology §), DNR (eq. 21), SRR (eq. 22).
Benchmark-only, against a reference KG K*: COR (eq. 23) and CMP (eq. 24).

Everything runs on :class:`~triage_plugins.contract.graph_view.GraphView` arrays (numpy/scipy), never on
networkx: degrees come from the CSR ``indptr``, SRR pairs are generated per block with numpy.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np

from triage_plugins.contract.errors import ConfigError, OntologyError
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.kg.ontology import Ontology, PredicateSpec
from triage_plugins.metrics.extraction import Embedder, unit_embeddings
from triage_plugins.metrics.result import MetricResult, na, ok

__all__ = [
    "FLOAT32_COSINE_ERROR",
    "SIMILARITY_TOLERANCE",
    "completeness",
    "correctness",
    "dead_node_ratio",
    "logical_consistency",
    "ontology_coverage",
    "semantic_redundancy_rate",
    "validation_metrics",
]

_PAIR_BUDGET = 1 << 25  # vector entries gathered at once when comparing pairs (128 MB at float32)
_LC_PAIR_BUDGET = 1 << 20  # (entity, type) pairs compared at once by the disjointness check
_MAX_PREDICATE_MATRIX = 5000  # above this many distinct predicates, skip predicate sub-blocking
_EMBED_BATCH = 1 << 14  # labels embedded per embedder call (bounds the embedder's own temporaries)
_VECTOR_BUDGET = 1 << 31  # bytes of float32 node vectors SRR holds at once (2M labels at d = 256)
_INT64_KEYS = 2**63  # COR/CMP pack (s, p, o) codes into one int64 while labels² × predicates stays below
SIMILARITY_TOLERANCE = 1e-6  # a cosine this close below δ counts as δ (rounding must not decide a tie)
FLOAT32_COSINE_ERROR = 2.4e-7  # |cosine of the float32 node vectors − float64 cosine| is at most this
_unmemoized = normalize_label.__wrapped__
_PUNCT = re.compile(r"[\W_]+", re.UNICODE)  # normalize_label's


def _normalize_all(text: str) -> str:
    """:func:`normalize_label` for passes over every label of a graph: skips the memo (no churn)
    and, for ASCII text (which NFKC leaves as is and casefolds as ``lower``), the NFKC pass."""
    if text.isascii():
        return " ".join(_PUNCT.sub(" ", text.lower()).split())
    return _unmemoized(text)


def _factorize(items: Iterable[str]) -> tuple[np.ndarray, list[str]]:
    """Integer code of each item (first-seen order) and the distinct items."""
    values = items if isinstance(items, list) else list(items)
    index = {x: i for i, x in enumerate(dict.fromkeys(values))}
    codes = np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))
    return codes, list(index)


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values: ``np.unique`` by sorting (numpy 2.4's hashing ``np.unique`` takes
    seconds on a million structured int64 keys; a sort takes a tenth of a second)."""
    out = np.sort(values)
    return out[np.r_[True, out[1:] != out[:-1]]] if out.size else out


_MEMO: OrderedDict[tuple[int, str], tuple[GraphView, Any]] = OrderedDict()
_MEMO_LOCK = threading.Lock()
_MEMO_SIZE = 12  # (graph, what) pairs kept: the arrays of the last graph and its reference


def _per_graph(graph: GraphView, what: str, compute: Callable[[GraphView], Any]) -> Any:
    """``compute(graph)``, remembered for the last few graphs: the metrics of one graph share its
    predicate codes and normalized labels instead of each walking every triple again."""
    key = (id(graph), what)
    with _MEMO_LOCK:
        hit = _MEMO.get(key)
        if hit is not None and hit[0] is graph:
            _MEMO.move_to_end(key)
            return hit[1]
    value = compute(graph)
    with _MEMO_LOCK:
        _MEMO[key] = (graph, value)
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return value


def _predicates(graph: GraphView) -> tuple[np.ndarray, list[str]]:
    """Predicate code of every triple and the distinct predicates (first-seen order)."""
    return _per_graph(
        graph, "predicates", lambda g: _factorize(list(map(attrgetter("predicate"), g.triples)))
    )


def _node_keys(graph: GraphView) -> tuple[np.ndarray, list[str]]:
    """Code of every node's normalized display label and the distinct normalized labels."""
    return _per_graph(graph, "node_keys", lambda g: _factorize(list(map(_normalize_all, _node_labels(g)))))


def _node_labels(graph: GraphView) -> list[str]:
    """The display label of every node, in node order."""

    def compute(g: GraphView) -> list[str]:
        labels = g.labels
        return [labels.get(x, x) for x in g.nodes] if labels else list(g.nodes)

    return _per_graph(graph, "node_labels", compute)


# --------------------------------------------------------------------------- LC (eq. 19)


def _type_codes(
    subject_types: list[str | None], object_types: list[str | None]
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Codes of the asserted types, one code space for both ends (-1 where none is asserted)."""
    distinct = [x for x in dict.fromkeys(subject_types + object_types) if x]
    index: dict[str | None, int] = {x: i for i, x in enumerate(distinct)}
    index[None] = index[""] = -1
    st = np.fromiter(map(index.__getitem__, subject_types), dtype=np.int64, count=len(subject_types))
    ot = np.fromiter(map(index.__getitem__, object_types), dtype=np.int64, count=len(object_types))
    return st, ot, distinct


def _graph_types(graph: GraphView) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """:func:`_type_codes` of a graph's subject and object types (LC and OC share them)."""

    def compute(g: GraphView) -> tuple[np.ndarray, np.ndarray, list[str]]:
        triples = g.triples
        return _type_codes(
            list(map(attrgetter("subject_type"), triples)), list(map(attrgetter("object_type"), triples))
        )

    return _per_graph(graph, "types", compute)


@dataclass(frozen=True, slots=True)
class _Assertions:
    """Every (entity, type) the triples assert, as integer arrays.

    ``node``/``type``: the distinct (entity, type) pairs, sorted by entity; ``pair`` maps each
    assertion (a triple's subject or object type) to its pair and ``triple`` to its triple.
    """

    types: list[str]
    node: np.ndarray
    type: np.ndarray
    pair: np.ndarray
    triple: np.ndarray

    @classmethod
    def of(cls, graph: GraphView) -> _Assertions:
        st, ot, types = _graph_types(graph)
        s_idx, o_idx = np.flatnonzero(st >= 0), np.flatnonzero(ot >= 0)
        node = np.concatenate([graph.subject_index[s_idx], graph.object_index[o_idx]])
        width = max(1, len(types))
        bound = (len(graph.nodes) + 1) * width
        keys, pair = _unique_inverse(node * width + np.concatenate([st[s_idx], ot[o_idx]]), bound)
        return cls(types, keys // width, keys % width, pair, np.concatenate([s_idx, o_idx]))

    def triples_asserting(self, flagged: np.ndarray, m: int) -> np.ndarray:
        """Per triple (of ``m``): whether it asserts one of the ``flagged`` (entity, type) pairs."""
        out = np.zeros(m, dtype=bool)
        out[self.triple[flagged[self.pair]]] = True
        return out


def _disjointness(a: _Assertions, ontology: Ontology, m: int) -> np.ndarray:
    """Per triple: it types an entity with a class disjoint (through the hierarchy) with another of its types."""
    flagged = np.zeros(len(a.node), dtype=bool)
    verdict: dict[int, bool] = {}  # type-pair code -> disjoint?
    width = max(1, len(a.types))
    # Every pair of distinct types of one entity: a.node is sorted, so a block is a run of it.
    partners = np.searchsorted(a.node, a.node, side="right") - np.arange(len(a.node)) - 1
    for first, second in _pair_chunks(partners, _LC_PAIR_BUDGET):
        codes, inverse = _unique_inverse(a.type[first] * width + a.type[second], width * width)
        for code in codes.tolist():
            if code not in verdict:
                verdict[code] = ontology.are_disjoint(a.types[code // width], a.types[code % width])
        hit = np.array([verdict[c] for c in codes.tolist()], dtype=bool)[inverse.ravel()]
        flagged[first[hit]] = True
        flagged[second[hit]] = True
    return a.triples_asserting(flagged, m)


def _domain_range(
    graph: GraphView,
    a: _Assertions,
    ontology: Ontology,
    specs: list[PredicateSpec | None],
    p_code: np.ndarray,
) -> np.ndarray:
    """Per triple: its typed subject (object) has no type falling under the predicate's domain (range)."""
    bad = np.zeros(len(graph), dtype=bool)
    classes = list(dict.fromkeys(c for s in specs if s is not None for c in (s.domain, s.range) if c))
    if not classes or not len(a.node):
        return bad
    typed = np.zeros(len(graph.nodes), dtype=bool)
    typed[a.node] = True
    starts = np.flatnonzero(np.r_[True, a.node[1:] != a.node[:-1]])  # first pair of each typed entity
    ancestors = [set(ontology.ancestors(x)) for x in a.types]
    code = {c: i for i, c in enumerate(classes)}
    for base in range(0, len(classes), 64):  # one bit per class: "the entity has a type under it"
        block = classes[base : base + 64]
        bits = np.array(
            [sum(1 << i for i, c in enumerate(block) if c in anc) for anc in ancestors], dtype=np.uint64
        )
        node_bits = np.zeros(len(graph.nodes), dtype=np.uint64)
        node_bits[a.node[starts]] = np.bitwise_or.reduceat(bits[a.type], starts)
        for attr, ends in (("domain", graph.subject_index), ("range", graph.object_index)):
            wanted = np.array([code.get(getattr(s, attr), -1) if s else -1 for s in specs], dtype=np.int64)
            bit = wanted[p_code] - base
            idx = np.flatnonzero((bit >= 0) & (bit < 64))
            node = ends[idx]
            under = (node_bits[node] >> bit[idx].astype(np.uint64)) & np.uint64(1)
            bad[idx[typed[node] & (under == 0)]] = True
    return bad


def _cardinality(graph: GraphView, specs: list[PredicateSpec | None], p_code: np.ndarray) -> np.ndarray:
    """Per triple: its subject has more distinct objects for its predicate than the predicate allows."""
    bad = np.zeros(len(graph), dtype=bool)
    limits = [-1 if s is None or s.cardinality_limit is None else s.cardinality_limit for s in specs]
    limit = np.array(limits, dtype=np.int64)[p_code]
    idx = np.flatnonzero(limit >= 0)
    if not idx.size:
        return bad
    group = _combine(graph.subject_index[idx], p_code[idx])  # (subject, predicate)
    first = _representative(_combine(group, graph.object_index[idx]))  # one triple per (s, p, o)
    objects = np.bincount(group[first], minlength=int(group.max()) + 1)  # distinct objects per group
    bad[idx[objects[group] > limit[idx]]] = True
    return bad


def logical_consistency(graph: GraphView, ontology: Ontology | None) -> MetricResult:
    """Logical Consistency μ_LC, TRIAGE eq. 19: ``1 − |Conf(K)| / |K|``.

    Conf(K) holds every triple taking part in at least one violated axiom:

    - disjointness: an entity typed (by ``subject_type``/``object_type`` in any triple) with two
      classes the ontology declares disjoint (through the subclass hierarchy) — every triple
      asserting either type is in conflict;
    - functional property / max cardinality: a subject with more distinct objects for a predicate
      than its limit — all those triples are in conflict;
    - domain/range, read closed-world as in SC: a typed entity none of whose types falls under
      the predicate's declared domain (range); untyped entities contradict nothing.

    ``details`` counts the triples caught by each kind of axiom. ``None`` without an ontology or
    for an empty graph. Each axiom is checked over integer arrays (the ontology is asked once per
    distinct type or type pair, never per triple).
    """
    if ontology is None:
        return na("LC", "needs an ontology (schema-dependent §)", n=0)
    m = len(graph)
    if not m:
        return na("LC", "the graph has no triples", n=0)
    p_code, p_names = _predicates(graph)
    specs = [ontology.predicates.get(name) for name in p_names]
    asserted = _Assertions.of(graph)
    disjoint = _disjointness(asserted, ontology, m) if ontology.disjoint else np.zeros(m, dtype=bool)
    domain_range = _domain_range(graph, asserted, ontology, specs, p_code)
    cardinality = _cardinality(graph, specs, p_code)
    conflicting = int(np.count_nonzero(disjoint | domain_range | cardinality))
    return ok(
        "LC",
        1.0 - conflicting / m,
        n=m,
        conflicting=conflicting,
        disjointness=int(np.count_nonzero(disjoint)),
        domain_range=int(np.count_nonzero(domain_range)),
        cardinality=int(np.count_nonzero(cardinality)),
    )


# --------------------------------------------------------------------------- OC (eq. 20)


def ontology_coverage(
    graph: GraphView, ontology: Ontology | None, *, relevant: Iterable[str] | None = None
) -> MetricResult:
    """Ontology Coverage, TRIAGE eq. 20: elements of O_rel instantiated by at least one triple.

    O_rel is every class and predicate of the ontology, or the names in ``relevant`` (the
    query-relevant subset, which the paper leaves to the operator). A predicate is instantiated
    by a triple using it; a class by an entity typed with it or with one of its subclasses.
    ``details`` splits the rate into classes and predicates. ``None`` without an ontology or
    with an empty O_rel.
    """
    if ontology is None:
        return na("OC", "needs an ontology (schema-dependent §)", n=0)
    classes, predicates = set(ontology.classes), set(ontology.predicates)
    if relevant is not None:
        wanted = set(relevant)
        unknown = wanted - classes - predicates
        if unknown:
            raise OntologyError(
                f"relevant names {sorted(unknown)} are neither classes nor predicates of the ontology"
            )
        classes &= wanted
        predicates &= wanted
    if not classes and not predicates:
        return na("OC", "the relevant ontology subset is empty", n=0)
    used_predicates = set(_predicates(graph)[1])
    types = _graph_types(graph)[2]
    used_classes = {c for x in types for c in ontology.ancestors(x)}
    hit_c = len(classes & used_classes)
    hit_p = len(predicates & used_predicates)
    return ok(
        "OC",
        (hit_c + hit_p) / (len(classes) + len(predicates)),
        n=len(classes) + len(predicates),
        oc_classes=hit_c / len(classes) if classes else None,
        oc_predicates=hit_p / len(predicates) if predicates else None,
    )


# --------------------------------------------------------------------------- DNR (eq. 21)


def _distinct_degrees(graph: GraphView) -> np.ndarray:
    """Per node, the number of distinct incident (s, p, o), direction ignored, a self-loop once."""
    n = len(graph.nodes)
    if not len(graph):
        return np.zeros(n, dtype=np.int64)
    p_code, p_names = _predicates(graph)
    subj, obj = graph.subject_index, graph.object_index
    width = len(p_names) * n
    if n * width < _INT64_KEYS:  # one int64 per (s, p, o): a sort finds the distinct ones
        facts = _distinct((subj * len(p_names) + p_code) * n + obj)
        s, o = facts // width, facts % n
    else:
        first = _representative(_combine(_combine(subj, p_code), obj))  # one triple per (s, p, o)
        s, o = subj[first], obj[first]
    loop = s == o
    return np.bincount(s, minlength=n) + np.bincount(o[~loop], minlength=n)


def dead_node_ratio(graph: GraphView) -> MetricResult:
    """Dead Node Ratio, TRIAGE eq. 21: nodes of degree ≤ 1 over |V|.

    Degree is the number of distinct incident triples, direction ignored (a self-loop counts
    once); isolated nodes count (DESIGN §4). K is a set: records of one (subject, predicate,
    object) under different triple ids count once. ``details``: ``isolated`` (degree 0),
    ``leaves`` (degree 1). ``None`` for a graph without nodes.
    """
    degrees = _distinct_degrees(graph)
    if degrees.size == 0:
        return na("DNR", "the graph has no nodes", n=0)
    isolated = int(np.count_nonzero(degrees == 0))
    leaves = int(np.count_nonzero(degrees == 1))
    return ok(
        "DNR", (isolated + leaves) / degrees.size, n=int(degrees.size), isolated=isolated, leaves=leaves
    )


# --------------------------------------------------------------------------- SRR (eq. 22)


def _unique_inverse(keys: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, rank of each key among them) for keys in ``[0, bound)``: through a
    bitmap of the range when it is at most a few times the number of keys, else by sorting."""
    if bound <= 8 * len(keys) + 1024:
        present = np.zeros(bound, dtype=bool)
        present[keys] = True
        rank = np.cumsum(present, dtype=np.int32 if bound < 2**31 else np.int64)
        return np.flatnonzero(present), rank[keys].astype(np.int64) - 1
    distinct, inverse = np.unique(keys, return_inverse=True)
    return distinct, inverse.ravel()


def _combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dense code of each pair (a[i], b[i]) (both non-negative integer arrays), in pair order."""
    if a.size == 0:
        return a.copy()
    width = int(b.max()) + 1
    return _unique_inverse(a * width + b, (int(a.max()) + 1) * width)[1]


def _representative(codes: np.ndarray) -> np.ndarray:
    """One position holding each dense code ``0 .. codes.max()``."""
    out = np.empty(int(codes.max()) + 1 if codes.size else 0, dtype=np.int64)
    out[codes] = np.arange(len(codes), dtype=np.int64)
    return out


def _block_pairs(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort positions by ``block``; for each position, how many later positions share its block."""
    order = np.argsort(block, kind="stable")
    sorted_block = block[order]
    ends = np.searchsorted(sorted_block, sorted_block, side="right")
    partners = ends - np.arange(len(block)) - 1
    return order, partners


def _pair_chunks(partners: np.ndarray, budget: int) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """All (k, l) with k < l < k + 1 + partners[k], as position arrays, ~``budget`` pairs at a time."""
    cum = np.cumsum(partners)
    start = 0
    n = len(partners)
    while start < n:
        base = cum[start - 1] if start else 0
        stop = int(np.searchsorted(cum, base + budget, side="right"))
        stop = max(stop, start + 1)
        counts = partners[start:stop]
        total = int(counts.sum())
        if total:
            left = np.repeat(np.arange(start, stop, dtype=np.int64), counts)
            firsts = np.cumsum(counts) - counts
            offset = np.arange(total, dtype=np.int64) - np.repeat(firsts, counts)
            yield left, left + 1 + offset
        start = stop


def _pair_similarity(
    vecs: np.ndarray, row: np.ndarray, a_nodes: np.ndarray, b_nodes: np.ndarray, same: np.ndarray
) -> np.ndarray:
    sims = np.einsum("ij,ij->i", vecs[row[a_nodes]], vecs[row[b_nodes]])
    sims[same] = 1.0  # sim(x, x) = 1 even for an encoder that maps x to the zero vector
    return sims


@dataclass(frozen=True, slots=True)
class _SrrInput:
    """A graph's triples as the integer codes SRR blocks and compares on."""

    m: int
    node_labels: list[str]
    node_key: np.ndarray  # normalized label code per node
    subj: np.ndarray
    obj: np.ndarray
    s_key: np.ndarray  # normalized subject label code per triple
    p_code: np.ndarray  # predicate code per triple
    p_names: list[str]
    p_norm: np.ndarray  # normalized predicate code per predicate code
    subject_block_pairs: int

    @classmethod
    def of(cls, graph: GraphView) -> _SrrInput:
        node_labels = _node_labels(graph)
        node_key, _ = _node_keys(graph)
        subj, obj = graph.subject_index, graph.object_index
        s_key = node_key[subj]
        p_code, p_names = _predicates(graph)
        p_norm, _ = _factorize(normalize_label(p) for p in p_names)
        s_sizes = np.bincount(s_key)
        pairs = int((s_sizes * (s_sizes - 1) // 2).sum())
        return cls(len(graph), node_labels, node_key, subj, obj, s_key, p_code, p_names, p_norm, pairs)


def _srr_exact(g: _SrrInput, delta: float) -> MetricResult:
    """Exact similarity: redundant iff normalized (s, p, o) coincide, so group instead of pairing."""
    pn = g.p_norm[g.p_code]
    n_p, n_k = int(pn.max()) + 1, int(g.node_key.max()) + 1
    if n_k * n_p * n_k < _INT64_KEYS:  # one int64 per normalized (s, p, o): sorts, no inverse
        block = np.sort(g.s_key * n_p + pn)
        b_sizes = np.diff(np.flatnonzero(np.r_[True, block[1:] != block[:-1], True]))
        redundant = g.m - len(_distinct((g.s_key * n_p + pn) * n_k + g.node_key[g.obj]))
    else:
        blocks = _combine(g.s_key, pn)
        b_sizes = np.bincount(blocks)
        redundant = g.m - len(_distinct(_combine(blocks, g.node_key[g.obj])))
    candidate_pairs = int((b_sizes * (b_sizes - 1) // 2).sum())
    return ok(
        "SRR",
        redundant / g.m,
        n=g.m,
        redundant=redundant,
        candidate_pairs=candidate_pairs,
        subject_block_pairs=g.subject_block_pairs,
        similarity="normalized label equality",
        delta=delta,
    )


def _predicate_groups(p_vecs: np.ndarray, cut: float) -> tuple[np.ndarray | None, np.ndarray]:
    """(predicate similarity matrix or ``None`` when too many, group of each predicate): the
    components of the predicate-similarity ≥ δ graph, lossless sub-blocks."""
    n = len(p_vecs)
    if n > _MAX_PREDICATE_MATRIX:
        return None, np.zeros(n, dtype=np.int64)
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    p_sim = p_vecs @ p_vecs.T
    np.fill_diagonal(p_sim, 1.0)
    _, p_group_of = connected_components(csr_matrix(p_sim >= cut), directed=False)
    return p_sim, p_group_of


def _unit_vectors32(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Unit vectors of ``texts`` as one float32 array, the only full copy: the embedder is called
    :data:`_EMBED_BATCH` texts at a time and each batch is normalized in float64, then rounded once."""
    out: np.ndarray | None = None
    for start in range(0, len(texts), _EMBED_BATCH):
        batch = unit_embeddings(embedder, texts[start : start + _EMBED_BATCH])
        if out is None:
            out = np.empty((len(texts), batch.shape[1]), dtype=np.float32)
        elif batch.shape[1] != out.shape[1]:
            raise ConfigError(
                f"the embedder returned {batch.shape[1]}-dimensional vectors after {out.shape[1]}-dimensional ones"
            )
        out[start : start + len(batch)] = batch
    return out if out is not None else np.zeros((0, 0), dtype=np.float32)


def _node_similarity(
    vecs: np.ndarray, row: np.ndarray, a_nodes: np.ndarray, b_nodes: np.ndarray, same: np.ndarray, cut: float
) -> np.ndarray:
    """Cosines of float32 unit vectors, summed in float64 wherever the float32 sum could fall on
    the other side of ``cut``: each is within :data:`FLOAT32_COSINE_ERROR` of the float64 cosine."""
    a, b = vecs[row[a_nodes]], vecs[row[b_nodes]]
    sims = np.einsum("ij,ij->i", a, b).astype(np.float64)
    slack = max(1, vecs.shape[1]) * 2.0**-23  # float32 summation error bound for unit vectors (×2)
    near = np.flatnonzero(np.abs(sims - cut) <= slack)
    if near.size:
        sims[near] = np.einsum("ij,ij->i", a[near], b[near], dtype=np.float64)
    sims[same] = 1.0  # sim(x, x) = 1 even for an encoder that maps x to the zero vector
    return sims


def _windows(sorted_blocks: np.ndarray, partners: np.ndarray, window: int) -> Iterable[tuple[int, int]]:
    """Ranges ``[p0, p1)`` of the block-sorted positions made of whole blocks, about ``window``
    positions each (a larger block is a window of its own), skipping ranges without a pair."""
    bounds = np.flatnonzero(np.r_[True, sorted_blocks[1:] != sorted_blocks[:-1], True])
    pairs_before = np.r_[0, np.cumsum(partners)]
    p0, m = 0, len(sorted_blocks)
    while p0 < m:
        k = int(np.searchsorted(bounds, p0 + window, side="right")) - 1
        p1 = int(bounds[k]) if bounds[k] > p0 else int(bounds[np.searchsorted(bounds, p0, side="right")])
        if pairs_before[p1] > pairs_before[p0]:
            yield p0, p1
        p0 = p1


def _redundant(
    g: _SrrInput,
    embedder: Embedder,
    cut: float,
    p_vecs: np.ndarray,
    p_sim: np.ndarray | None,
    blocks: np.ndarray,
    order: np.ndarray,
    partners: np.ndarray,
) -> np.ndarray:
    """Per triple, whether it is redundant with an earlier triple of its block (predicate, object,
    then subject similarity ≥ δ). The float32 unit vectors of the nodes to compare are their only
    copy; when they would exceed :data:`_VECTOR_BUDGET`, blocks are taken a window at a time (a
    node is then embedded once per window it appears in; memory is bounded by the window, or by one
    hub's block). Pairs are compared chunk by chunk."""
    label_code, _ = _factorize(g.node_labels)
    p_code, subj, obj = g.p_code, g.subj, g.obj
    red = np.zeros(g.m, dtype=bool)
    row = np.full(len(g.node_labels), -1, dtype=np.int64)
    sorted_blocks = blocks[order]
    paired = np.bincount(sorted_blocks)[sorted_blocks] >= 2  # per sorted position: in a block of ≥ 2
    needed = _distinct(np.concatenate([subj[order[paired]], obj[order[paired]]]))
    if not needed.size:
        return red
    width = max(1, _unit_vectors32(embedder, [g.node_labels[needed[0]]]).shape[1])
    fits = len(needed) * width * 4 <= _VECTOR_BUDGET
    window = g.m if fits else max(2, _VECTOR_BUDGET // (2 * width * 4))  # ≤ 2 nodes per position
    for p0, p1 in _windows(sorted_blocks, partners, window):
        pos = order[p0:p1][paired[p0:p1]]
        nodes = _distinct(np.concatenate([subj[pos], obj[pos]]))
        row[nodes] = np.arange(len(nodes))
        vecs = _unit_vectors32(embedder, [g.node_labels[k] for k in nodes])
        budget = max(1, _PAIR_BUDGET // (vecs.shape[1] or 1))
        for left, right in _pair_chunks(partners[p0:p1], budget):
            a, b = order[p0 + left], order[p0 + right]
            if p_sim is not None:
                keep = p_sim[p_code[a], p_code[b]] >= cut
            else:
                same = p_code[a] == p_code[b]
                keep = _pair_similarity(p_vecs, np.arange(len(g.p_names)), p_code[a], p_code[b], same) >= cut
            a, b = a[keep], b[keep]
            if not a.size:
                continue
            oa, ob = obj[a], obj[b]
            keep = _node_similarity(vecs, row, oa, ob, label_code[oa] == label_code[ob], cut) >= cut
            a, b = a[keep], b[keep]
            if not a.size:
                continue
            sa, sb = subj[a], subj[b]
            keep = _node_similarity(vecs, row, sa, sb, label_code[sa] == label_code[sb], cut) >= cut
            red[np.maximum(a[keep], b[keep])] = True
        row[nodes] = -1
    return red


def semantic_redundancy_rate(
    graph: GraphView,
    *,
    delta: float = 0.9,
    embedder: Embedder | None = None,
    max_pairs: int = 50_000_000,
) -> MetricResult:
    """Semantic Redundancy Rate, TRIAGE eq. 22: ``|Red(K)| / |K|``.

    Two triples are redundant when the similarities of their subjects, predicates and objects
    (node display labels; predicate names) are all ≥ ``delta`` (DESIGN §4: δ = 0.9). sim is the
    cosine of ``embedder`` vectors (sim(x, x) = 1 for identical strings), or, without an embedder,
    1 when the labels are equal after :func:`normalize_label` and 0 otherwise (SRR then counts
    normalized duplicates). Node vectors are held once, in float32 (embedded in batches), so each
    node cosine is within :data:`FLOAT32_COSINE_ERROR` (2.4e-7) of its float64 value; a cosine within
    :data:`SIMILARITY_TOLERANCE` (1e-6) below δ counts as δ, so rounding does not decide a pair
    sitting exactly at the threshold.
    Red(K) holds each triple redundant with an *earlier* triple (graph order), so a pair of
    duplicates counts once: SRR is the fraction of triples that could be dropped.

    Candidate pairs come from blocking on the normalized subject label, never all pairs; inside
    a subject block, triples are sub-blocked by predicate group (connected components of the
    predicate-similarity ≥ δ graph), which loses no redundant pair. Without an embedder the
    blocking is lossless; with one, triples whose subjects differ after normalization are never
    compared, so redundancy across distinct subject labels ("Chris Nolan" / "Christopher Nolan")
    is left to entity resolution (DNR, CSR_link measure it). ``details``:
    ``candidate_pairs`` (pairs left after blocking; the exact similarity resolves them by grouping),
    ``subject_block_pairs`` (pairs in the subject blocks alone).
    ``None`` for an empty graph, or when the candidate pairs exceed ``max_pairs`` (a hub subject
    with a huge block; raise ``max_pairs`` or use the exact similarity).
    """
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0.0 < float(delta) <= 1.0:
        raise ConfigError(f"delta must be a number in (0, 1], got {delta!r}")
    delta = float(delta)
    cut = delta - SIMILARITY_TOLERANCE
    m = len(graph)
    if m == 0:
        return na("SRR", "the graph has no triples", n=0)
    g = _SrrInput.of(graph)
    if embedder is None:
        return _srr_exact(g, delta)

    p_vecs = unit_embeddings(embedder, g.p_names)
    p_sim, p_group_of = _predicate_groups(p_vecs, cut)
    blocks = _combine(g.s_key, p_group_of[g.p_code])
    order, partners = _block_pairs(blocks)
    candidate_pairs = int(partners.sum())
    if candidate_pairs > max_pairs:
        return na(
            "SRR",
            f"{candidate_pairs} candidate pairs exceed max_pairs={max_pairs} (a very large subject block)",
            n=m,
            candidate_pairs=candidate_pairs,
            subject_block_pairs=g.subject_block_pairs,
        )
    redundant = int(_redundant(g, embedder, cut, p_vecs, p_sim, blocks, order, partners).sum())
    return ok(
        "SRR",
        redundant / m,
        n=m,
        redundant=redundant,
        candidate_pairs=candidate_pairs,
        subject_block_pairs=g.subject_block_pairs,
        similarity="embedder cosine",
        delta=delta,
    )


# --------------------------------------------------------------------------- COR, CMP (eq. 23–24)


def _fact_codes(graph: GraphView, reference: GraphView) -> tuple[np.ndarray, np.ndarray]:
    """The distinct normalized (subject label, predicate, object label) facts of ``graph`` and of
    ``reference``, as sorted integers of one code space (K and K* as sets, DESIGN §4); COR and CMP
    of one pair of graphs share them."""
    kept = _per_graph(graph, f"facts {id(reference)}", lambda g: (reference, _fact_codes_of(g, reference)))
    if kept[0] is not reference:  # another reference reusing a dropped one's id
        kept = (reference, _fact_codes_of(graph, reference))
    return kept[1]


def _fact_codes_of(graph: GraphView, reference: GraphView) -> tuple[np.ndarray, np.ndarray]:
    labels: dict[str, int] = {}
    preds: dict[str, int] = {}
    ends = []
    for g in (graph, reference):
        node_key, names = _node_keys(g)
        p_code, p_names = _predicates(g)
        to_label = np.fromiter((labels.setdefault(x, len(labels)) for x in names), np.int64, len(names))
        to_pred = np.fromiter((preds.setdefault(normalize_label(x), len(preds)) for x in p_names), np.int64)
        node = to_label[node_key]
        ends.append((node[g.subject_index], to_pred[p_code], node[g.object_index]))
    n, p = max(1, len(labels)), max(1, len(preds))
    if n * n * p < _INT64_KEYS:
        return tuple(_distinct((s * p + q) * n + o) for s, q, o in ends)  # type: ignore[return-value]
    rows = np.concatenate([np.stack(e, axis=1) for e in ends])  # too many labels for one int64
    code = np.unique(rows, axis=0, return_inverse=True)[1].ravel()
    return _distinct(code[: len(ends[0][0])]), _distinct(code[len(ends[0][0]) :])


def correctness(graph: GraphView, reference: GraphView | None) -> MetricResult:
    """Correctness μ_correct, TRIAGE eq. 23: ``1 − |K ∖ K_crt| / |K|`` with K_crt = (K ∩ K*) on K.

    Triples match on normalized (subject label, predicate, object label), and K, K* are sets of
    those keys: records of one fact count once (``details["records"]`` counts them all). ``None``
    without a reference KG or for an empty K.
    """
    if reference is None:
        return na("COR", "needs a reference KG K* (gold, benchmark setting)", n=0)
    if not len(graph):
        return na("COR", "the graph has no triples", n=0)
    facts, gold = _fact_codes(graph, reference)
    correct = len(np.intersect1d(facts, gold, assume_unique=True))
    return ok(
        "COR", 1.0 - (len(facts) - correct) / len(facts), n=len(facts), correct=correct, records=len(graph)
    )


def completeness(graph: GraphView, reference: GraphView | None) -> MetricResult:
    """Completeness μ_complete, TRIAGE eq. 24: ``1 − |K* ∖ K_cpt| / |K*|`` with K_cpt = (K ∩ K*) on K*.

    Same matching and set reading as :func:`correctness`. ``None`` without a reference KG or for
    an empty K*.
    """
    if reference is None:
        return na("CMP", "needs a reference KG K* (gold, benchmark setting)", n=0)
    if not len(reference):
        return na("CMP", "the reference KG has no triples", n=0)
    found, gold = _fact_codes(graph, reference)
    covered = len(np.intersect1d(gold, found, assume_unique=True))
    return ok(
        "CMP", 1.0 - (len(gold) - covered) / len(gold), n=len(gold), covered=covered, records=len(reference)
    )


# --------------------------------------------------------------------------- everything at once


def validation_metrics(
    graph: GraphView,
    *,
    ontology: Ontology | None = None,
    reference: GraphView | None = None,
    delta: float = 0.9,
    embedder: Embedder | None = None,
) -> dict[str, MetricResult]:
    """Every KG Validation metric of TRIAGE §4.2 for ``graph``, keyed by symbol.

    LC and OC need ``ontology``; COR and CMP need ``reference``; each is ``None`` with its reason
    otherwise. ``embedder`` makes SRR semantic (see :func:`semantic_redundancy_rate`).
    """
    return {
        "LC": logical_consistency(graph, ontology),
        "OC": ontology_coverage(graph, ontology),
        "DNR": dead_node_ratio(graph),
        "SRR": semantic_redundancy_rate(graph, delta=delta, embedder=embedder),
        "COR": correctness(graph, reference),
        "CMP": completeness(graph, reference),
    }
