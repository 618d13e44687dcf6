"""A compact, read-only knowledge-graph view (DESIGN §2).

Nodes and triples get dense integer indices; undirected adjacency is stored as numpy CSR arrays
(``indptr``/``indices`` plus the triple index of each incidence), so degree, neighbourhood and
connectivity queries never build networkx objects on the hot path. Connected components use a
second, one-direction CSR (subject -> object, in scipy's own index type) that scipy takes as is.
networkx is only used by :meth:`GraphView.to_networkx`, for conversions and cross-checks.

Label normalization (:func:`normalize_label`) is the one used everywhere a surface form is compared
with a node: casefold, punctuation and underscores to spaces, whitespace collapsed. It is memoized
(the same labels are normalized again and again: by every query's grounding, metrics, evaluators).

A view never changes; a changed graph is a new view made by :meth:`GraphView.with_changes`, which
keeps the unchanged arrays and merges the new incidences in with numpy (issue #31), and records in
:attr:`GraphView.delta` which nodes changed, so a grounder can refile only those.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from triage_plugins.contract.errors import EventError
from triage_plugins.contract.events import Triple

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["GraphView", "ViewDelta", "normalize_label"]

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


class _Index:
    """Id -> position, read-only: a dict shared with the views this one was derived from, plus the
    ids this view appended (merged into one new dict once they pass a quarter of the shared one)."""

    __slots__ = ("base", "extra")

    def __init__(self, base: dict[str, int], extra: dict[str, int] | None = None) -> None:
        self.base = base
        self.extra = extra or {}

    def get(self, key: str, default: int | None = None) -> int | None:
        found = self.base.get(key)
        if found is None:
            return self.extra.get(key, default)
        return found

    def __getitem__(self, key: str) -> int:
        found = self.base.get(key)
        return self.extra[key] if found is None else found

    def __contains__(self, key: object) -> bool:
        return key in self.base or key in self.extra

    def __len__(self) -> int:
        return len(self.base) + len(self.extra)

    def merged(self) -> dict[str, int]:
        """One new dict of every entry."""
        return {**self.base, **self.extra}

    def plus(self, added: dict[str, int]) -> _Index:
        """This index and ``added`` (ids not in it), sharing this one's dict while it stays small."""
        if not added:
            return self
        extra = {**self.extra, **added}
        if 4 * len(extra) > len(self.base):
            return _Index({**self.base, **extra})
        return _Index(self.base, extra)


_SERIALS = itertools.count(1)  # every view's serial: a derived view names its parent by it


class ViewDelta(NamedTuple):
    """How a view made by :meth:`GraphView.with_changes` differs from its parent, node by node.

    :param parent: the parent's :attr:`GraphView.serial`.
    :param removed: parent node indices that are gone (sorted).
    :param relabeled: parent node indices that stay with another display label (sorted).
    :param added_from: the first node index of the nodes the change appended.
    """

    parent: int
    removed: np.ndarray
    relabeled: np.ndarray
    added_from: int


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
        "_serial",
        "_delta",
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
        self._triple_index = _Index(tindex)
        self._nodes = tuple(node_list)
        self._node_index = _Index(nindex)
        self._labels = MappingProxyType({n: lab for n, lab in _check_labels(labels).items() if n in nindex})
        self._sources = MappingProxyType({t: ch for t, ch in _check_sources(sources).items() if t in tindex})
        self._subj = subj
        self._obj = obj
        self._serial = next(_SERIALS)
        self._delta: ViewDelta | None = None
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

    # ------------------------------------------------------------------ incremental change

    def with_changes(
        self,
        triples: Iterable[Triple] = (),
        *,
        removed: Iterable[str] = (),
        nodes: Iterable[str] = (),
        removed_nodes: Iterable[str] = (),
        labels: Mapping[str, str] | None = None,
        sources: Mapping[str, Iterable[str]] | None = None,
    ) -> GraphView:
        """A new view with a change applied (this one is left as it is), equal in every part —
        triples, nodes, labels, sources, CSR arrays — to the view the constructor builds from the
        result's own triples, nodes, labels and sources.

        ``removed_nodes`` (with every triple touching them) and the ``removed`` triple ids go first.
        Each of ``triples`` (the first of a repeated id) then replaces the triple of its id in place
        when its ends are the same, else it is appended; ``nodes`` not in the view are appended, then
        the new ends of appended triples. ``labels`` and ``sources`` add or replace entries (a triple
        or node that is gone loses its own). Cost: the change, a few vectorized passes over the
        arrays, one copy of the triples tuple and of the sources dict; the id -> position dicts are
        shared with this view while the additions stay small. A removal adds a Python pass over the
        triples (nodes) after the first removed one, to renumber them.
        """
        triples = list(_items(triples, "triples"))
        if not all(isinstance(t, Triple) for t in triples):
            raise EventError("GraphView", "triples", "items must be Triple")
        extra = _node_ids(nodes, "nodes")
        gone_ids = _node_ids(removed_nodes, "removed_nodes")
        gone = sorted({self._node_index[n] for n in gone_ids if n in self._node_index})
        drop, replace, appended = self._plan(triples, _items(removed, "removed"), gone)
        node_keep = np.ones(len(self._nodes), dtype=bool)
        node_keep[gone] = False
        node_list, nindex, node_map = _kept(self._nodes, self._node_index, node_keep, str)
        added_from = len(node_list)
        new_nodes: dict[str, int] = {}

        def place(node: str) -> int:
            k = nindex.get(node)
            if k is None:
                k = new_nodes.setdefault(node, added_from + len(new_nodes))
            return k

        for n in extra:
            place(n)
        triple_list, tindex, t_map = _kept(self._triples, self._triple_index, ~drop, _triple_id)
        m_kept = len(triple_list)
        ends = np.empty((2, len(appended)), dtype=np.int64)
        new_triples: dict[str, int] = {}
        for i, t in enumerate(appended):
            new_triples[t.id] = m_kept + i
            ends[0, i], ends[1, i] = place(t.subject), place(t.object)
        out = object.__new__(GraphView)
        if replace:  # each pass over a million triples costs: copy once, then freeze
            listed = triple_list if isinstance(triple_list, list) else list(triple_list)
            for k, t in replace.items():
                listed[k if t_map is None else int(t_map[k])] = t
            listed.extend(appended)
            out._triples = tuple(listed)
        else:
            out._triples = tuple(triple_list) + tuple(appended)  # tuple() of a tuple is itself
        out._nodes = tuple(node_list) + tuple(new_nodes)
        out._triple_index, out._node_index = tindex.plus(new_triples), nindex.plus(new_nodes)
        kept_subj, kept_obj = self._subj, self._obj
        if t_map is not None:
            kept_subj, kept_obj = kept_subj[~drop], kept_obj[~drop]
        if node_map is not None:
            kept_subj, kept_obj = node_map[kept_subj], node_map[kept_obj]
        out._subj, out._obj = np.concatenate([kept_subj, ends[0]]), np.concatenate([kept_obj, ends[1]])
        relabeled = self._changed_labels(out, node_keep, labels)
        out._sources = self._changed_sources(out, drop, sources)
        out._serial = next(_SERIALS)
        out._delta = ViewDelta(self._serial, np.asarray(gone, dtype=np.int64), relabeled, added_from)
        self._merge_csr(out, drop, t_map, node_map, m_kept, added_from)
        return out

    def _plan(
        self, triples: list[Triple], removed: Iterable[str], gone: list[int]
    ) -> tuple[np.ndarray, dict[int, Triple], list[Triple]]:
        """Triple positions dropped (a mask), in-place replacements, triples to append."""
        drop = np.zeros(len(self._triples), dtype=bool)
        for k in gone:
            drop[self.incident[self.indptr[k] : self.indptr[k + 1]]] = True
        for tid in removed:
            if not isinstance(tid, str):
                raise EventError("GraphView", "removed", f"triple ids must be strings, got {tid!r}")
            k = self._triple_index.get(tid)
            if k is not None:
                drop[k] = True
        replace: dict[int, Triple] = {}
        appended: list[Triple] = []
        seen: set[str] = set()
        for t in triples:
            if t.id in seen:
                continue
            seen.add(t.id)
            k = self._triple_index.get(t.id)
            if k is not None and not drop[k]:
                old = self._triples[k]
                if old.subject == t.subject and old.object == t.object:
                    replace[k] = t
                    continue
                drop[k] = True  # its ends changed: it moves to the end, as a new triple would
            appended.append(t)
        return drop, replace, appended

    def _changed_labels(
        self, out: GraphView, node_keep: np.ndarray, labels: Mapping[str, str] | None
    ) -> np.ndarray:
        """Set ``out``'s labels: this view's of the nodes kept, then ``labels``; the parent indices
        of kept nodes whose label changed."""
        merged = self._labels.copy()
        if merged and not node_keep.all():
            merged = {n: lab for n, lab in merged.items() if node_keep[self._node_index[n]]}
        relabeled: list[int] = []
        for node, label in _check_labels(labels).items():
            if node not in out._node_index:
                continue
            old = self._node_index.get(node)
            if old is not None and node_keep[old] and merged.get(node) != label:
                relabeled.append(old)
            merged[node] = label
        out._labels = MappingProxyType(merged)
        return np.asarray(sorted(relabeled), dtype=np.int64)

    def _changed_sources(
        self, out: GraphView, drop: np.ndarray, sources: Mapping[str, Iterable[str]] | None
    ) -> MappingProxyType[str, tuple[str, ...]]:
        """``out``'s provenance: this view's, less the triples that are gone, then ``sources``."""
        merged = self._sources.copy()  # the dict's own copy: dict(proxy) goes item by item
        for k in np.flatnonzero(drop).tolist():
            tid = self._triples[k].id
            if tid not in out._triple_index:
                merged.pop(tid, None)
        merged.update((t, ch) for t, ch in _check_sources(sources).items() if t in out._triple_index)
        return MappingProxyType(merged)

    def _merge_csr(
        self,
        out: GraphView,
        drop: np.ndarray,
        t_map: np.ndarray | None,
        node_map: np.ndarray | None,
        m_kept: int,
        n_kept: int,
    ) -> None:
        """``out``'s CSR from this view's: the dropped triples' incidences cut, the rest renumbered,
        the appended triples' incidences inserted where :meth:`_build_csr` puts them (a node's row:
        the triples with it as subject, then as object, each block in triple order)."""
        n, m = len(out._nodes), len(out._triples)
        itype = np.int32 if max(n, 2 * m) < np.iinfo(np.int32).max else np.int64
        if m == m_kept and t_map is None and node_map is None and self.indices.dtype == itype:
            indptr, indices, incident = self.indptr, self.indices, self.incident  # read-only: shared
            if n > n_kept:
                indptr = np.concatenate([indptr, np.full(n - n_kept, indptr[-1], dtype=np.int64)])
        else:
            indices, incident = self.indices, self.incident
            if t_map is None and node_map is None:
                counts = np.diff(self.indptr)
            else:
                rows = np.repeat(np.arange(len(self._nodes), dtype=np.int64), np.diff(self.indptr))
                keep = ~drop[incident]
                rows, indices, incident = rows[keep], indices[keep], incident[keep]
                if node_map is not None:
                    rows, indices = node_map[rows], node_map[indices]
                if t_map is not None:
                    incident = t_map[incident]
                counts = np.bincount(rows, minlength=n_kept)
            indptr, indices, incident = _inserted(out, counts, indices.astype(itype), incident, m_kept)
        for arr in (indptr, indices, incident):
            arr.flags.writeable = False
        out.indptr, out.indices, out.incident = indptr, indices, incident
        out._indptr32 = indptr.astype(np.int32) if itype is np.int32 else None

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

    @property
    def serial(self) -> int:
        """A number no other view of this process has (a derived view's :attr:`delta` names it)."""
        return self._serial

    @property
    def delta(self) -> ViewDelta | None:
        """How this view differs from the one :meth:`with_changes` made it from (``None``: built whole)."""
        return self._delta

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

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its content and rebuilt: a serial means nothing in another process."""
        return (GraphView, (self._triples, self._nodes, dict(self._labels), dict(self._sources)))

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


def _items(value: Any, name: str) -> Iterable[Any]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise EventError("GraphView", name, f"must be an iterable of items, got {type(value).__name__}")
    return value


def _node_ids(value: Any, name: str) -> list[str]:
    out = list(_items(value, name))
    for n in out:
        if not isinstance(n, str) or not n.strip():
            raise EventError("GraphView", name, f"node ids must be non-blank strings, got {n!r}")
    return out


def _triple_id(t: Triple) -> str:
    return t.id


def _kept(
    items: tuple[Any, ...], index: _Index, keep: np.ndarray, key: Any
) -> tuple[Sequence[Any], _Index, np.ndarray | None]:
    """The kept items, their id -> position index (renumbered from the first dropped one on) and
    old -> new positions; when nothing is dropped, ``items`` and ``index`` themselves (shared)."""
    if keep.all():
        return items, index, None
    first = int(np.argmin(keep))
    kept = list(itertools.compress(items, keep.tolist()))
    out = index.merged()
    for item in itertools.compress(items[first:], (~keep[first:]).tolist()):
        del out[key(item)]
    for j in range(first, len(kept)):
        out[key(kept[j])] = j
    return kept, _Index(out), np.cumsum(keep, dtype=np.int64) - 1


def _inserted(
    out: GraphView, counts: np.ndarray, indices: np.ndarray, incident: np.ndarray, m_kept: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR arrays (``counts`` per kept node, ``indices``, ``incident``) with the incidences of
    ``out``'s triples from ``m_kept`` on inserted in place (one numpy insert per array)."""
    n = len(out._nodes)
    s_new, o_new = out._subj[m_kept:], out._obj[m_kept:]
    pair = s_new != o_new  # a self-loop has one incidence
    t_new = np.arange(m_kept, len(out._triples), dtype=np.int64)
    row = np.concatenate([s_new, o_new[pair]])
    block = np.concatenate([np.zeros(len(s_new), dtype=np.int8), np.ones(int(pair.sum()), dtype=np.int8)])
    other = np.concatenate([o_new, s_new[pair]])
    tid = np.concatenate([t_new, t_new[pair]])
    order = np.lexsort((tid, block, row))  # np.insert keeps this order among equal positions
    row, block, other, tid = row[order], block[order], other[order], tid[order]
    counts = np.concatenate([counts, np.zeros(n - len(counts), dtype=np.int64)])
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    subjects = np.bincount(out._subj[:m_kept], minlength=n)
    pos = np.where(block == 0, start[row] + subjects[row], start[row + 1])
    indices = np.insert(indices, pos, other.astype(indices.dtype))
    incident = np.insert(incident, pos, tid)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts + np.bincount(row, minlength=n), out=indptr[1:])
    return indptr, indices, incident


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
