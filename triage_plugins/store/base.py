"""The store seam (DESIGN §7): one :class:`Store` protocol, and :func:`open_store` to pick a backend.

A store holds runs, every delivered event, metric rows, contribution scores and learned parameters.
It *is* the learned model, so every backend keeps the same behaviour: scores change by atomic
increments, writes are transactions, undefined metrics are stored as ``None`` with a reason.

Backends: SQLite (:mod:`triage_plugins.store.sqlite`, the default) for a path, a ``sqlite:///`` URL
or ``":memory:"``; PostgreSQL (:mod:`triage_plugins.store.postgres`, one database shared by many
workers and hosts) for a ``postgresql://`` or ``postgres://`` URL. ``TRIAGE_STORE_URL`` (else
``TRIAGE_STORE``) names the store when none is given (:func:`store_from_env`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from triage_plugins.contract.errors import StoreError

if TYPE_CHECKING:
    from triage_plugins.contract.events import Event
    from triage_plugins.store.rows import MetricRow, RunRow, ScoreRow

__all__ = ["ENV_VARS", "Store", "StoreTarget", "is_store", "open_store", "store_from_env"]

POSTGRES_SCHEMES = ("postgresql", "postgres")
#: Environment variables naming the store, first set wins.
ENV_VARS = ("TRIAGE_STORE_URL", "TRIAGE_STORE")


@runtime_checkable
class Store(Protocol):
    """What every store backend provides (the SQLite backend documents each method)."""

    @property
    def url(self) -> str: ...

    @property
    def path(self) -> Path | None: ...

    @property
    def schema_version(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...

    def transaction(self) -> AbstractContextManager[Store]: ...

    # runs
    def start_run(self, kind: str, config: Mapping[str, Any] | None = None) -> str: ...

    def end_run(
        self, run_id: str, *, dropped: int = 0, undelivered: int = 0, faults: Mapping[str, Any] | None = None
    ) -> None: ...

    def record_faults(self, run_id: str, faults: Mapping[str, Any]) -> None: ...

    def claim_replay(self, uid: str) -> bool: ...

    def runs(self, kind: str | None = None) -> list[RunRow]: ...

    def delete_run(self, run_id: str) -> dict[str, int]: ...

    def prune(self, *, older_than: float | None = None, keep_runs: int | None = None) -> dict[str, int]: ...

    # events
    def record_event(self, event: Event, run_id: str | None = None, *, ts: float | None = None) -> int: ...

    def record_events(self, events: Iterable[Event], run_id: str | None = None) -> int: ...

    def events(
        self,
        kind: str | type[Event] | None = None,
        run_id: str | None = None,
        *,
        framework: str | None = None,
        query_id: str | None = None,
    ) -> Iterator[Event]: ...

    # metrics
    def record_metric(
        self,
        scope: str,
        scope_id: str,
        name: str,
        value: float | None,
        reason: str | None = None,
        **fields: Any,
    ) -> int: ...

    def record_metrics(self, rows: Iterable[MetricRow], *, run_id: str | None = None) -> int: ...

    def metrics(
        self, scope: str | None = None, name: str | None = None, run_id: str | None = None, **filters: Any
    ) -> list[MetricRow]: ...

    # contribution scores and learned parameters
    def add_score(self, unit: str, id: str, delta: float, *, init: float = 100.0) -> float: ...

    def add_scores(
        self, unit: str, deltas: Mapping[str, float], *, init: float = 100.0
    ) -> dict[str, float]: ...

    def set_score(self, unit: str, id: str, raw: float) -> None: ...

    def get_scores(self, unit: str, ids: Iterable[str] | None = None) -> dict[str, ScoreRow]: ...

    def get_param(self, name: str, default: Any = None) -> Any: ...

    def set_param(self, name: str, value: Any) -> None: ...

    def add_param(
        self, name: str, delta: float, *, initial: float = 0.0, bounds: tuple[float, float] | None = None
    ) -> float: ...

    # what other processes changed, cheaply
    def scores_changed_at(self, unit: str) -> float | None: ...

    def last_event(self, kind: str, *, framework: str | None, query_id: str) -> Event | None: ...

    def counts(self) -> dict[str, int]: ...

    @staticmethod
    def open(target: StoreTarget, *, readonly: bool = False) -> Store:
        """:func:`open_store` (``Store.open(url)`` reads as it did before the protocol)."""
        return open_store(target, readonly=readonly)


StoreTarget = Store | str | os.PathLike[str]


def is_store(value: object) -> bool:
    """Whether ``value`` is an opened store (any backend), rather than a path or URL naming one."""
    return isinstance(value, Store)


def store_from_env() -> str | None:
    """The store ``TRIAGE_STORE_URL`` (else ``TRIAGE_STORE``) names, or ``None`` when neither is set."""
    for name in ENV_VARS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def open_store(target: StoreTarget | None = None, *, readonly: bool = False) -> Store:
    """Open (creating and migrating as needed) the store a path or URL names; a store is returned as is.

    :param target: a path, ``sqlite:///relative`` / ``sqlite:////absolute``, ``":memory:"``, a
        ``postgresql://`` / ``postgres://`` URL, or a store; ``None`` = :func:`store_from_env`.
    :param readonly: open an existing store to read it; nothing is created or migrated.
    :raises StoreError: the URL's scheme is unsupported, the store cannot be reached or is not a
        triage store, or no target was given and no environment variable names one.
    """
    if is_store(target):
        return target  # type: ignore[return-value]
    if target is None:
        target = store_from_env()
        if target is None:
            raise StoreError(f"no store given and none of {', '.join(ENV_VARS)} is set")
    if isinstance(target, str):
        scheme, sep, _ = target.strip().partition("://")
        if sep and scheme.lower().partition("+")[0] in POSTGRES_SCHEMES:  # postgresql+psycopg:// too
            from triage_plugins.store.postgres import PostgresStore

            return PostgresStore(target, readonly=readonly)
    from triage_plugins.store.sqlite import SQLiteStore

    return SQLiteStore(target, readonly=readonly)  # type: ignore[arg-type]
