"""KG Validation metrics (TRIAGE §4.2, Table 2), computed over the whole assembled graph K.

Gold-free: LC (eq. 19, ontology §), OC (eq. 20, ontology §), DNR (eq. 21), SRR (eq. 22).
Benchmark-only, against a reference KG K*: COR (eq. 23) and CMP (eq. 24).

Everything runs on :class:`~triage_plugins.contract.graph_view.GraphView` arrays (numpy/scipy), never on
networkx: degrees come from the CSR ``indptr``, SRR pairs are generated per block with numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from triage_plugins.contract.errors import ConfigError, OntologyError
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.kg.ontology import Ontology, PredicateSpec
from triage_plugins.metrics._views import metrics_view
from triage_plugins.metrics.extraction import Embedder, unit_embeddings
from triage_plugins.metrics.result import MetricResult, na, ok

__all__ = [
    "METRICS",
    "SIMILARITY_TOLERANCE",
    "completeness",
    "correctness",
    "dead_node_ratio",
    "logical_consistency",
    "ontology_coverage",
    "semantic_redundancy_rate",
    "validation_metrics",
]

_PAIR_BUDGET = 1 << 25  # vector entries gathered at once when comparing pairs (256 MB at float64)
_LC_PAIR_BUDGET = 1 << 20  # (entity, type) pairs compared at once by the disjointness check
_MAX_PREDICATE_MATRIX = 5000  # above this many distinct predicates, skip predicate sub-blocking
_FLOAT32_ABOVE = 1 << 26  # label-vector entries (512 MB at float64) beyond which float32 is used
SIMILARITY_TOLERANCE = 1e-9  # a cosine this close below δ counts as δ (rounding must not decide a tie)
_normalize_all = normalize_label.__wrapped__  # passes over every label of a graph skip the memo (no churn)


def _factorize(items: Iterable[str]) -> tuple[np.ndarray, list[str]]:
    """Integer code of each item (first-seen order) and the distinct items."""
    values = items if isinstance(items, list) else list(items)
    index = {x: i for i, x in enumerate(dict.fromkeys(values))}
    codes = np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))
    return codes, list(index)


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
        triples = graph.triples
        st, ot, types = _type_codes(
            list(map(attrgetter("subject_type"), triples)), list(map(attrgetter("object_type"), triples))
        )
        s_idx, o_idx = np.flatnonzero(st >= 0), np.flatnonzero(ot >= 0)
        node = np.concatenate([graph.subject_index[s_idx], graph.object_index[o_idx]])
        width = max(1, len(types))
        keys, pair = np.unique(node * width + np.concatenate([st[s_idx], ot[o_idx]]), return_inverse=True)
        return cls(types, keys // width, keys % width, pair.ravel(), np.concatenate([s_idx, o_idx]))

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
        codes, inverse = np.unique(a.type[first] * width + a.type[second], return_inverse=True)
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
    _, first = np.unique(_combine(group, graph.object_index[idx]), return_index=True)
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
    p_code, p_names = _factorize(list(map(attrgetter("predicate"), graph.triples)))
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
    used_predicates = {t.predicate for t in graph.triples}
    types = {x for t in graph.triples for x in (t.subject_type, t.object_type) if x}
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
    p_code, _ = _factorize(list(map(attrgetter("predicate"), graph.triples)))
    subj, obj = graph.subject_index, graph.object_index
    _, first = np.unique(_combine(_combine(subj, p_code), obj), return_index=True)
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


def _combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dense code of each pair (a[i], b[i]) (both non-negative integer arrays)."""
    if a.size == 0:
        return a.copy()
    return np.unique(a * (int(b.max()) + 1) + b, return_inverse=True)[1].ravel()


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
        node_labels = [graph.label(x) for x in graph.nodes]
        node_key, _ = _factorize(map(_normalize_all, node_labels))
        subj, obj = graph.subject_index, graph.object_index
        s_key = node_key[subj]
        p_code, p_names = _factorize(t.predicate for t in graph.triples)
        p_norm, _ = _factorize(normalize_label(p) for p in p_names)
        _, s_sizes = np.unique(s_key, return_counts=True)
        pairs = int((s_sizes * (s_sizes - 1) // 2).sum())
        return cls(len(graph), node_labels, node_key, subj, obj, s_key, p_code, p_names, p_norm, pairs)


def _srr_exact(g: _SrrInput, delta: float) -> MetricResult:
    """Exact similarity: redundant iff normalized (s, p, o) coincide, so group instead of pairing."""
    blocks = _combine(g.s_key, g.p_norm[g.p_code])
    b_sizes = np.bincount(blocks)
    candidate_pairs = int((b_sizes * (b_sizes - 1) // 2).sum())
    redundant = g.m - len(np.unique(_combine(blocks, g.node_key[g.obj])))
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


def _node_vectors(g: _SrrInput, embedder: Embedder, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(row of each node in the vectors, unit vectors of the nodes in a block of ≥ 2, pairs per chunk)."""
    paired = np.bincount(blocks)[blocks] >= 2
    needed = np.unique(np.concatenate([g.subj[paired], g.obj[paired]]))
    row = np.full(len(g.node_labels), -1, dtype=np.int64)
    row[needed] = np.arange(len(needed))
    n_vecs = unit_embeddings(embedder, [g.node_labels[i] for i in needed])
    width = n_vecs.shape[1] if n_vecs.ndim == 2 and n_vecs.shape[1] else 1
    if n_vecs.size > _FLOAT32_ABOVE:
        n_vecs = n_vecs.astype(np.float32)  # huge graphs: halve the memory (may flip pairs at exactly δ)
    return row, n_vecs, max(1, _PAIR_BUDGET // width)


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
    then subject similarity ≥ δ, compared chunk by chunk)."""
    row, n_vecs, budget = _node_vectors(g, embedder, blocks)
    label_code, _ = _factorize(g.node_labels)
    p_code, subj, obj = g.p_code, g.subj, g.obj
    red = np.zeros(g.m, dtype=bool)
    for left, right in _pair_chunks(partners, budget):
        a, b = order[left], order[right]
        if p_sim is not None:
            keep = p_sim[p_code[a], p_code[b]] >= cut
        else:
            same = p_code[a] == p_code[b]
            keep = _pair_similarity(p_vecs, np.arange(len(g.p_names)), p_code[a], p_code[b], same) >= cut
        a, b = a[keep], b[keep]
        if not a.size:
            continue
        oa, ob = obj[a], obj[b]
        keep = _pair_similarity(n_vecs, row, oa, ob, label_code[oa] == label_code[ob]) >= cut
        a, b = a[keep], b[keep]
        if not a.size:
            continue
        sa, sb = subj[a], subj[b]
        keep = _pair_similarity(n_vecs, row, sa, sb, label_code[sa] == label_code[sb]) >= cut
        red[np.maximum(a[keep], b[keep])] = True
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
    normalized duplicates). A cosine within 1e-9 below δ counts as δ, so floating-point rounding
    does not decide a pair sitting exactly at the threshold.
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


def _keys(graph: GraphView) -> list[tuple[str, str, str]]:
    """Normalized (s, p, o) label triple of every triple of ``graph``."""
    node_norm = [_normalize_all(graph.label(x)) for x in graph.nodes]
    pred_norm: dict[str, str] = {}
    subj, obj = graph.subject_index, graph.object_index
    return [
        (node_norm[s], pred_norm.setdefault(t.predicate, normalize_label(t.predicate)), node_norm[o])
        for t, s, o in zip(graph.triples, subj.tolist(), obj.tolist(), strict=True)
    ]


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
    gold = set(_keys(reference))
    facts = set(_keys(graph))
    correct = len(facts & gold)
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
    found = set(_keys(graph))
    gold = set(_keys(reference))
    covered = len(gold & found)
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


METRICS: dict[str, Callable[..., MetricResult]]
"""Symbol -> function of each metric of this module, a view of the registry (TRIAGE Table 2)."""

__getattr__ = metrics_view(__name__, phase="validation")
