"""A compact, read-only knowledge-graph view (DESIGN §2).

Nodes and triples get dense integer indices; undirected adjacency is stored as numpy CSR arrays
(``indptr``/``indices`` plus the triple index of each incidence), so degree, neighbourhood and
connectivity queries never build networkx objects on the hot path. Connected components use a
second, one-direction CSR (subject -> object, in scipy's own index type) that scipy takes as is.
networkx is only used by :meth:`GraphView.to_networkx`, for conversions and cross-checks.

Label normalization (:func:`normalize_label`) is the one used everywhere a surface form is compared
with a node: casefold, punctuation and underscores to spaces, whitespace collapsed. It is memoized
(the same labels are normalized again and again: by every query's grounding, metrics, evaluators).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import deque
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from triage_plugins.contract.errors import EventError
from triage_plugins.contract.events import Triple

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["GraphView", "normalize_label"]

_PUNCT = re.compile(r"[\W_]+", re.UNICODE)
LABEL_CACHE_SIZE = 1 << 16  # distinct labels remembered by normalize_label (least recently used go)


@functools.lru_cache(maxsize=LABEL_CACHE_SIZE)
def normalize_label(text: str) -> str:
    """Casefold, NFKC-normalize, turn punctuation and underscores into spaces, collapse spaces.

    Memoized for the last :data:`LABEL_CACHE_SIZE` distinct labels.
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_PUNCT.sub(" ", text).split())


def _check_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise EventError(
            "GraphView", "labels", f"must be a mapping node id -> label, got {type(labels).__name__}"
        )
    for node, label in labels.items():
        if not isinstance(node, str) or not isinstance(label, str) or not label.strip():
            raise EventError(
                "GraphView", "labels", f"labels map node ids to non-blank strings, got {node!r}: {label!r}"
            )
    return dict(labels)


def _check_sources(sources: Mapping[str, Iterable[str]] | None) -> dict[str, tuple[str, ...]]:
    if sources is None:
        return {}
    if not isinstance(sources, Mapping):
        raise EventError(
            "GraphView", "sources", f"must be a mapping triple id -> chunk ids, got {type(sources).__name__}"
        )
    out: dict[str, tuple[str, ...]] = {}
    for tid, chunks in sources.items():
        if isinstance(chunks, str | bytes) or not isinstance(chunks, Iterable):
            raise EventError(
                "GraphView", "sources", f"{tid!r} must map to a list of chunk ids, got {chunks!r}"
            )
        out[tid] = tuple(chunks)
        if not all(isinstance(c, str) for c in out[tid]):
            raise EventError("GraphView", "sources", f"chunk ids of {tid!r} must be strings, got {chunks!r}")
    return out


class GraphView:
    """Immutable KG view built from triples.

    :param triples: the edges; duplicate triple ids keep the first occurrence.
    :param nodes: extra node ids (isolated entities count as nodes, DESIGN §4 DNR).
    :param labels: node id -> display label (defaults to the id).
    :param sources: triple id -> chunk ids it was extracted from (provenance).
    """

    __slots__ = (
        "_triples",
        "_triple_index",
        "_nodes",
        "_node_index",
        "_labels",
        "_sources",
        "_subj",
        "_obj",
        "indptr",
        "indices",
        "incident",
        "_indptr32",
    )

    def __init__(
        self,
        triples: Iterable[Triple],
        nodes: Iterable[str] = (),
        labels: Mapping[str, str] | None = None,
        sources: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        for name, value in (("triples", triples), ("nodes", nodes)):
            if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
                raise EventError(
                    "GraphView", name, f"must be an iterable of items, got {type(value).__name__}"
                )
        kept: list[Triple] = []
        tindex: dict[str, int] = {}
        for t in triples:
            if not isinstance(t, Triple):
                raise EventError("GraphView", "triples", f"items must be Triple, got {type(t).__name__}")
            if t.id not in tindex:
                tindex[t.id] = len(kept)
                kept.append(t)
        node_list: list[str] = []
        nindex: dict[str, int] = {}
        for n in nodes:
            if not isinstance(n, str) or not n.strip():
                raise EventError("GraphView", "nodes", f"node ids must be non-blank strings, got {n!r}")
            if n not in nindex:
                nindex[n] = len(node_list)
                node_list.append(n)
        subj = np.empty(len(kept), dtype=np.int64)
        obj = np.empty(len(kept), dtype=np.int64)
        for i, t in enumerate(kept):
            for end, arr in ((t.subject, subj), (t.object, obj)):
                k = nindex.get(end)
                if k is None:
                    k = nindex[end] = len(node_list)
                    node_list.append(end)
                arr[i] = k
        self._triples = tuple(kept)
        self._triple_index = tindex
        self._nodes = tuple(node_list)
        self._node_index = nindex
        self._labels = MappingProxyType({n: lab for n, lab in _check_labels(labels).items() if n in nindex})
        self._sources = MappingProxyType({t: ch for t, ch in _check_sources(sources).items() if t in tindex})
        self._subj = subj
        self._obj = obj
        self._build_csr()

    def _build_csr(self) -> None:
        n = len(self._nodes)
        m = len(self._triples)
        # Each triple contributes two incidences (one per endpoint; a self-loop contributes one).
        loops = self._subj == self._obj
        ends = np.concatenate([self._subj, self._obj[~loops]])
        other = np.concatenate([self._obj, self._subj[~loops]])
        tid = np.concatenate([np.arange(m, dtype=np.int64), np.arange(m, dtype=np.int64)[~loops]])
        order = np.argsort(ends, kind="stable")
        counts = np.bincount(ends, minlength=n) if n else np.zeros(0, dtype=np.int64)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        # Node positions as int32 when they fit: scipy's index type, and half the memory.
        itype = np.int32 if max(n, 2 * m) < np.iinfo(np.int32).max else np.int64
        indices = other[order].astype(itype)
        incident = tid[order]
        for arr in (indptr, indices, incident):
            arr.flags.writeable = False
        self.indptr = indptr
        self.indices = indices
        self.incident = incident
        self._indptr32 = indptr.astype(np.int32) if itype is np.int32 else None

    # ------------------------------------------------------------------ basic accessors

    @property
    def triples(self) -> tuple[Triple, ...]:
        return self._triples

    @property
    def nodes(self) -> tuple[str, ...]:
        return self._nodes

    @property
    def labels(self) -> Mapping[str, str]:
        """Display labels of nodes that have one other than their id."""
        return self._labels

    @property
    def sources(self) -> Mapping[str, tuple[str, ...]]:
        """Triple id -> chunk ids it came from."""
        return self._sources

    @property
    def subject_index(self) -> np.ndarray:
        """Node index of each triple's subject (read-only view)."""
        v = self._subj.view()
        v.flags.writeable = False
        return v

    @property
    def object_index(self) -> np.ndarray:
        """Node index of each triple's object (read-only view)."""
        v = self._obj.view()
        v.flags.writeable = False
        return v

    def __len__(self) -> int:
        return len(self._triples)

    def __repr__(self) -> str:
        return f"GraphView({len(self._nodes)} nodes, {len(self._triples)} triples)"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphView):
            return NotImplemented
        return (
            self._triples == other._triples
            and self._nodes == other._nodes
            and dict(self._labels) == dict(other._labels)
            and dict(self._sources) == dict(other._sources)
        )

    __hash__ = None  # type: ignore[assignment]

    def label(self, node: str) -> str:
        return self._labels.get(node, node)

    def has_node(self, node: str) -> bool:
        return node in self._node_index

    def node_index(self, node: str) -> int:
        return self._node_index[node]

    def triple(self, triple_id: str) -> Triple:
        return self._triples[self._triple_index[triple_id]]

    def triple_index(self, triple_id: str) -> int:
        return self._triple_index[triple_id]

    def has_triple(self, triple_id: str) -> bool:
        return triple_id in self._triple_index

    # ------------------------------------------------------------------ structure

    def degrees(self) -> np.ndarray:
        """Number of distinct incident triples per node, direction ignored (DESIGN §4 DNR)."""
        return np.diff(self.indptr)

    def degree(self, node: str) -> int:
        k = self._node_index[node]
        return int(self.indptr[k + 1] - self.indptr[k])

    def neighbours(self, node: str) -> list[str]:
        """Distinct undirected neighbours of ``node`` (in first-seen order)."""
        k = self._node_index[node]
        seen = dict.fromkeys(int(j) for j in self.indices[self.indptr[k] : self.indptr[k + 1]])
        return [self._nodes[j] for j in seen]

    def incident_triples(self, node: str) -> list[Triple]:
        """Triples with ``node`` as subject or object."""
        k = self._node_index[node]
        return [self._triples[int(t)] for t in self.incident[self.indptr[k] : self.indptr[k + 1]]]

    def component_labels(self) -> np.ndarray:
        """Connected-component id of every node (undirected), by scipy's traversal.

        The adjacency is already symmetric, so it is its own transpose: scipy's undirected routine
        is handed it as both, which skips the transpose ``connected_components(directed=False)``
        builds. Without that routine (another scipy) the public call gets each triple once.
        """
        n = len(self._nodes)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        routine = _scipy_undirected_routine() if self._indptr32 is not None else None
        if routine is not None:
            labels = np.full(n, -1, dtype=np.int32)
            try:
                routine(self.indices, self._indptr32, self.indices, self._indptr32, labels)
            except (TypeError, ValueError):  # another signature: take the public call
                pass
            else:
                return labels
        return _scipy_components(self._subj, self._obj, n)

    def shortest_path_length(self, source: str, target: str, max_hops: int | None = None) -> int | None:
        """Undirected hop distance over the whole graph, or ``None`` when unreachable."""
        if source not in self._node_index or target not in self._node_index:
            return None
        s, t = self._node_index[source], self._node_index[target]
        if s == t:
            return 0
        dist = {s: 0}
        queue = deque([s])
        while queue:
            u = queue.popleft()
            d = dist[u]
            if max_hops is not None and d >= max_hops:
                continue
            for v in self.indices[self.indptr[u] : self.indptr[u + 1]]:
                v = int(v)
                if v not in dist:
                    if v == t:
                        return d + 1
                    dist[v] = d + 1
                    queue.append(v)
        return None

    # ------------------------------------------------------------------ conversions

    def to_dict(self) -> dict[str, Any]:
        return {
            "triples": [t.to_dict() for t in self._triples],
            "nodes": list(self._nodes),
            "labels": dict(self._labels),
            "sources": {k: list(v) for k, v in self._sources.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraphView:
        if not isinstance(data, Mapping):
            raise EventError("GraphView", "graph", f"expected an object, got {type(data).__name__}")
        triples = data.get("triples", ())
        if not isinstance(triples, list | tuple):
            raise EventError(
                "GraphView", "triples", f"expected a list of triples, got {type(triples).__name__}"
            )
        return cls(
            triples=[Triple.from_dict(t) for t in triples],
            nodes=data.get("nodes", ()),
            labels=data.get("labels") or {},
            sources=data.get("sources") or {},
        )

    def to_networkx(self) -> nx.MultiDiGraph:
        """A networkx MultiDiGraph (edge key = triple id) for conversions and cross-checks."""
        import networkx as nx

        g = nx.MultiDiGraph()
        g.add_nodes_from(self._nodes)
        for t in self._triples:
            g.add_edge(t.subject, t.object, key=t.id, predicate=t.predicate)
        return g


@functools.cache
def _scipy_undirected_routine() -> Any:
    """scipy's undirected components routine over (indices, indptr) pairs, or ``None`` without it."""
    try:
        from scipy.sparse.csgraph._traversal import _connected_components_undirected
    except ImportError:
        return None
    return _connected_components_undirected


def _scipy_components(subj: np.ndarray, obj: np.ndarray, n: int) -> np.ndarray:
    """Components through scipy's public call, each triple handed once (subject -> object)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    mat = csr_matrix((np.ones(len(subj)), (subj, obj)), shape=(n, n))
    return connected_components(mat, directed=False)[1]
