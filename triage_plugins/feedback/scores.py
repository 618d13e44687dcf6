"""Contribution scores per triple or chunk (EvoRAG §4.3, §5; DESIGN §4, §7).

Raw scores start at 100 (EvoRAG §4: "all scores are initialized to 100") and are persisted through
the project store as atomic increments, so concurrent workers lose no update (DESIGN §7).

**Normalization** (S_c ∈ [0, 1] of eq. 2). The paper says S_c is "the learnable contribution score
by normalization" without giving the map. We use a fixed affine map with clipping::

    S_c = clip(raw / scale, 0, 1),   scale = 200   (init 100 ↦ 0.5)

It is query-independent (a score means the same thing in every query, unlike a min-max over the
current candidates), it leaves an untouched triple exactly in the middle of the range, and its
derivative is constant, dS_c/draw = 1/scale inside the range, so the chain rule into the raw score
is exact (see :mod:`triage_plugins.feedback.backprop`). Outside the range the clip is flat; the
optimizer therefore works as projected gradient descent on [0, scale] instead of letting a score
leave the range and freeze.

The in-memory cache serves the synchronous rerank path; a cache miss reads the missing ids from the
store in one query and remembers absent ones as ``init``. Another process writing the same store is
not seen until :meth:`ContributionScores.refresh` (drop the cache) or :meth:`ContributionScores.merge`
(overwrite the cached values the store changed since).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from triage_plugins.contract.errors import ConfigError

if TYPE_CHECKING:
    from triage_plugins.store import Store

__all__ = ["DEFAULT_INIT", "DEFAULT_SCALE", "ContributionScores", "MemoryScoreStore", "Unit"]

log = logging.getLogger("triage.feedback.scores")

Unit = Literal["triple", "chunk"]
DEFAULT_INIT = 100.0
DEFAULT_SCALE = 200.0


class _Row(NamedTuple):
    raw: float
    n_updates: int
    updated_at: float


class MemoryScoreStore:
    """The score subset of the store API, in memory (used when no store is configured)."""

    def __init__(self) -> None:
        self._scores: dict[tuple[str, str], _Row] = {}
        self._params: dict[str, Any] = {}
        self._lock = threading.Lock()

    def add_scores(
        self, unit: str, deltas: Mapping[str, float], init: float = DEFAULT_INIT
    ) -> dict[str, float]:
        out: dict[str, float] = {}
        make = tuple.__new__  # _Row(...) without the Python-level NamedTuple constructor
        with self._lock:
            now = time.time()
            scores = self._scores
            for key, delta in deltas.items():
                row = scores.get((unit, key))
                if row is None:
                    raw, n = init + float(delta), 1
                else:
                    raw, n = row.raw + float(delta), row.n_updates + 1
                scores[(unit, key)] = make(_Row, (raw, n, now))
                out[key] = raw
        return out

    def set_score(self, unit: str, id: str, raw: float) -> None:
        with self._lock:
            row = self._scores.get((unit, id))
            self._scores[(unit, id)] = _Row(float(raw), 1 if row is None else row.n_updates + 1, time.time())

    def get_scores(self, unit: str, ids: Iterable[str] | None = None) -> dict[str, _Row]:
        with self._lock:
            if ids is None:
                return {k: row for (u, k), row in self._scores.items() if u == unit}
            return {k: self._scores[(unit, k)] for k in ids if (unit, k) in self._scores}

    def get_param(self, name: str) -> Any:
        return self._params.get(name)

    def set_param(self, name: str, value: Any) -> None:
        self._params[name] = value


class ContributionScores:
    """Raw contribution scores of one unit kind, cached, with their normalization S_c.

    :param store: the project :class:`~triage_plugins.store.Store`, or ``None`` for an in-memory one.
    :param unit: ``"triple"`` or ``"chunk"`` (EvoRAG §6.12 chunk-level variant).
    :param init: raw score of a unit never updated (EvoRAG §4: 100).
    :param scale: raw score mapped to S_c = 1; S_c = clip(raw / scale, 0, 1).
    """

    def __init__(
        self,
        store: Store | MemoryScoreStore | None,
        unit: Unit,
        *,
        init: float = DEFAULT_INIT,
        scale: float = DEFAULT_SCALE,
    ) -> None:
        if unit not in ("triple", "chunk"):
            raise ConfigError(f"unit must be 'triple' or 'chunk', got {unit!r}")
        if not (math.isfinite(scale) and scale > 0):
            raise ConfigError(f"score scale must be a positive number, got {scale!r}")
        if not (math.isfinite(init) and 0.0 <= init <= scale):
            raise ConfigError(f"initial score must lie in [0, scale={scale}], got {init!r}")
        self.store = store if store is not None else MemoryScoreStore()
        self.unit = unit
        self.init = float(init)
        self.scale = float(scale)
        self._cache: dict[str, float] = {}
        self._lock = threading.Lock()
        self._generation = 0  # bumped by refresh(): a store read begun before it is not cached
        self._writes = 0  # writes made by this process (merge() keeps values written after its read)
        self._stamps: dict[str, int] = {}  # id -> the write that last cached it

    # ------------------------------------------------------------------ reading

    def raw(self, ids: Sequence[str]) -> np.ndarray:
        """Raw scores of ``ids`` (``init`` for a unit never updated), from the cache."""
        cache = self._cache
        values = [cache.get(i) for i in ids]
        if None in values:
            loaded = self._load([i for i, v in zip(ids, values, strict=True) if v is None])
            values = [loaded[i] if v is None else v for i, v in zip(ids, values, strict=True)]
        return np.asarray(values, dtype=np.float64)

    def normalized(self, ids: Sequence[str]) -> np.ndarray:
        """S_c of ``ids``: clip(raw / scale, 0, 1)."""
        return self.normalize(self.raw(ids))

    def normalize(self, raw: np.ndarray | float) -> np.ndarray:
        """The normalization raw ↦ S_c (module docstring)."""
        return (np.asarray(raw, dtype=np.float64) / self.scale).clip(0.0, 1.0)

    def scored(self) -> dict[str, float]:
        """Raw score of every unit that has a stored score (read from the store; refreshes the cache)."""
        with self._lock:
            generation = self._generation
        rows = self.store.get_scores(self.unit, None)
        out = {key: float(row.raw) for key, row in rows.items()}
        return self._remember(out, generation)

    def refresh(self) -> None:
        """Forget the cache (the next read goes to the store)."""
        with self._lock:
            self._cache.clear()
            self._stamps.clear()
            self._generation += 1

    def _load(self, ids: Sequence[str]) -> dict[str, float]:
        with self._lock:
            generation = self._generation
        rows = self.store.get_scores(self.unit, list(dict.fromkeys(ids)))
        loaded = {key: self.init if (row := rows.get(key)) is None else float(row.raw) for key in ids}
        return self._remember(loaded, generation)

    def _remember(self, loaded: dict[str, float], generation: int) -> dict[str, float]:
        """Cache what a store read returned, never over a value written since the read began (an
        :meth:`add` of the learning thread is newer), and nothing at all when a :meth:`refresh`
        came in between; returns the cached values where they are newer. Learned scores are then a
        pure function of the ordered updates, whatever a concurrent rerank reads (issue #30)."""
        with self._lock:
            if generation != self._generation:
                return loaded
            cache = self._cache
            for key, value in loaded.items():
                cache.setdefault(key, value)
            return {key: cache[key] for key in loaded}

    # ------------------------------------------------------------------ writing

    def add(self, deltas: Mapping[str, float]) -> dict[str, float]:
        """Atomically add ``deltas`` to the raw scores; returns the new raw values."""
        clean = {k: float(v) for k, v in deltas.items() if v != 0.0 and math.isfinite(v)}
        if not clean:
            return {}
        new = {
            k: float(v) for k, v in (self.store.add_scores(self.unit, clean, init=self.init) or {}).items()
        }
        self._cached(new)
        return new

    def add_and_step(
        self,
        deltas: Mapping[str, float],
        name: str,
        delta: float,
        *,
        initial: float,
        bounds: tuple[float, float],
        cap: tuple[str, float] | None = None,
    ) -> float | None:
        """:meth:`add`, then the store's atomic ``add_param(name, delta, …)``, in one store call when the
        store has ``add_scores_and_param`` (one round trip on PostgreSQL); returns the parameter's new value.

        :param cap: ``(counter, limit)``: the store's counter is stepped by 1 in the same call, and
            nothing else changes when it is then over ``limit`` (``None`` is returned).
        """
        clean = {k: float(v) for k, v in deltas.items() if v != 0.0 and math.isfinite(v)}
        store: Any = self.store
        if getattr(type(store), "add_scores_and_param", None) is None or not clean and cap is None:
            if cap is not None and float(store.add_param(cap[0], 1.0, bounds=(0.0, cap[1] + 1.0))) > cap[1]:
                return None
            self.add(clean)
            return float(store.add_param(name, delta, initial=initial, bounds=bounds))
        kwargs = {} if cap is None else {"cap": cap}  # a store without caps is called as before
        written = store.add_scores_and_param(
            self.unit, clean, init=self.init, name=name, delta=delta, initial=initial, bounds=bounds, **kwargs
        )
        if written is None:
            return None
        self._cached({k: float(v) for k, v in written[0].items()})
        return float(written[1])

    def _cached(self, new: Mapping[str, float]) -> None:
        """Cache values this process wrote, stamped so a store read begun before does not overwrite them."""
        with self._lock:
            self._writes += 1
            self._cache.update(new)
            stamps = self._stamps
            for key in new:
                stamps[key] = self._writes

    def mark(self) -> tuple[int, int]:
        """Where the cache stands before a store read whose rows go to :meth:`merge`."""
        with self._lock:
            return self._writes, self._generation

    def merge(self, rows: Mapping[str, float], mark: tuple[int, int]) -> int:
        """Overwrite cached scores with ``rows`` read from the store after :meth:`mark` returned ``mark``,
        except those this process wrote since (they are newer) and none after a :meth:`refresh`; ids
        not cached are left to be read when asked. Returns how many cached values changed."""
        changed = 0
        since_write, generation = mark
        with self._lock:
            if generation != self._generation:
                return 0
            cache, stamps = self._cache, self._stamps
            for key, value in rows.items():
                old = cache.get(key)
                if old is not None and old != value and stamps.get(key, 0) <= since_write:
                    cache[key] = value
                    changed += 1
        return changed

    def set(self, id: str, raw: float) -> None:
        """Set one raw score (used for the score of a fused shortcut, EvoRAG §5.1)."""
        self.store.set_score(self.unit, id, float(raw))
        self._cached({id: float(raw)})

    # ------------------------------------------------------------------ parameters

    def get_param(self, name: str, default: Any = None) -> Any:
        """A persisted parameter (for example the learned α), or ``default`` when absent."""
        try:
            value = self.store.get_param(name)
        except KeyError:
            return default
        return default if value is None else value

    def set_param(self, name: str, value: Any) -> None:
        self.store.set_param(name, value)
