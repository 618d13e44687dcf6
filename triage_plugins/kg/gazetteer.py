"""A compact gazetteer: the grounder's keys as sorted numpy arrays of 64-bit hashes (issue 20).

Every entry (a node id, display label or alias, filed under its key) is one row of three small
arrays — the hash of ``(kind, *key)``, the node index (``-1`` for "known unlinked") and the alias
index (``-1`` for a node id, ``-2`` for a display label) — so memory per entry is bounded (17 bytes for int32 node indices,
plus 8 per distinct key prefix) and no Python object is kept per label or alias. A key's entries are
found by binary search; the surface, tokens and case of each candidate are recomputed from the
graph (or the alias list) when it is looked up, and a candidate whose recomputed key differs (a hash
collision) is dropped, so lookups are exact. Every prefix of a token key (``("christopher",)`` for
``christopher nolan``) is in a second sorted array, which stands in for the trie's inner nodes.

Hashes are Python's ``hash`` of a tuple of strings, fixed within one process: a gazetteer is never
stored or sent to another process (nor is the :class:`GraphView` it indexes).
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from triage_plugins.contract.graph_view import GraphView, normalize_label

__all__ = ["KIND_SYMBOLIC", "KIND_TOKENS", "KIND_WEAK", "Entry", "Gazetteer", "fold", "label_tokens"]

KIND_TOKENS = "t"  # key: the label's significant tokens (stop words dropped); longest match in text
KIND_WEAK = "w"  # key: all tokens of a label made only of stop/function words
KIND_SYMBOLIC = "s"  # key: (the stripped surface,) of a label without letters or digits
_ID, _LABEL = -1, -2  # alias index of a node id's row and of a display label's row

_PUNCT = re.compile(r"[\W_]+", re.UNICODE)
_normalize = normalize_label.__wrapped__  # building passes over every label once: skip the memo
_CACHE = 1 << 13  # looked-up keys whose answers are remembered (memoized entries, prefix tests)


class Entry(NamedTuple):
    """One gazetteer entry, as the grounder compares it."""

    node: str | None
    surface: str  # the id, label or alias as written
    full: tuple[str, ...]  # its normalized tokens, stop words included
    has_upper: bool
    rank: int  # 0 = explicit alias, 1 = node id or display label
    degree: int


def fold(token: str) -> str:
    """Drop diacritics from a normalized token (``é`` -> ``e``); ASCII passes unchanged."""
    if token.isascii():
        return token
    decomposed = unicodedata.normalize("NFKD", token)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def label_tokens(text: str, normalize=normalize_label) -> tuple[str, ...]:  # noqa: ANN001 - a str -> str
    """Normalized, diacritic-folded tokens of a label (stop words included)."""
    if text.isascii():  # NFKC and folding leave ASCII as is; casefold is lower
        return tuple(_PUNCT.sub(" ", text.lower()).split())
    return tuple(fold(t) for t in normalize(text).split())


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values, by sorting (numpy 2.4's hashing ``np.unique`` is far slower here)."""
    out = np.sort(values)
    return out[np.r_[True, out[1:] != out[:-1]]] if out.size else out


def _merged(distinct: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Sorted distinct ``distinct`` and ``values``: the new ones inserted, no sort of the whole."""
    new = _distinct(values)
    at = np.searchsorted(distinct, new)
    known = at < len(distinct)
    known[known] = distinct[at[known]] == new[known]
    return np.insert(distinct, at[~known], new[~known])


def _bit_filter(hashes: np.ndarray) -> tuple[bytes, int]:
    """A bit table of at least 16 bits per hash, one bit set per hash (its low bits): a clear bit
    proves a hash absent without a search (a set one is a ~6 % false positive, then searched)."""
    nbits = 1 << max(6, int(2 * len(hashes)).bit_length() + 3)
    pos = hashes & np.int64(nbits - 1)
    table = np.zeros(nbits // 8, dtype=np.uint8)
    np.bitwise_or.at(table, pos >> 3, (np.uint8(1) << (pos & 7).astype(np.uint8)))
    return table.tobytes(), nbits - 1


class Gazetteer:
    """The keys of one graph's node ids, display labels and (later) aliases.

    :param graph: the graph whose ids and labels are filed.
    :param slot: ``(full tokens, surface) -> (kind, key tuple)``, the grounder's filing rule.
    """

    def __init__(self, graph: GraphView, slot) -> None:  # noqa: ANN001 - Callable[[tuple], tuple | None]
        self.graph = graph
        self._slot = slot
        self._degrees = memoryview(np.ascontiguousarray(graph.degrees(), dtype=np.int64))
        self._aliases: list[str] = []
        self.weak_max = 0
        hashes, nodes, prefixes, kinds = self._file_nodes(graph, range(len(graph.nodes)))
        itype = np.int32 if len(graph.nodes) < np.iinfo(np.int32).max else np.int64
        self._hash = np.frombuffer(hashes, dtype=np.int64)
        self._node = np.frombuffer(nodes, dtype=np.int64).astype(itype)
        self._alias = np.frombuffer(kinds, dtype=np.int32)
        self._prefix = _distinct(np.frombuffer(prefixes, dtype=np.int64))
        self._sort()

    def _file(self, surface: str, node: int, hashes: array, nodes: array, prefixes: array) -> None:
        """Append the row of ``surface`` (naming node index ``node``) and its key's prefixes."""
        full = label_tokens(surface, _normalize)
        kind, key = self._slot(full, surface)
        h = hash((kind, *key))
        hashes.append(h)
        nodes.append(node)
        if kind == KIND_TOKENS:
            prefixes.append(h)  # the key itself
            for j in range(1, len(key)):
                prefixes.append(hash((kind, *key[:j])))
        elif kind == KIND_WEAK:
            self.weak_max = max(self.weak_max, len(key))

    def _sort(self) -> None:
        order = np.argsort(self._hash, kind="stable")
        self._hash, self._node, self._alias = self._hash[order], self._node[order], self._alias[order]
        for arr in (self._hash, self._node, self._alias, self._prefix):
            arr.flags.writeable = False
        # memoryviews: scalar reads and bisect without numpy's per-call overhead
        self._hashes, self._nodes, self._kinds = (
            memoryview(a) for a in (self._hash, self._node, self._alias)
        )
        self._prefixes = memoryview(self._prefix)
        self._hash_bits, self._hash_mask = _bit_filter(self._hash)
        self._prefix_bits, self._prefix_mask = _bit_filter(self._prefix)
        self.entries = functools.lru_cache(maxsize=_CACHE)(self._entries)
        self.has_prefix = functools.lru_cache(maxsize=_CACHE)(self._has_prefix)

    def updated(self, graph: GraphView) -> Gazetteer | None:
        """A gazetteer of ``graph`` without aliases, when ``graph`` was made from this one's graph by
        :meth:`~triage_plugins.contract.graph_view.GraphView.with_changes` (else ``None``).

        Only the removed, relabeled and added nodes are (re)filed; the other rows are kept,
        renumbered with one vectorized pass. Prefixes of removed keys stay: a prefix only lets the
        trie walk go on, and a lookup still checks the whole key, so answers equal a full build's.
        """
        delta = graph.delta
        if delta is None or delta.parent != self.graph.serial:
            return None
        out = object.__new__(Gazetteer)
        out.graph, out._slot, out._aliases, out.weak_max = graph, self._slot, [], self.weak_max
        out._degrees = memoryview(np.ascontiguousarray(graph.degrees(), dtype=np.int64))
        n_old = len(self.graph.nodes)
        keep = np.ones(n_old, dtype=bool)
        keep[delta.removed] = False
        stale = ~keep
        stale[delta.relabeled] = True
        node = self._node.astype(np.int64)
        rows = self._alias < 0  # ids and labels; aliases are filed again by their owner
        rows[rows] = ~stale[node[rows]]
        remap = np.cumsum(keep, dtype=np.int64) - 1
        filed = itertools.chain(remap[delta.relabeled].tolist(), range(delta.added_from, len(graph.nodes)))
        hashes, nodes, prefixes, kinds = out._file_nodes(graph, filed)
        itype = np.int32 if len(graph.nodes) < np.iinfo(np.int32).max else np.int64
        out._hash = np.concatenate([self._hash[rows], np.frombuffer(hashes, dtype=np.int64)])
        out._node = np.concatenate([remap[node[rows]], np.frombuffer(nodes, dtype=np.int64)]).astype(itype)
        out._alias = np.concatenate([self._alias[rows], np.frombuffer(kinds, dtype=np.int32)])
        out._prefix = _merged(self._prefix, np.frombuffer(prefixes, dtype=np.int64))
        out._sort()
        return out

    def _file_nodes(self, graph: GraphView, positions: Iterable[int]) -> tuple[array, array, array, array]:
        """The rows of the nodes at ``positions`` of ``graph``: each id, and its label when it has one
        of its own (hashes, node positions, prefix hashes, kinds)."""
        hashes, nodes, prefixes, kinds = array("q"), array("q"), array("q"), array("i")
        labels, all_nodes = graph.labels, graph.nodes
        for k in positions:
            node = all_nodes[k]
            self._file(node, k, hashes, nodes, prefixes)
            kinds.append(_ID)
            label = labels.get(node)
            if label is not None and label != node:
                self._file(label, k, hashes, nodes, prefixes)
                kinds.append(_LABEL)
        return hashes, nodes, prefixes, kinds

    def add_aliases(self, aliases: Sequence[tuple[str, str | None]]) -> None:
        """File each ``(surface, node id or None)`` as an explicit alias (rank 0)."""
        hashes, nodes, prefixes = array("q"), array("q"), array("q")
        base = len(self._aliases)
        for surface, target in aliases:
            self._aliases.append(surface)
            self._file(
                surface, -1 if target is None else self.graph.node_index(target), hashes, nodes, prefixes
            )
        if not hashes:
            return
        self._hash = np.concatenate([self._hash, np.frombuffer(hashes, dtype=np.int64)])
        self._node = np.concatenate(
            [self._node, np.frombuffer(nodes, dtype=np.int64).astype(self._node.dtype)]
        )
        self._alias = np.concatenate([self._alias, np.arange(base, len(self._aliases), dtype=np.int32)])
        self._prefix = _distinct(np.concatenate([self._prefix, np.frombuffer(prefixes, dtype=np.int64)]))
        self._sort()

    # ------------------------------------------------------------------ lookups

    def _has_prefix(self, key: tuple[str, ...]) -> bool:
        """Whether some token key starts with ``key`` (or is it): the trie walk may go on."""
        h = hash((KIND_TOKENS, *key))
        pos = h & self._prefix_mask
        if not self._prefix_bits[pos >> 3] >> (pos & 7) & 1:
            return False
        prefixes = self._prefixes
        i = bisect_left(prefixes, h)
        return i < len(prefixes) and prefixes[i] == h

    def _entries(self, kind: str, key: tuple[str, ...]) -> tuple[Entry, ...]:
        """The entries filed under ``(kind, key)``, best candidate first: rank, higher degree, node
        id, surface; an alias replaces the id or label of its node spelled the same way."""
        h = hash((kind, *key))
        pos = h & self._hash_mask
        if not self._hash_bits[pos >> 3] >> (pos & 7) & 1:
            return ()
        best: dict[tuple[str | None, str], Entry] = {}
        graph = self.graph
        hashes = self._hashes
        i, n = bisect_left(hashes, h), len(hashes)
        while i < n and hashes[i] == h:
            k, a = self._nodes[i], self._kinds[i]
            i += 1
            node = None if k < 0 else graph.nodes[k]
            if a >= 0:
                surface, rank = self._aliases[a], 0
            else:
                surface, rank = (node if a == _ID else graph.labels[node]), 1  # type: ignore[index]
            full = label_tokens(surface)
            if self._slot(full, surface) != (kind, key):
                continue  # another key of the same hash
            old = best.get((node, surface))
            if old is None or rank < old.rank:
                degree = self._degrees[k] if k >= 0 else 0
                upper = surface != surface.lower() if surface.isascii() else any(c.isupper() for c in surface)
                best[node, surface] = Entry(node, surface, full, upper, rank, degree)
        if len(best) < 2:
            return tuple(best.values())
        return tuple(sorted(best.values(), key=lambda e: (e.rank, -e.degree, e.node or "", e.surface)))

    def __len__(self) -> int:
        return len(self._hash)

    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        arrays = sum(a.nbytes for a in (self._hash, self._node, self._alias, self._prefix))
        return arrays + len(self._hash_bits) + len(self._prefix_bits)
