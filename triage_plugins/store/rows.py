"""Rows of the store, shared by every backend (DESIGN §7): metric rows, scores, runs; value checks."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from triage_plugins.contract.errors import StoreError

if TYPE_CHECKING:
    from triage_plugins.metrics.result import MetricResult

__all__ = ["SCOPES", "TABLES", "MetricRow", "RunRow", "ScoreRow"]

SCOPES: tuple[str, ...] = ("chunk", "graph", "query")
TABLES: tuple[str, ...] = ("runs", "events", "metrics", "scores", "params", "blobs", "parts")
#: ``metrics.name`` of a packed row (schema 6): several metric rows of one scope id stored as one
#: (``triage_plugins.store.sql``); no metric may take this name.
PACKED = "*"

# --------------------------------------------------------------------------- rows


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One row of the ``metrics`` table: a metric value (or ``None`` with its reason) for one scope.

    :param scope: ``"chunk"``, ``"graph"`` or ``"query"``.
    :param scope_id: the chunk id, graph name or query id the value belongs to.
    :param name: the paper's symbol (``"ERC"``, ``"TCS"`` ...).
    :param value: a finite number, or ``None`` (then ``reason`` is required).
    :param ts: epoch seconds; filled with the write time when ``None``.
    """

    scope: str
    scope_id: str
    name: str
    value: float | None
    reason: str | None = None
    run_id: str | None = None
    framework: str | None = None
    retriever: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    n: int | None = None
    ts: float | None = None

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise StoreError(f"MetricRow.scope must be one of {SCOPES}, got {self.scope!r}")
        for name in ("scope_id", "name"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise StoreError(f"MetricRow.{name} must be a non-blank string, got {value!r}")
        if self.name == PACKED:
            raise StoreError(f"metric name {PACKED!r} is reserved (the store's packed rows); choose another")
        if self.value is None:
            if not isinstance(self.reason, str) or not self.reason.strip():
                raise StoreError(f"metric {self.name!r} of {self.scope_id!r}: a None value needs a reason")
        else:
            if isinstance(self.value, bool) or not isinstance(self.value, int | float):
                raise StoreError(f"metric {self.name!r}: value must be a number or None, got {self.value!r}")
            if not math.isfinite(self.value):
                raise StoreError(
                    f"metric {self.name!r} of {self.scope_id!r}: value must be finite, got {self.value!r}; "
                    "record None with a reason instead"
                )
            object.__setattr__(self, "value", float(self.value))
        if not isinstance(self.details, Mapping):
            raise StoreError(
                f"metric {self.name!r}: details must be a mapping, got {type(self.details).__name__}"
            )
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))
        if self.n is not None and (isinstance(self.n, bool) or not isinstance(self.n, int)):
            raise StoreError(f"metric {self.name!r}: n must be an int or None, got {self.n!r}")

    @classmethod
    def from_result(cls, scope: str, scope_id: str, result: MetricResult, **fields: Any) -> MetricRow:
        """The row of a :class:`~triage_plugins.metrics.result.MetricResult` (name, value, reason, n, details)."""
        return cls(
            scope,
            scope_id,
            result.name,
            result.value,
            result.reason,
            details=result.details,
            n=result.n,
            **fields,
        )

    @classmethod
    def from_results(
        cls,
        scope: str,
        scope_id: str,
        results: Iterable[MetricResult],
        framework: str | None = None,
        retriever: str | None = None,
    ) -> list[MetricRow]:
        """The rows :meth:`from_result` makes of ``results`` (with ``framework`` and ``retriever``),
        equal field for field, for a scorer writing a query's rows at once. A result in
        :class:`~triage_plugins.metrics.result.MetricResult`'s normal form (a non-blank name other than
        :data:`PACKED`, a finite ``float`` or ``None`` with a non-blank reason, ``n`` an ``int`` or
        ``None``, ``details`` its read-only mapping, shared) skips ``__post_init__``; any other goes
        through the checked constructor and fails as it would there."""
        if scope not in SCOPES or not isinstance(scope_id, str) or not scope_id.strip():
            return [cls.from_result(scope, scope_id, r, framework=framework, retriever=retriever) for r in results]
        out = []
        new, isfinite = object.__new__, math.isfinite
        for r in results:
            name, value, reason, n, details = r.name, r.value, r.reason, r.n, r.details
            if (
                type(details) is not MappingProxyType
                or type(name) is not str
                or not name.strip()
                or name == PACKED
                or (n is not None and type(n) is not int)
                or (
                    (type(reason) is not str or not reason.strip())
                    if value is None
                    else (type(value) is not float or not isfinite(value))
                )
            ):
                out.append(cls(scope, scope_id, name, value, reason, None, framework, retriever, details, n))
                continue
            row = new(cls)
            _SET_SCOPE(row, scope)
            _SET_SCOPE_ID(row, scope_id)
            _SET_NAME(row, name)
            _SET_VALUE(row, value)
            _SET_REASON(row, reason)
            _SET_RUN_ID(row, None)
            _SET_FRAMEWORK(row, framework)
            _SET_RETRIEVER(row, retriever)
            _SET_DETAILS(row, details)
            _SET_N(row, n)
            _SET_TS(row, None)
            out.append(row)
        return out


# The slots' own setters (a frozen dataclass refuses ``setattr``): ``MetricRow.from_results``.
(
    _SET_SCOPE,
    _SET_SCOPE_ID,
    _SET_NAME,
    _SET_VALUE,
    _SET_REASON,
    _SET_RUN_ID,
    _SET_FRAMEWORK,
    _SET_RETRIEVER,
    _SET_DETAILS,
    _SET_N,
    _SET_TS,
) = (MetricRow.__dict__[f.name].__set__ for f in fields(MetricRow))


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """A contribution score: the raw value (initially 100), how many updates it had, when the last was."""

    raw: float
    n_updates: int
    updated_at: float


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run: its id, kind (``"demo"``, ``"compare"``, ``"serve"`` ...), config, start/end times, and
    how many events it lost: ``dropped`` (queue full) and ``undelivered`` (still queued at close).

    ``faults`` holds the run's failed store writes (:meth:`StoreFaults.to_dict
    <triage_plugins.store.guard.StoreFaults.to_dict>`): ``failed`` / ``lost`` as
    ``{what: {cause: count}}``, ``spilled``, ``replayed``; empty when none failed."""

    id: str
    kind: str
    config: Mapping[str, Any]
    started_at: float
    ended_at: float | None
    dropped: int = 0
    undelivered: int = 0
    faults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def writes_lost(self) -> int:
        """Store writes (events, metric rows, scores, parameters) this run lost: neither stored nor spilled."""
        lost = self.faults.get("lost") or {}
        return sum(int(n) for causes in lost.values() for n in causes.values())

    @property
    def writes_failed(self) -> int:
        """Store writes of this run that failed at first (stored later when ``replayed``)."""
        failed = self.faults.get("failed") or {}
        return sum(int(n) for causes in failed.values() for n in causes.values())


# --------------------------------------------------------------------------- helpers


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=repr)
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


# ``json.dumps(value, ensure_ascii=False, allow_nan=..., default=_json_default)``, the encoders built
# once (``json.dumps`` with options builds one per call, ~0.7 µs of a metric row's ~2 µs).
_ENCODERS = {
    allow: json.JSONEncoder(ensure_ascii=False, allow_nan=allow, default=_json_default)
    for allow in (True, False)
}


def _dumps(value: Any, what: str, *, allow_nan: bool) -> str:
    try:
        return _ENCODERS[allow_nan].encode(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} cannot be stored as JSON: {exc}") from None


def _need_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise StoreError(f"{what} must be a non-blank string, got {value!r}")
    return value


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise StoreError(f"{what} must be a finite number, got {value!r}")
    return float(value)
