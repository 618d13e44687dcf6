"""What the two SQL backends share: the store methods whose SQL is the same in SQLite and PostgreSQL.

:class:`SQLStore` holds them once, written with ``?`` placeholders; a backend sets :attr:`SQLStore._PARAM`
to its own (PostgreSQL's psycopg: ``%s``) and provides ``_read(sql, params)`` (rows of a query) and
``_tx()`` (a context yielding a connection whose ``execute`` returns a cursor, committed at the end).
Writes whose SQL differs (upserts, batched inserts, migrations) stay in each backend; their argument
checks are here once (``_checked_deltas``, ``_checked_step``).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, Self

from triage_plugins.contract.errors import EventError, StoreError
from triage_plugins.contract.events import EVENT_TYPES, Event, from_json, join_json, part_keys, split_json
from triage_plugins.store.chunks import split_text
from triage_plugins.store.rows import (
    PACKED,
    SCOPES,
    TABLES,
    MetricRow,
    RunRow,
    ScoreRow,
    _dumps,
    _finite,
    _need_text,
)

__all__ = ["DEDUPLICATED_KINDS", "PAGE", "SQLStore"]

PAGE = 500  # rows per page when iterating events; ids per IN (...) query
#: Event kinds stored once per distinct content (a graph event repeats the whole graph).
DEDUPLICATED_KINDS: frozenset[str] = frozenset({"graph"})

_EVENT_SQL = "SELECT e.id, COALESCE(b.json, e.json) FROM events e LEFT JOIN blobs b ON b.hash = e.blob WHERE "
#: How many metric rows a set of ``metrics`` table rows holds (a packed row holds ``n``).
_METRIC_COUNT = f"COALESCE(SUM(CASE WHEN name = '{PACKED}' THEN n ELSE 1 END), 0)"
_PART_CACHE = 50_000  # parts held while iterating events (a page's parts are fetched in one query)
_LOOK_FIRST = 1 << 20  # characters of new parts above which the stored ones are looked up first


class Written:
    """The part keys a write transaction stored, and the prune count it read."""

    __slots__ = ("keys", "pruned")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.pruned: int | None = None


class SQLStore:
    """The SQL both backends run alike (see the module docstring)."""

    #: The DB-API placeholder of the backend's driver.
    _PARAM = "?"

    def _q(self, sql: str) -> str:
        """``sql`` (written with ``?``) in the backend's placeholder style."""
        return sql if self._PARAM == "?" else sql.replace("?", self._PARAM)

    def _read(self, sql: str, params: Any = ()) -> list[tuple]:  # pragma: no cover - each backend's own
        raise NotImplementedError

    def _tx(self) -> Any:  # pragma: no cover - each backend's own
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - each backend's own
        raise NotImplementedError

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ runs

    def end_run(
        self, run_id: str, *, dropped: int = 0, undelivered: int = 0, faults: Mapping[str, Any] | None = None
    ) -> None:
        """Mark a run finished (sets ``ended_at``) with the events it lost on the way to the store and,
        when given, its failed store writes (``faults``, see :class:`~triage_plugins.store.rows.RunRow`)."""
        counts = []
        for name, value in (("dropped", dropped), ("undelivered", undelivered)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise StoreError(f"{name} must be a whole number >= 0, got {value!r}")
            counts.append(value)
        sql, params = "UPDATE runs SET ended_at = ?, dropped = ?, undelivered = ?", [time.time(), *counts]
        if faults is not None:
            sql += ", store_faults = ?"
            params.append(_dumps(dict(faults), "store faults", allow_nan=False))
        with self._tx() as conn:
            cur = conn.execute(self._q(sql + " WHERE id = ?"), (*params, run_id))
            if cur.rowcount == 0:
                raise StoreError(f"unknown run id {run_id!r}")

    def record_faults(self, run_id: str, faults: Mapping[str, Any]) -> None:
        """Set a run's failed store writes (``runs.store_faults``); an unknown run id is ignored."""
        text = _dumps(dict(faults), "store faults", allow_nan=False)
        with self._tx() as conn:
            conn.execute(self._q("UPDATE runs SET store_faults = ? WHERE id = ?"), (text, run_id))

    def ping(self) -> None:
        """Raise :class:`StoreError` when the store cannot be read now (a circuit breaker's probe)."""
        self._read("SELECT 1")

    def claim_replay(self, uid: str) -> bool:
        """Record that the spilled write ``uid`` is being replayed; ``False`` when it already was.

        Called inside the transaction that replays the write, so the mark and the write commit together.
        """
        with self._tx() as conn:
            cur = conn.execute(
                self._q("INSERT INTO replayed (uid, ts) VALUES (?, ?) ON CONFLICT (uid) DO NOTHING"),
                (_need_text(uid, "replay id"), time.time()),
            )
            return cur.rowcount == 1

    def runs(self, kind: str | None = None) -> list[RunRow]:
        """The runs, oldest first, optionally of one kind."""
        sql = "SELECT id, kind, config, started_at, ended_at, dropped, undelivered, store_faults FROM runs"
        params: tuple = ()
        if kind is not None:
            sql += " WHERE kind = ?"
            params = (kind,)
        rows = self._read(self._q(sql + " ORDER BY started_at, id"), params)
        return [
            RunRow(r[0], r[1], MappingProxyType(json.loads(r[2])), r[3], r[4], r[5], r[6], _faults(r[7]))
            for r in rows
        ]

    def delete_run(self, run_id: str) -> dict[str, int]:
        """Delete a run with its events and metric rows; returns how many rows each table lost."""
        return self._delete_runs([run_id])

    def prune(self, *, older_than: float | None = None, keep_runs: int | None = None) -> dict[str, int]:
        """Delete old runs with their events and metric rows; learned scores and parameters stay.

        :param older_than: delete runs that started more than this many seconds ago.
        :param keep_runs: keep only this many most recent runs.
        :return: rows deleted per table (graph snapshots no remaining event refers to included).
        """
        if older_than is None and keep_runs is None:
            raise StoreError("prune needs older_than or keep_runs (it never deletes everything by default)")
        if older_than is not None and (not isinstance(older_than, int | float) or not older_than >= 0):
            raise StoreError(f"older_than must be a number of seconds >= 0, got {older_than!r}")
        if keep_runs is not None and (
            isinstance(keep_runs, bool) or not isinstance(keep_runs, int) or keep_runs < 0
        ):
            raise StoreError(f"keep_runs must be a whole number >= 0, got {keep_runs!r}")
        runs = self.runs()  # oldest first
        doomed = set()
        if older_than is not None:
            cutoff = time.time() - older_than
            doomed |= {r.id for r in runs if r.started_at < cutoff}
        if keep_runs is not None:
            doomed |= {r.id for r in runs[: max(0, len(runs) - keep_runs)]}
        return self._delete_runs(sorted(doomed))

    def _delete_runs(self, run_ids: list[str]) -> dict[str, int]:
        out = {"events": 0, "metrics": 0, "runs": 0, "blobs": 0, "parts": 0}
        with self._tx() as conn:
            self._lock_parts(conn)  # first: a writer of parts then never waits on rows this deletes
            for run_id in run_ids:
                out["events"] += conn.execute(
                    self._q("DELETE FROM events WHERE run_id = ?"), (run_id,)
                ).rowcount
                out["metrics"] += int(
                    conn.execute(
                        self._q(f"SELECT {_METRIC_COUNT} FROM metrics WHERE run_id = ?"), (run_id,)
                    ).fetchone()[0]
                )
                conn.execute(self._q("DELETE FROM metrics WHERE run_id = ?"), (run_id,))
                out["runs"] += conn.execute(self._q("DELETE FROM runs WHERE id = ?"), (run_id,)).rowcount
            out["blobs"] = conn.execute(
                "DELETE FROM blobs WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.blob = blobs.hash)"
            ).rowcount
            if out["events"]:
                out["parts"] = self._delete_unused_parts(conn)
        return out

    # ------------------------------------------------------------------ shared parts

    # Each store object remembers the part keys it wrote (committed), so a part retrieved again is
    # not sent again. Pruning bumps ``parts_pruned``; a writer reads it in its write transaction,
    # after the lock that orders it with pruning (:meth:`_lock_parts` / :meth:`_hold_parts`), and
    # forgets what it knew when it changed: no event can name a part pruned under it.
    _KNOWN_PARTS = 200_000  # keys remembered per store object (forgotten all at once past it)

    def _lock_parts(self, conn: Any) -> None:
        """Hold off writers of ``parts`` until the caller's transaction ends (SQLite: its write lock)."""

    def _hold_parts(self, conn: Any) -> None:
        """Order this write transaction with pruning (SQLite: its write lock already does)."""

    def _nested(self) -> bool:  # pragma: no cover - each backend's own
        """Whether a write now runs inside an open transaction of this thread (it may yet roll back)."""
        raise NotImplementedError

    def _unknown_parts(self, conn: Any, parts: dict[str, str], written: Written) -> list[tuple[str, str]]:
        """The parts this store object does not know to be stored (inside the write transaction),
        sorted by key (concurrent writers of PostgreSQL then take their key locks in one order);
        their keys go into ``written`` with the prune count they were written under."""
        self._hold_parts(conn)
        row = conn.execute("SELECT n FROM parts_pruned").fetchone()
        pruned = None if row is None else row[0]  # no row (edited by hand): nothing is taken as known
        known: set[str] | None = getattr(self, "_known", None)
        if known is None or pruned is None or pruned != self._known_pruned or len(known) > self._KNOWN_PARTS:
            known = self._known = set()
            self._known_pruned = pruned
        out = sorted((key, parts[key]) for key in parts.keys() - known)
        written.keys.extend(key for key, _ in out)
        written.pruned = pruned
        if sum(len(text) for _, text in out) > _LOOK_FIRST:  # a graph's chunks: most are stored
            out = self._not_stored(conn, out)
        return out

    def _not_stored(self, conn: Any, parts: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The parts whose keys the ``parts`` table does not hold (looked up ``PAGE`` keys at a time),
        so chunks already stored are not sent to the store again."""
        stored: set[str] = set()
        sql = "SELECT hash FROM parts WHERE hash IN ({})"
        for start in range(0, len(parts), PAGE):
            keys = [key for key, _ in parts[start : start + PAGE]]
            stored.update(
                key for (key,) in conn.execute(self._q(sql.format(", ".join("?" * len(keys)))), keys)
            )
        return [part for part in parts if part[0] not in stored]

    @contextmanager
    def _writing_parts(self) -> Iterator[tuple[Any, Written]]:
        """A write transaction (:meth:`_tx`) and the record of the parts it stores; their keys are
        remembered once it has committed: at once at the top level, inside :meth:`transaction` when
        that commits (a nested write may yet roll back with it)."""
        written = Written()
        nested = self._nested()
        with self._tx() as conn:
            yield conn, written
        if nested:
            self._parts_pending().append(written)
        else:
            self._parts_committed(written)

    def _parts_pending(self) -> list[Written]:
        """This thread's part writes inside an open :meth:`transaction`, remembered when it commits."""
        return self._local.__dict__.setdefault("parts_pending", [])

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """Group writes atomically on this thread (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: ``BEGIN``)
        … ``COMMIT``, ``ROLLBACK`` on an exception; yields the store.

        Nested uses (and the writes of the public methods inside) become savepoints of the outer
        transaction: an inner failure that is caught undoes only the inner writes.
        """
        outer = not self._nested()
        pending = self._parts_pending()
        if outer:
            pending.clear()  # left by a transaction opened otherwise: forgotten (the parts are re-sent)
        mark = len(pending)
        grouped = getattr(self._local, "grouped", None)
        plain = grouped is not None and grouped[1]
        if plain:
            grouped[1] = False  # an explicit transaction inside a group: real savepoints within
        try:
            with self._tx():
                yield self
        except BaseException:
            del pending[mark:]  # rolled back: these parts are not stored
            raise
        finally:
            if plain:
                grouped[1] = True
        if outer:
            done, pending[:] = pending[:], []
            for written in done:
                self._parts_committed(written)

    #: Whether a worker's delivery batch commits its writes as one transaction (:meth:`grouped`,
    #: :meth:`GuardedStore.group <triage_plugins.store.guard.GuardedStore.group>`): a backend whose
    #: commit is what limits writers turns it on (PostgreSQL's flush to disk on every commit).
    group_commits: bool = False

    @contextmanager
    def grouped(self) -> Iterator[Self]:
        """One :meth:`transaction` holding the writes of a delivery batch (several queries): one
        commit for all of them. The public writes inside are plain statements of it, not savepoints
        (a round trip each saved): one that fails dooms the whole transaction, which the caller
        (:meth:`GuardedStore.group <triage_plugins.store.guard.GuardedStore.group>`) rolls back and
        writes again one by one; a nested :meth:`transaction` is still a savepoint. Writers of shared
        rows (scores, parameters) are ordered across processes by the backend
        (:meth:`_order_shared_rows`), so batches that update the same rows in different orders never
        deadlock."""
        if self._nested():
            raise StoreError("grouped() opens a transaction of its own; it cannot be nested")
        # [this transaction holds the shared-rows lock, writes inside are plain statements]
        self._local.grouped = grouped = [False, False]
        try:
            with self.transaction():
                grouped[1] = True
                yield self
        finally:
            self._local.grouped = None

    @contextmanager
    def _shared_rows(self) -> Iterator[Any]:
        """A write transaction (:meth:`_tx`) of scores or parameter rows, ordered with grouped
        batches by :meth:`_order_shared_rows`."""
        grouped = getattr(self._local, "grouped", None)
        if grouped is not None and not grouped[0]:
            self._order_shared_rows(grouped=True)
            grouped[0] = True
        with self._tx() as conn:
            if grouped is None and self.group_commits:
                self._order_shared_rows(conn)
            yield conn

    def _order_shared_rows(self, conn: Any = None, *, grouped: bool = False) -> None:
        """Order writers of shared rows (SQLite: nothing to do, its write lock orders every writer)."""

    def _parts_committed(self, written: Written) -> None:
        """Remember the part keys of a committed transaction, unless a prune came in between."""
        known = getattr(self, "_known", None)
        if known is not None and written.pruned is not None and written.pruned == self._known_pruned:
            known.update(written.keys)

    def _delete_unused_parts(self, conn: Any) -> int:
        """Delete the shared parts no stored event names (a scan of the retrieval events and the
        graph snapshots; the caller holds :meth:`_lock_parts`)."""
        used: set[str] = set()
        for (text,) in conn.execute("SELECT json FROM events WHERE kind = 'retrieval'"):
            used.update(part_keys(text))
        for (text,) in conn.execute("SELECT json FROM blobs"):  # graph snapshots' chunks
            used.update(part_keys(text))
        doomed = [key for (key,) in conn.execute("SELECT hash FROM parts") if key not in used]
        sql = "DELETE FROM parts WHERE hash IN ({})"
        for start in range(0, len(doomed), PAGE):
            keys = doomed[start : start + PAGE]
            conn.execute(self._q(sql.format(", ".join("?" * len(keys)))), keys)
        if doomed:
            conn.execute("UPDATE parts_pruned SET n = n + 1")
        return len(doomed)

    # ------------------------------------------------------------------ rows written alike

    @staticmethod
    def _event_row(event: Event, run_id: str | None, ts: float, parts: dict[str, str]) -> tuple:
        """``(run_id, kind, framework, query_id, ts, json, blob, blob text)`` of one event; its
        parts are added to ``parts`` (one dict for the events written together).

        A graph event's text goes to ``blobs`` once per distinct graph, as content-defined chunks
        kept once in ``parts`` (:meth:`_new_blobs`: a snapshot stores what changed since the previous
        one, :mod:`~triage_plugins.store.chunks`); a retrieval event is stored
        as a skeleton naming its triples and chunks, each kept once in ``parts``
        (:func:`~triage_plugins.contract.events.split_json`): queries over one graph retrieve the
        same ones again and again, so their text is written once, not once per query.
        """
        if not isinstance(event, Event):
            raise StoreError(f"record_event expects a triage event, got {type(event).__name__}")
        try:
            text, _ = split_json(event, parts)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{type(event).__name__} cannot be serialized: {exc}") from None
        blob = None
        if event.kind in DEDUPLICATED_KINDS:
            blob = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return (
            run_id,
            event.kind,
            getattr(event, "framework", None),
            getattr(event, "query_id", None),
            ts,
            "" if blob else text,
            blob,
            text,
        )

    @staticmethod
    def _blobs(rows: list[tuple]) -> list[tuple[str, str]]:
        """The distinct blobs of event rows, sorted by key."""
        return sorted({row[6]: row[7] for row in rows if row[6] is not None}.items())

    def _new_blobs(self, conn: Any, rows: list[tuple], parts: dict[str, str]) -> list[tuple[str, str]]:
        """The rows' distinct blobs not stored yet, each as the skeleton of its chunks
        (:func:`~triage_plugins.store.chunks.split_text`, a short one whole); their chunks are added
        to ``parts``, so a graph snapshot stores only the chunks the previous one did not have."""
        blobs = self._blobs(rows)
        if not blobs:
            return []
        keys = [key for key, _ in blobs]
        sql = self._q(f"SELECT hash FROM blobs WHERE hash IN ({', '.join('?' * len(keys))})")
        stored = {key for (key,) in conn.execute(sql, keys).fetchall()}
        out = []
        for key, text in blobs:
            if key not in stored:
                skeleton, chunks = split_text(text)
                parts.update(chunks)
                out.append((key, skeleton))
        return out

    @staticmethod
    def _metric_key(row: MetricRow, run_id: str | None, now: float) -> tuple:
        """(run id, scope, scope id, framework, retriever, time) of a row as it is stored."""
        if not isinstance(row, MetricRow):
            raise StoreError(f"record_metrics expects MetricRow items, got {type(row).__name__}")
        return (
            row.run_id if row.run_id is not None else run_id,
            row.scope,
            row.scope_id,
            row.framework,
            row.retriever,
            now if row.ts is None else _finite(row.ts, "MetricRow.ts"),
        )

    @classmethod
    def _metric_row(cls, row: MetricRow, run_id: str | None, now: float) -> tuple:
        return cls._keyed_row(row, cls._metric_key(row, run_id, now))

    @staticmethod
    def _keyed_row(row: MetricRow, key: tuple) -> tuple:
        """The table row of one metric row whose :meth:`_metric_key` is ``key``."""
        run, scope, scope_id, framework, retriever, ts = key
        details = _dumps(dict(row.details), f"details of metric {row.name!r}", allow_nan=True)
        return (
            run,
            scope,
            scope_id,
            row.name,
            row.value,
            row.reason,
            row.n,
            framework,
            retriever,
            details,
            ts,
        )

    @classmethod
    def _metric_values(cls, rows: list[MetricRow], run_id: str | None, now: float) -> list[tuple]:
        """The table rows of ``rows``, in order; consecutive rows with the same key (:meth:`_metric_key`)
        are packed into one: name :data:`PACKED`, ``reason`` their names, ``n`` their count, ``details``
        the JSON list of their ``[name, value, reason, n, details]``. A row alone is stored as it is.

        The usage metrics write about 12 rows per query, each row an insert into the table and two
        indexes; one packed row costs about a fifth of that (``benchmarks/RESULTS.md``).
        """
        keys = [cls._metric_key(row, run_id, now) for row in rows]
        out: list[tuple] = []
        start = 0
        for i in range(1, len(rows) + 1):
            if i < len(rows) and keys[i] == keys[start]:
                continue
            if i - start == 1:
                out.append(cls._keyed_row(rows[start], keys[start]))
            else:
                out.append(cls._packed_row(rows[start:i], keys[start]))
            start = i
        return out

    @classmethod
    def _packed_row(cls, rows: list[MetricRow], key: tuple) -> tuple:
        run, scope, scope_id, framework, retriever, ts = key
        packed = [[r.name, r.value, r.reason, r.n, dict(r.details)] for r in rows]
        try:
            details = _dumps(packed, "packed metric rows", allow_nan=True)
        except StoreError:
            for row in rows:  # name the metric whose details cannot be stored
                cls._keyed_row(row, key)
            raise
        names = ",".join(r.name for r in rows)
        return (run, scope, scope_id, PACKED, None, names, len(rows), framework, retriever, details, ts)

    @staticmethod
    def _unpacked(r: tuple, name: str | None) -> list[MetricRow]:
        """The metric rows of a packed table row ``r`` (as :meth:`metrics` selects it), those named
        ``name`` only when given."""
        try:
            return [
                MetricRow(r[0], r[1], m, value, reason, r[5], r[6], r[7], details, n, r[10])
                for m, value, reason, n, details in json.loads(r[8])
                if name is None or m == name
            ]
        except (ValueError, TypeError) as exc:
            raise StoreError(f"the packed metric row of {r[0]} {r[1]!r} is damaged: {exc}") from None

    # ------------------------------------------------------------------ metrics

    def metrics(
        self,
        scope: str | None = None,
        name: str | None = None,
        run_id: str | None = None,
        *,
        scope_id: str | None = None,
        framework: str | None = None,
        retriever: str | None = None,
        last: int | None = None,
    ) -> list[MetricRow]:
        """The stored metric rows in recording order; filters combine with AND.

        :param last: read only the most recent ``last`` stored rows that match (a packed row, one
            query's metrics as the usage plugin writes them, counts once): a bounded read.
        """
        if scope is not None and scope not in SCOPES:
            raise StoreError(f"unknown metric scope {scope!r}; expected one of {SCOPES}")
        if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 0):
            raise StoreError(f"last must be a whole number >= 0, got {last!r}")
        where: list[str] = []
        params: list[Any] = []
        # with ``last``, no index on the filter columns: a backward scan of the primary key stops
        # after ``last`` matches, where an index would have every match read and sorted first
        unindexed = "" if last is None else " || ''"
        for column, value in (
            ("scope", scope), ("name", name), ("run_id", run_id), ("scope_id", scope_id),
            ("framework", framework), ("retriever", retriever),
        ):  # fmt: skip
            if value is not None:
                where.append(
                    f"name{unindexed} IN (?, '{PACKED}')" if column == "name" else f"{column}{unindexed} = ?"
                )
                params.append(value)
        sql = "SELECT scope, scope_id, name, value, reason, run_id, framework, retriever, details, n, ts FROM metrics"
        if where:
            sql += " WHERE " + " AND ".join(where)
        if last is None:
            rows = self._read(self._q(sql + " ORDER BY id"), params)
        else:
            rows = self._read(self._q(sql + " ORDER BY id DESC LIMIT ?"), [*params, last])[::-1]
        out: list[MetricRow] = []
        for r in rows:
            if r[2] == PACKED:
                out.extend(self._unpacked(r, name))
            else:
                try:
                    details = json.loads(r[8])
                except (ValueError, TypeError):
                    raise StoreError(
                        f"the metric row {r[2]!r} of {r[0]} {r[1]!r} is damaged: its details are not JSON"
                    ) from None
                out.append(MetricRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], details, r[9], r[10]))
        return out

    # ------------------------------------------------------------------ events

    def events(
        self,
        kind: str | type[Event] | None = None,
        run_id: str | None = None,
        *,
        framework: str | None = None,
        query_id: str | None = None,
    ) -> Iterator[Event]:
        """The stored events in recording order, rebuilt with :func:`triage_plugins.contract.events.from_json`.

        Filters combine with AND. Rows are read in pages, so iterating a large store is cheap.
        """
        if isinstance(kind, type):
            kind = getattr(kind, "kind", None)
        if kind is not None and kind not in EVENT_TYPES:
            raise StoreError(f"unknown event kind {kind!r}; expected one of {sorted(EVENT_TYPES)}")
        where: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("kind", kind),
            ("run_id", run_id),
            ("framework", framework),
            ("query_id", query_id),
        ):
            if value is not None:
                where.append(f"e.{column} = ?")
                params.append(value)
        return self._iter_events(" AND ".join(["e.id > ?", *where]), params)

    def _iter_events(self, where: str, params: list[Any]) -> Iterator[Event]:
        last = 0
        sql = self._q(f"{_EVENT_SQL}{where} ORDER BY e.id LIMIT {PAGE}")
        parts: dict[str, str] = {}
        while True:
            rows = self._read(sql, [last, *params])
            self._fetch_parts(rows, parts)
            for row_id, text in rows:
                yield self._rebuild(row_id, text, parts)
            if len(rows) < PAGE:
                return
            last = rows[-1][0]

    def _fetch_parts(self, rows: list[tuple], parts: dict[str, str]) -> None:
        """Add to ``parts`` those the rows' skeletons name (one query per ``PAGE`` keys)."""
        need = {key for _, text in rows for key in part_keys(text)}
        if len(parts) + len(need) > _PART_CACHE:
            parts.clear()
        missing = sorted(need.difference(parts))
        sql = "SELECT hash, json FROM parts WHERE hash IN ({})"
        for start in range(0, len(missing), PAGE):
            keys = missing[start : start + PAGE]
            parts.update(self._read(self._q(sql.format(", ".join("?" * len(keys)))), keys))

    def last_event(self, kind: str, *, framework: str | None, query_id: str) -> Event | None:
        """The most recently recorded event of ``kind`` for one query (one indexed lookup), or ``None``."""
        sql = f"{_EVENT_SQL}e.query_id = ? AND e.kind = ?"
        params: list[Any] = [query_id, kind]
        if framework is not None:
            sql += " AND e.framework = ?"
            params.append(framework)
        rows = self._read(self._q(sql + " ORDER BY e.id DESC LIMIT 1"), params)
        if not rows:
            return None
        parts: dict[str, str] = {}
        self._fetch_parts(rows, parts)
        return self._rebuild(*rows[0], parts)

    @staticmethod
    def _rebuild(row_id: int, text: str, parts: Mapping[str, str]) -> Event:
        try:
            return from_json(join_json(text, parts))
        except KeyError as exc:
            raise StoreError(
                f"stored event {row_id} names part {exc.args[0]!r}, which is not stored"
            ) from None
        except EventError as exc:
            raise StoreError(f"stored event {row_id} cannot be rebuilt: {exc}") from None

    # ------------------------------------------------------------------ scores, params, counts

    def add_score(self, unit: str, id: str, delta: float, *, init: float = 100.0) -> float:
        """Atomically add ``delta`` to a raw contribution score (a new id starts at ``init``); returns
        the new raw (one upsert statement of the backend's :meth:`add_scores`: no update is lost)."""
        return self.add_scores(unit, {id: delta}, init=init)[id]

    def add_scores(self, unit: str, deltas: Mapping[str, float], *, init: float = 100.0) -> dict[str, float]:
        raise NotImplementedError  # pragma: no cover - each backend's own

    @staticmethod
    def _checked_deltas(
        unit: str, deltas: Mapping[str, float], init: float
    ) -> tuple[float, list[tuple[str, float]]]:
        """``(init, [(id, delta), ...])`` of an :meth:`add_scores` call, each checked (text ids, finite numbers)."""
        _need_text(unit, "score unit")
        init = _finite(init, "init")
        checked: list[tuple[str, float]] = []
        for item_id, delta in deltas.items():
            _need_text(item_id, f"{unit} id")
            checked.append((item_id, _finite(delta, f"score delta of {unit} {item_id!r}")))
        return init, checked

    @staticmethod
    def _checked_step(
        name: str, delta: float, initial: float, bounds: tuple[float, float] | None
    ) -> tuple[float, float, float, float]:
        """``(delta, initial, low, high)`` of an ``add_param`` call, each checked (finite, low <= high)."""
        _need_text(name, "parameter name")
        delta = _finite(delta, f"step of parameter {name!r}")
        initial = _finite(initial, f"initial value of parameter {name!r}")
        lo, hi = -math.inf, math.inf
        if bounds is not None:
            lo, hi = (_finite(b, f"bounds of parameter {name!r}") for b in bounds)
            if lo > hi:
                raise StoreError(
                    f"bounds of parameter {name!r} must be (low, high) with low <= high, got {bounds!r}"
                )
        return delta, initial, lo, hi

    def scores_changed_at(self, unit: str) -> float | None:
        """When a score of ``unit`` last changed (``max(updated_at)``, one index lookup); ``None`` if none."""
        rows = self._read(self._q("SELECT max(updated_at) FROM scores WHERE unit = ?"), (unit,))
        return None if rows[0][0] is None else float(rows[0][0])

    def scores_changed_since(
        self, unit: str, since: float, *, limit: int = 10_000
    ) -> dict[str, ScoreRow] | None:
        """The scores of ``unit`` whose ``updated_at`` is ``since`` or later (one index range scan of
        ``scores_by_update``); ``None`` when more than ``limit`` are (read them all again instead)."""
        rows = self._read(
            self._q(
                "SELECT id, raw, n_updates, updated_at FROM scores WHERE unit = ? AND updated_at >= ? LIMIT ?"
            ),
            (unit, float(since), int(limit) + 1),
        )
        if len(rows) > limit:
            return None
        return {r[0]: ScoreRow(float(r[1]), int(r[2]), float(r[3])) for r in rows}

    def get_param(self, name: str, default: Any = None) -> Any:
        """A stored parameter's JSON value, or ``default`` when it was never set."""
        rows = self._read(self._q("SELECT value FROM params WHERE name = ?"), (name,))
        return json.loads(rows[0][0]) if rows else default

    def counts(self) -> dict[str, int]:
        """Rows per table: runs, events, metrics (one per metric, packed or not), scores, params, blobs, parts."""
        return {
            table: int(
                self._read(f"SELECT {_METRIC_COUNT if table == 'metrics' else 'COUNT(*)'} FROM {table}")[0][0]
            )
            for table in TABLES
        }


def _faults(text: str | None) -> Mapping[str, Any]:
    """A run's ``store_faults`` column read back; a malformed value reads as none (it is only a report)."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return MappingProxyType({})
    return MappingProxyType(value if isinstance(value, dict) else {})
