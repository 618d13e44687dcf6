"""A bounded, thread-safe LRU mapping: the one cache every adapter and the feedback learner keep.

Adapters remember a little per query (the gate's decision, what a query retrieved, a completion
awaiting its chunk) and must never grow without bound in a long-running host. Reads and writes
both count as use; past ``maxsize`` entries the least recently used one is dropped.

In the contract because default plugins keep it too and must not import the adapters' kit (which
imports the runtime that loads them); adapters take it from :mod:`triage_plugins.adapter_kit`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Generic, TypeVar, overload

__all__ = ["LRU"]

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")

_MISSING = object()


class LRU(Generic[K, V]):
    """At most ``maxsize`` entries; the least recently read or written one goes first.

    :param maxsize: the bound (>= 1).
    """

    def __init__(self, maxsize: int) -> None:
        if not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"maxsize must be a whole number >= 1, got {maxsize!r}")
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key`` (most recent), dropping the oldest entries past the bound."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    __setitem__ = put

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: D) -> V | D: ...
    def get(self, key: K, default: object = None) -> object:
        """The value under ``key`` (now the most recent), or ``default``."""
        with self._lock:
            value = self._data.get(key, _MISSING)  # type: ignore[arg-type]
            if value is _MISSING:
                return default
            self._data.move_to_end(key)
            return value

    def __getitem__(self, key: K) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value  # type: ignore[return-value]

    @overload
    def pop(self, key: K) -> V | None: ...
    @overload
    def pop(self, key: K, default: D) -> V | D: ...
    def pop(self, key: K, default: object = None) -> object:
        """Remove and return the value under ``key``, or ``default``."""
        with self._lock:
            return self._data.pop(key, default)  # type: ignore[arg-type]

    def values(self) -> list[V]:
        """A snapshot of the values, oldest first."""
        with self._lock:
            return list(self._data.values())

    def items(self) -> list[tuple[K, V]]:
        """A snapshot of the entries, oldest first."""
        with self._lock:
            return list(self._data.items())

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[K]:
        with self._lock:
            return iter(list(self._data))

    def __repr__(self) -> str:
        return f"LRU(maxsize={self.maxsize}, entries={len(self._data)})"
