"""The PostgreSQL backend of the store (DESIGN §7): one database shared by many workers and hosts.

:func:`triage_plugins.store.open_store` picks this backend for ``postgresql://`` and ``postgres://``
URLs (libpq's syntax: ``postgresql://user[:password]@host[:port]/db[?options]``; passwords are
better kept in ``PGPASSWORD`` or ``~/.pgpass``). :class:`PostgresStore` implements the
:class:`~triage_plugins.store.Store` protocol with the same behaviour as
:class:`~triage_plugins.store.sqlite.SQLiteStore`, table for table (see that module), in the
connection's current schema (``search_path``; ``public`` by default):

- a ``triage_store`` marker table holds the application name and the schema version; a database
  whose schema has tables but no marker is refused, never migrated;
- migrations (:data:`MIGRATIONS`) are numbered like SQLite's and applied under a transaction-level
  advisory lock, so workers starting together migrate once; a newer schema is refused;
- score increments and parameter steps (:meth:`PostgresStore.add_param`) are single
  ``INSERT … ON CONFLICT DO UPDATE`` statements computed by the server: concurrent workers lose none;
- connections come from a :mod:`psycopg_pool` pool (created again in a forked child; the parent's
  connections are left alone). Every public write is one transaction; :meth:`PostgresStore.transaction`
  groups several on the calling thread (nested uses become savepoints).

psycopg is imported when a PostgreSQL store is opened, never before: install it with
``pip install "triage-plugins[postgres]"``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from triage_plugins.contract.errors import StoreError
from triage_plugins.contract.events import Event
from triage_plugins.store.rows import (
    MetricRow,
    ScoreRow,
    _dumps,
    _finite,
    _need_text,
)
from triage_plugins.store.sql import PAGE, SQLStore, Written

__all__ = ["APPLICATION", "MIGRATIONS", "SCHEMA_VERSION", "PostgresStore"]

log = logging.getLogger("triage.store")

APPLICATION = "triage-plugins"
MARKER = "triage_store"
_LOCK_KEY = 0x54524947  # advisory lock held while migrating ("TRIG", as SQLite's application_id)
_SHARED_ROWS_KEY = 0x54524948  # advisory lock ordering writers of scores and params (grouped batches)
_PAGE = PAGE
CONNECT_TIMEOUT_SECONDS = 10.0

#: Ordered migrations; migration ``i`` (1-based) brings a database to schema version ``i``. They
#: mirror :data:`triage_plugins.store.sqlite.MIGRATIONS` (same tables, same version numbers).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: the marker, runs, events, metric rows, contribution scores
        f"CREATE TABLE {MARKER} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"INSERT INTO {MARKER} (key, value) VALUES ('application', '{APPLICATION}'), ('schema_version', '0')",
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            config TEXT NOT NULL DEFAULT '{}',
            started_at DOUBLE PRECISION NOT NULL,
            ended_at DOUBLE PRECISION
        )""",
        """CREATE TABLE events (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id TEXT REFERENCES runs(id),
            kind TEXT NOT NULL,
            framework TEXT,
            query_id TEXT,
            ts DOUBLE PRECISION NOT NULL,
            json TEXT NOT NULL
        )""",
        """CREATE TABLE metrics (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id TEXT REFERENCES runs(id),
            scope TEXT NOT NULL CHECK (scope IN ('chunk', 'graph', 'query')),
            scope_id TEXT NOT NULL,
            name TEXT NOT NULL,
            value DOUBLE PRECISION,
            reason TEXT,
            n INTEGER,
            framework TEXT,
            retriever TEXT,
            details TEXT NOT NULL DEFAULT '{}',
            ts DOUBLE PRECISION NOT NULL,
            CHECK (value IS NOT NULL OR reason IS NOT NULL)
        )""",
        """CREATE TABLE scores (
            unit TEXT NOT NULL,
            id TEXT NOT NULL,
            raw DOUBLE PRECISION NOT NULL,
            n_updates INTEGER NOT NULL DEFAULT 0,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (unit, id)
        )""",
    ),
    (  # 2: learned parameters and lookup indexes
        """CREATE TABLE params (
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX events_by_run_kind ON events (run_id, kind)",
        "CREATE INDEX events_by_kind ON events (kind)",
        "CREATE INDEX events_by_query ON events (query_id)",
        "CREATE INDEX metrics_by_run ON metrics (run_id)",
        "CREATE INDEX metrics_by_scope_name ON metrics (scope, name)",
    ),
    (  # 3: delivery counts per run; graph snapshots stored once per distinct graph
        "ALTER TABLE runs ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN undelivered INTEGER NOT NULL DEFAULT 0",
        "CREATE TABLE blobs (hash TEXT PRIMARY KEY, json TEXT NOT NULL)",
        "ALTER TABLE events ADD COLUMN blob TEXT REFERENCES blobs(hash)",
    ),
    (  # 4: the newest score change per unit is one index lookup (bounded-staleness checks)
        "CREATE INDEX scores_by_update ON scores (unit, updated_at)",
    ),
    (  # 5: retrieval events as skeletons; each retrieved triple and chunk stored once (sql.py)
        "CREATE TABLE parts (hash TEXT PRIMARY KEY, json TEXT NOT NULL)",
        "CREATE TABLE parts_pruned (n INTEGER NOT NULL)",  # bumped when prune deletes parts
        "INSERT INTO parts_pruned (n) VALUES (0)",
    ),
    # 6: metric rows of one scope id written together may be one packed row (name '*', sql.py); no
    # DDL: the version keeps triage versions that would misread such rows out of the file
    (),
    (  # 7: failed store writes per run, by cause (store/guard.py); spilled writes replayed once each
        "ALTER TABLE runs ADD COLUMN store_faults TEXT NOT NULL DEFAULT '{}'",
        "CREATE TABLE replayed (uid TEXT PRIMARY KEY, ts DOUBLE PRECISION NOT NULL)",
    ),
    # 8: graph snapshots stored as content-defined chunks in parts (store/chunks.py); no DDL: the
    # version keeps triage versions whose prune would delete those chunks out of the database
    (),
)
SCHEMA_VERSION = len(MIGRATIONS)


def _psycopg() -> tuple[Any, Any]:
    """``(psycopg, psycopg_pool)``, imported now; a clear error when they are not installed."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise StoreError(
            f"PostgreSQL stores need psycopg 3 and psycopg-pool ({exc.name} is not installed): "
            'pip install "triage-plugins[postgres]"'
        ) from None
    return psycopg, psycopg_pool


def redact(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``, for messages and :attr:`PostgresStore.url`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _scrub(message: str, url: str) -> str:
    """A driver message without the URL's password, on one line."""
    password = urlsplit(url).password
    text = " ".join(str(message).split())
    return text.replace(password, "***") if password else text


_FK_DETAIL = re.compile(r"Key \(run_id\)=\((?P<id>.*)\) is not present")


class PostgresStore(SQLStore):
    """A PostgreSQL trace + score store (module docstring; tables as in :mod:`~triage_plugins.store.sqlite`).

    :param url: a ``postgresql://`` or ``postgres://`` URL.
    :param readonly: read an existing store: nothing is created or migrated, sessions are read-only.
    :param pool_size: most connections this process opens (default ``TRIAGE_STORE_POOL`` or 4).
    :raises StoreError: psycopg is missing; the server cannot be reached (the message names the
        host, never the password); the schema holds tables of another application; it was written
        by a newer triage-plugins; or, read-only, it is not a current triage store.
    """

    _PARAM = "%s"  # psycopg's placeholder (the shared SQL is written with ?)

    def __init__(self, url: str, *, readonly: bool = False, pool_size: int | None = None) -> None:
        self._psycopg, self._pool_module = _psycopg()
        if not isinstance(url, str) or urlsplit(url.strip()).scheme.lower().partition("+")[0] not in (
            "postgresql",
            "postgres",
        ):
            raise StoreError(f"a PostgreSQL store is opened by a postgresql:// URL, got {redact(str(url))!r}")
        scheme, _, rest = url.strip().partition("://")
        self._conninfo = f"{scheme.partition('+')[0]}://{rest}"  # SQLAlchemy's postgresql+psycopg:// too
        self.readonly = readonly
        self._pool_size = pool_size or int(os.environ.get("TRIAGE_STORE_POOL", "4") or 4)
        self._closed = False
        self._local = threading.local()
        self._pool_lock = threading.Lock()
        self._pid = os.getpid()
        self._pool = self._open_pool()
        try:
            self._prepare()
        except BaseException:
            self._pool.close()
            raise
        log.debug("opened store %s (schema %d)", self.url, SCHEMA_VERSION)

    @classmethod
    def open(cls, url: str | PostgresStore, *, readonly: bool = False) -> PostgresStore:
        """Open (creating and migrating as needed) the store at ``url``; a store is returned as is."""
        return url if isinstance(url, PostgresStore) else cls(url, readonly=readonly)

    # ------------------------------------------------------------------ identity

    @property
    def url(self) -> str:
        """The URL the store was opened with, password replaced by ``***``."""
        return redact(self._conninfo)

    @property
    def path(self) -> Path | None:
        """Always ``None``: the store lives on a server."""
        return None

    @property
    def schema_version(self) -> int:
        """The schema version recorded in the marker table."""
        return self._version()

    def __repr__(self) -> str:
        return f"<PostgresStore {self.url} {'closed' if self._closed else 'open'}>"

    def __enter__(self) -> PostgresStore:
        return self

    # ------------------------------------------------------------------ connections

    def _open_pool(self) -> Any:
        options = {"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT_SECONDS)}
        if self.readonly:
            options["options"] = "-c default_transaction_read_only=on"
        pool = self._pool_module.ConnectionPool(
            self._conninfo, min_size=1, max_size=max(1, self._pool_size), kwargs=options,
            open=False, name="triage-store", timeout=CONNECT_TIMEOUT_SECONDS,
        )  # fmt: skip
        logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)  # failures are raised as StoreError
        try:
            pool.open(wait=True, timeout=CONNECT_TIMEOUT_SECONDS)
        except Exception:  # noqa: BLE001 - reported below, with the driver's own reason
            pool.close()
            raise StoreError(f"cannot connect to PostgreSQL store {self.url}: {self._probe()}") from None
        return pool

    def _probe(self) -> str:
        """Why a connection fails (one direct attempt, so the message carries the server's reason)."""
        try:
            self._psycopg.connect(self._conninfo, connect_timeout=int(CONNECT_TIMEOUT_SECONDS)).close()
        except Exception as exc:  # noqa: BLE001
            return _scrub(str(exc), self._conninfo) or type(exc).__name__
        return f"no connection within {CONNECT_TIMEOUT_SECONDS:.0f} s"

    def ping(self) -> None:
        """Raise :class:`StoreError` when the server cannot be reached now: one direct connection
        (refused at once while the server is down, where the pool would wait for one), then the pool,
        opened afresh when its connections did not survive the outage."""
        try:
            self._psycopg.connect(self._conninfo, connect_timeout=2).close()
        except Exception as exc:  # noqa: BLE001 - reported as the store's own error
            raise StoreError(f"PostgreSQL store {self.url}: {_scrub(str(exc), self._conninfo)}") from exc
        try:
            with self._pool_now().connection(timeout=2.0) as conn:
                conn.execute("SELECT 1")
        except Exception:  # noqa: BLE001 - the server answers: renew the pool
            with self._pool_lock:
                old, self._pool = self._pool, self._open_pool()
            old.close(timeout=0)

    def _pool_now(self) -> Any:
        if self._closed:
            raise StoreError(f"store {self.url} is closed")
        if os.getpid() != self._pid:
            with self._pool_lock:
                if os.getpid() != self._pid:  # forked: the parent's connections are never touched
                    self._pid = os.getpid()
                    self._local = threading.local()
                    self._pool = self._open_pool()
        return self._pool

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        """This thread's transaction connection if one is open, else a pooled one."""
        active = getattr(self._local, "conn", None)
        if active is not None:
            yield active
            return
        try:
            with self._pool_now().connection() as conn:
                yield conn
        except self._pool_module.PoolTimeout:
            raise StoreError(f"no connection to {self.url} within {CONNECT_TIMEOUT_SECONDS:.0f} s") from None
        except self._psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL store {self.url}: {_scrub(str(exc), self._conninfo)}") from None

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        """A transaction on this thread's connection (a savepoint when one is already open; inside a
        grouped batch, the open transaction itself: sql.py's ``grouped``)."""
        with self._conn() as conn:
            outer = getattr(self._local, "conn", None) is None
            if outer:
                self._local.conn = conn
            grouped = None if outer else getattr(self._local, "grouped", None)
            try:
                if grouped is not None and grouped[1]:
                    yield conn
                    return
                with conn.transaction():
                    yield conn
            except self._psycopg.Error as exc:
                raise self._error(exc) from exc
            finally:
                if outer:
                    self._local.conn = None

    def _error(self, exc: Exception) -> StoreError:
        errors = self._psycopg.errors
        if isinstance(exc, errors.ForeignKeyViolation) and "run_id" in str(exc):
            match = _FK_DETAIL.search(getattr(exc.diag, "message_detail", "") or "")
            run_id = match.group("id") if match else None
            return StoreError(f"unknown run id {run_id!r}: get run ids from start_run() of this store")
        if isinstance(exc, errors.ReadOnlySqlTransaction):
            return StoreError(f"store {self.url} is open read-only")
        return StoreError(
            f"write to {self.url} failed and was rolled back: {_scrub(str(exc), self._conninfo)}"
        )

    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        with self._conn() as conn:
            try:
                return conn.execute(sql, tuple(params)).fetchall()
            except self._psycopg.Error as exc:
                raise StoreError(f"reading {self.url} failed: {_scrub(str(exc), self._conninfo)}") from None

    def _write(self, conn: Any, sql: str, params: Any = (), *, many: bool = False) -> Any:
        lock = getattr(self._local, "lock_first", None)
        if lock is not None:  # the shared-rows lock, then this write: one round trip (_order_shared_rows)
            self._local.lock_first = None
            with conn.pipeline():
                conn.execute(lock, (_SHARED_ROWS_KEY,))
                return self._write(conn, sql, params, many=many)
        try:
            if many:
                cur = conn.cursor()
                cur.executemany(sql, params)
                return cur
            return conn.execute(sql, params)
        except UnicodeEncodeError as exc:
            raise StoreError(f"text cannot be stored as UTF-8 (lone surrogate?): {exc}") from None

    def close(self) -> None:
        """Close this process's pool (idempotent); later calls raise :class:`StoreError`."""
        with self._pool_lock:
            if self._closed:
                return
            self._closed = True
        if os.getpid() == self._pid:
            self._pool.close()

    # ------------------------------------------------------------------ schema

    def _identity(self, conn: Any) -> tuple[str | None, int, bool]:
        """``(application, schema version, the schema has any table)`` of the current schema."""
        has_marker, has_tables = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL, EXISTS (SELECT 1 FROM pg_tables "
            "WHERE schemaname = current_schema())",
            (MARKER,),
        ).fetchone()
        if not has_marker:
            return None, 0, bool(has_tables)
        rows = dict(conn.execute(f"SELECT key, value FROM {MARKER}").fetchall())
        return rows.get("application"), int(rows.get("schema_version", 0)), True

    def _version(self) -> int:
        with self._conn() as conn:
            try:
                return self._identity(conn)[1]
            except self._psycopg.Error as exc:
                raise StoreError(f"reading {self.url} failed: {_scrub(str(exc), self._conninfo)}") from None

    def _check(self, app: str | None, version: int, has_tables: bool) -> None:
        where = self.url
        if app is None and has_tables:
            raise StoreError(
                f"{where} is a PostgreSQL database but not a triage store (its schema has tables of its own "
                f"and no {MARKER} table); it is left untouched: use an empty database or another schema"
            )
        if app is not None and app != APPLICATION:
            raise StoreError(f"{where} holds a store of another application ({app!r})")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{where} has store schema version {version}, newer than the {SCHEMA_VERSION} this "
                "triage-plugins understands; upgrade triage-plugins to open it"
            )
        if self.readonly and version < SCHEMA_VERSION:
            raise StoreError(
                f"{where} has store schema {version}{' (no triage store yet)' if version == 0 else ''}; run "
                f"`triage store migrate {where}` to bring it to schema {SCHEMA_VERSION}"
            )

    def _prepare(self) -> None:
        """Check the schema is ours and not newer; apply missing migrations under an advisory lock."""
        with self._conn() as conn:
            try:
                self._check(*self._identity(conn))
                if self.readonly:
                    return
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                    app, version, has_tables = self._identity(conn)  # another worker may have migrated
                    self._check(app, version, has_tables)
                    for number in range(version + 1, SCHEMA_VERSION + 1):
                        for statement in MIGRATIONS[number - 1]:
                            conn.execute(statement)
                        conn.execute(
                            f"UPDATE {MARKER} SET value = %s WHERE key = 'schema_version'", (str(number),)
                        )
                        log.info("store %s migrated to schema %d", self.url, number)
            except self._psycopg.Error as exc:
                raise StoreError(
                    f"preparing {self.url} failed: {_scrub(str(exc), self._conninfo)}; is it a triage store?"
                ) from None

    # ------------------------------------------------------------------ runs

    def start_run(self, kind: str, config: Mapping[str, Any] | None = None) -> str:
        """Record a new run and return its id (``<UTC time>-<random hex>``, sortable by start)."""
        _need_text(kind, "run kind")
        config_json = _dumps(dict(config or {}), f"config of run kind {kind!r}", allow_nan=False)
        now = time.time()
        run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(4)
        with self._tx() as conn:
            self._write(
                conn,
                "INSERT INTO runs (id, kind, config, started_at) VALUES (%s, %s, %s, %s)",
                (run_id, kind, config_json, now),
            )
        return run_id

    # ------------------------------------------------------------------ events

    _INSERT_EVENT = (
        "INSERT INTO events (run_id, kind, framework, query_id, ts, json, blob) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s)"
    )
    _INSERT_BLOB = "INSERT INTO blobs (hash, json) VALUES (%s, %s) ON CONFLICT (hash) DO NOTHING"
    _INSERT_PART = "INSERT INTO parts (hash, json) VALUES (%s, %s) ON CONFLICT (hash) DO NOTHING"

    def record_event(self, event: Event, run_id: str | None = None, *, ts: float | None = None) -> int:
        """Store one event (its ``to_json()``) under ``run_id``; returns its row id."""
        parts: dict[str, str] = {}
        row = self._event_row(event, run_id, time.time() if ts is None else _finite(ts, "ts"), parts)
        with self._writing_parts() as (conn, written):
            self._write_shared(conn, [row], parts, written)
            cur = self._write(conn, self._INSERT_EVENT + " RETURNING id", row[:7])
            return int(cur.fetchone()[0])

    def record_events(self, events: Iterable[Event], run_id: str | None = None) -> int:
        """Store many events in one transaction (all or none); returns how many were written."""
        now = time.time()
        count = 0
        with self._writing_parts() as (conn, written):
            for chunk in _chunks(events):
                parts: dict[str, str] = {}
                rows = [self._event_row(event, run_id, now, parts) for event in chunk]
                self._write_shared(conn, rows, parts, written)
                self._write(conn, self._INSERT_EVENT, [row[:7] for row in rows], many=True)
                count += len(rows)
        return count

    def _write_shared(self, conn: Any, rows: list[tuple], parts: dict[str, str], written: Written) -> None:
        """The rows' distinct blobs and the parts not known stored (keys into ``written``), before
        the events that name them."""
        blobs = self._new_blobs(conn, rows, parts)
        if blobs:
            self._write(conn, self._INSERT_BLOB, blobs, many=True)
        if parts:
            unknown = self._unknown_parts(conn, parts, written)
            if unknown:
                self._write(conn, self._INSERT_PART, unknown, many=True)

    def _nested(self) -> bool:
        return getattr(self._local, "conn", None) is not None

    # One commit flushes the WAL to disk: ~1-3 ms. A worker holding several queries commits them
    # together (sql.py's grouped; benchmarks/RESULTS.md, "group commits").
    group_commits = True

    def _order_shared_rows(self, conn: Any = None, *, grouped: bool = False) -> None:
        """A grouped batch takes the shared-rows advisory lock exclusively, in its outer transaction
        (a savepoint rolled back would release it) before its first score or parameter write, and
        holds it to its commit; a single write takes it shared. Two batches, or a batch and a single
        write, then never wait on each other's rows in a cycle; single writes still run side by side
        (each locks its rows in one sorted statement set). The lock is sent in one pipeline with the
        write that follows (:meth:`_write`), unless that write would open a savepoint first."""
        try:
            group = getattr(self._local, "grouped", None)
            if grouped and group is not None and group[1]:
                self._local.lock_first = "SELECT pg_advisory_xact_lock(%s)"
            elif grouped:
                self._local.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SHARED_ROWS_KEY,))
            else:
                self._local.lock_first = "SELECT pg_advisory_xact_lock_shared(%s)"
        except self._psycopg.Error as exc:
            raise self._error(exc) from exc

    def _hold_parts(self, conn: Any) -> None:
        """A writer naming parts holds ROW EXCLUSIVE on ``parts`` (as its inserts would) before it
        reads ``parts_pruned``: a prune running waits for it, or it waits for the prune and sees
        its count."""
        conn.execute("LOCK TABLE parts IN ROW EXCLUSIVE MODE")

    def _lock_parts(self, conn: Any) -> None:
        """Writers of parts (ROW EXCLUSIVE) wait until the pruning transaction ends, so no event can
        name a part deleted under it (the scan that follows sees every committed event)."""
        conn.execute("LOCK TABLE parts IN SHARE ROW EXCLUSIVE MODE")

    # ------------------------------------------------------------------ metrics

    _INSERT_METRIC = (
        "INSERT INTO metrics (run_id, scope, scope_id, name, value, reason, n, framework, retriever, "
        "details, ts) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )

    def record_metric(
        self,
        scope: str,
        scope_id: str,
        name: str,
        value: float | None,
        reason: str | None = None,
        *,
        run_id: str | None = None,
        framework: str | None = None,
        retriever: str | None = None,
        details: Mapping[str, Any] | None = None,
        n: int | None = None,
    ) -> None:
        """Store one metric value; ``None`` needs a ``reason`` (undefined is not zero)."""
        row = MetricRow(scope, scope_id, name, value, reason, run_id, framework, retriever, details or {}, n)
        values = self._metric_row(row, run_id, time.time())
        with self._tx() as conn:
            self._write(conn, self._INSERT_METRIC, values)

    def record_metrics(self, rows: Iterable[MetricRow], *, run_id: str | None = None) -> int:
        """Store many metric rows in one transaction (all or none); ``run_id`` fills rows without one."""
        now = time.time()
        count = 0
        with self._tx() as conn:
            for chunk in _chunks(rows):
                values = self._metric_values(chunk, run_id, now)
                self._write(conn, self._INSERT_METRIC, values, many=True)
                count += len(chunk)
        return count

    # ------------------------------------------------------------------ contribution scores

    #: Score upserts of many ids in one statement (CTE ``sc``): ``raw = init + delta`` for a new id, else
    #: ``raw + delta``, each computed by the server as one ``INSERT … ON CONFLICT`` per id would; ids in
    #: code-point order (``COLLATE "C"``), so concurrent writes of the same ids cannot deadlock.
    _SCORES_CTE = (
        "t(id, d) AS (SELECT * FROM unnest(%(ids)s::text[], %(deltas)s::float8[])), "
        "sc AS (INSERT INTO scores AS s (unit, id, raw, n_updates, updated_at) "
        'SELECT %(unit)s, t.id, %(base)s + t.d, 1, %(now)s FROM t{cap} ORDER BY t.id COLLATE "C" '
        "ON CONFLICT (unit, id) DO UPDATE SET raw = s.raw + (SELECT t.d FROM t WHERE t.id = excluded.id), "
        "n_updates = s.n_updates + 1, updated_at = excluded.updated_at RETURNING s.id, s.raw)"
    )
    #: The counter of ``add_scores_and_param(cap=…)``: ``add_param(counter, 1, bounds=(0, limit + 1))``.
    _COUNTER_CTE = (
        "c AS (INSERT INTO params AS p (name, value, updated_at) "
        "VALUES (%(counter)s, (LEAST(GREATEST(0::float8 + 1, 0), %(top)s))::text, %(now)s) "
        "ON CONFLICT (name) DO UPDATE SET value = (LEAST(GREATEST(p.value::float8 + 1, 0), %(top)s))::text, "
        "updated_at = excluded.updated_at RETURNING value::float8 <= %(limit)s AS ok)"
    )
    _PARAM_CTE = (
        "a AS (INSERT INTO params AS p (name, value, updated_at) "
        "SELECT %(name)s, (LEAST(GREATEST(%(init)s::float8 + %(d)s, %(lo)s), %(hi)s))::text, %(now)s{param_cap} "
        "ON CONFLICT (name) DO UPDATE SET value = (LEAST(GREATEST(p.value::float8 + %(d)s, %(lo)s), %(hi)s))::text, "
        "updated_at = excluded.updated_at RETURNING value)"
    )
    _ADD_SCORES = "WITH " + _SCORES_CTE.format(cap="") + " SELECT id, raw FROM sc"
    _ADD_TEMPLATE = (
        "WITH {counter}" + _SCORES_CTE + ", " + _PARAM_CTE
        + " SELECT id, raw, NULL::text FROM sc UNION ALL SELECT NULL, NULL, value FROM a"
    )  # fmt: skip
    _ADD_SCORES_AND_PARAM = _ADD_TEMPLATE.format(counter="", cap="", param_cap="")
    #: The same, after the cap counter (``c``): the scores and the step apply only when ``c.ok``.
    _ADD_CAPPED = _ADD_TEMPLATE.format(
        counter=_COUNTER_CTE + ", ", cap=", c WHERE c.ok", param_cap=" FROM c WHERE c.ok"
    )

    def add_scores(self, unit: str, deltas: Mapping[str, float], *, init: float = 100.0) -> dict[str, float]:
        """Atomically add each ``deltas[id]`` in one statement; the server computes ``raw + delta``.

        Ids are written in code-point order, so concurrent batches over the same ids cannot deadlock.
        """
        init, checked = self._checked_deltas(unit, deltas, init)
        args = self._score_args(unit, checked, init)
        with self._shared_rows() as conn:
            rows = self._write(conn, self._ADD_SCORES, args).fetchall()
        out = {item_id: float(raw) for item_id, raw in rows}
        return {item_id: out[item_id] for item_id, _ in checked}

    @staticmethod
    def _score_args(unit: str, checked: list[tuple[str, float]], init: float) -> dict[str, Any]:
        return {
            "unit": unit, "ids": [i for i, _ in checked], "deltas": [d for _, d in checked],
            "base": init, "now": time.time(),
        }  # fmt: skip

    def add_scores_and_param(
        self,
        unit: str,
        deltas: Mapping[str, float],
        *,
        init: float = 100.0,
        name: str,
        delta: float,
        initial: float = 0.0,
        bounds: tuple[float, float] | None = None,
        cap: tuple[str, float] | None = None,
    ) -> tuple[dict[str, float], float] | None:
        """:meth:`add_scores` and one :meth:`add_param` step in one statement (one round trip); the
        server computes each value as those methods' statements do, so the values are theirs.

        :param cap: ``(counter, limit)``: ``add_param(counter, 1, bounds=(0, limit + 1))`` in the same
            statement; the scores and the parameter change only when the counter is then at most ``limit``.
        :return: the new raw scores and the parameter's new value; ``None`` when over the cap.
        """
        init, checked = self._checked_deltas(unit, deltas, init)
        step, initial, lo, hi = self._checked_step(name, delta, initial, bounds)
        args = self._score_args(unit, checked, init)
        args.update({"name": name, "init": initial, "d": step, "lo": lo, "hi": hi})
        sql = self._ADD_SCORES_AND_PARAM
        if cap is not None:
            _need_text(cap[0], "counter name")
            limit = _finite(cap[1], f"limit of counter {cap[0]!r}")
            args.update({"counter": cap[0], "limit": limit, "top": limit + 1.0})
            sql = self._ADD_CAPPED
        try:
            with self._shared_rows() as conn:
                rows = self._write(conn, sql, args).fetchall()
        except StoreError as exc:
            _raise_not_a_number(name, exc)
            raise
        if not rows:  # over the cap: only the counter changed
            return None
        out = {item_id: float(raw) for item_id, raw, _ in rows if item_id is not None}
        value = next(float(json.loads(text)) for item_id, _, text in rows if item_id is None)
        return {item_id: out[item_id] for item_id, _ in checked}, value

    def set_score(self, unit: str, id: str, raw: float) -> None:
        """Overwrite a raw score (suppression, resets); keeps its update count (0 for a new id)."""
        _need_text(unit, "score unit")
        _need_text(id, f"{unit} id")
        raw = _finite(raw, f"raw score of {unit} {id!r}")
        with self._shared_rows() as conn:
            self._write(
                conn,
                "INSERT INTO scores (unit, id, raw, n_updates, updated_at) VALUES (%s, %s, %s, 0, %s) "
                "ON CONFLICT (unit, id) DO UPDATE SET raw = excluded.raw, updated_at = excluded.updated_at",
                (unit, id, raw, time.time()),
            )

    def get_scores(self, unit: str, ids: Iterable[str] | None = None) -> dict[str, ScoreRow]:
        """Raw scores of ``unit`` (all of them, or only ``ids``; ids never updated are absent)."""
        sql = "SELECT id, raw, n_updates, updated_at FROM scores WHERE unit = %s"
        if ids is None:
            rows = self._read(sql, (unit,))
        else:
            wanted = list(dict.fromkeys(ids))
            rows = []
            for start in range(0, len(wanted), _PAGE):
                rows.extend(self._read(sql + " AND id = ANY(%s)", (unit, wanted[start : start + _PAGE])))
        return {r[0]: ScoreRow(r[1], r[2], r[3]) for r in rows}

    # ------------------------------------------------------------------ params

    def set_param(self, name: str, value: Any) -> None:
        """Store a parameter (any JSON-serializable value, finite numbers only); the last write wins."""
        _need_text(name, "parameter name")
        text = _dumps(value, f"parameter {name!r}", allow_nan=False)
        with self._shared_rows() as conn:
            self._write(
                conn,
                "INSERT INTO params (name, value, updated_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (name, text, time.time()),
            )

    def add_param(
        self,
        name: str,
        delta: float,
        *,
        initial: float = 0.0,
        bounds: tuple[float, float] | None = None,
    ) -> float:
        """Atomically step a numeric parameter: ``clamp(value + delta)`` computed by the server.

        Concurrent steps compose (none is lost), as serial steps would in the order the server
        applies them. :param initial: the value before the first step. :param bounds: ``(low, high)``
        clamp applied after each step. :return: the new value.
        """
        delta, initial, lo, hi = self._checked_step(name, delta, initial, bounds)
        args = {"name": name, "init": initial, "d": delta, "lo": lo, "hi": hi, "now": time.time()}
        try:
            with self._shared_rows() as conn:
                return float(json.loads(self._write(conn, self._ADD_PARAM, args).fetchone()[0]))
        except StoreError as exc:
            _raise_not_a_number(name, exc)
            raise

    _ADD_PARAM = (
        "INSERT INTO params AS p (name, value, updated_at) "
        "VALUES (%(name)s, (LEAST(GREATEST(%(init)s::float8 + %(d)s, %(lo)s), %(hi)s))::text, %(now)s) "
        "ON CONFLICT (name) DO UPDATE SET "
        "value = (LEAST(GREATEST(p.value::float8 + %(d)s, %(lo)s), %(hi)s))::text, "
        "updated_at = excluded.updated_at RETURNING value"
    )

    # ------------------------------------------------------------------ summary


def _raise_not_a_number(name: str, exc: StoreError) -> None:
    """Raise the error of an ``add_param`` step on a parameter that is not a number, if ``exc`` is one."""
    if "invalid input syntax" in str(exc):
        raise StoreError(f"parameter {name!r} is not a number; add_param steps numbers only") from None


def _chunks(items: Iterable[Any]) -> Iterator[list[Any]]:
    from triage_plugins.store.sqlite import _chunks as chunks

    return chunks(items)
