"""The SQLite backend of the store (DESIGN §7): one file in WAL mode, the default.

:func:`triage_plugins.store.open_store` picks this backend for paths, ``sqlite:///`` URLs and
``":memory:"``; :class:`SQLiteStore` implements the :class:`~triage_plugins.store.Store` protocol.

Opening (:meth:`SQLiteStore.open`) accepts a filesystem path, a ``sqlite:///`` URL following SQLAlchemy's
convention (``sqlite:///rel/path.sqlite`` is relative, ``sqlite:////abs/path.sqlite`` absolute) or
``":memory:"``. Parent directories are created.

Schema (version :data:`SCHEMA_VERSION`, kept in ``PRAGMA user_version``; the file is tagged with
``PRAGMA application_id`` = :data:`APPLICATION_ID`):

``runs``
    one row per run (a demo, a benchmark, a deployment session): ``id``, ``kind``, ``config``
    (JSON), ``started_at``, ``ended_at`` (NULL while open).
``events``
    every hook event as it was delivered: ``kind``, ``framework``, ``query_id`` (when the event
    has one), ``run_id``, ``ts`` and ``json`` = ``event.to_json()`` (DESIGN §6), rebuilt
    losslessly by :meth:`SQLiteStore.events`.
``metrics``
    one metric value per row: ``scope`` (``chunk`` / ``graph`` / ``query``), ``scope_id``,
    ``name`` (the paper's symbol), ``value`` or NULL with a ``reason`` (undefined is not zero),
    ``n``, ``framework``, ``retriever``, ``details`` (JSON), ``run_id``, ``ts``. Since schema 6 the
    rows of one scope id written together are one *packed* row: ``name`` ``'*'``, ``reason`` their
    names, ``n`` their count, ``details`` the JSON list of their ``[name, value, reason, n,
    details]`` (read back one by one by :meth:`SQLiteStore.metrics`).
``scores``
    EvoRAG contribution scores (EvoRAG §4.2): ``unit`` (``triple`` / ``chunk``), ``id``, ``raw``
    (stored raw, starting at 100), ``n_updates``, ``updated_at``. Updates are single
    ``INSERT … ON CONFLICT DO UPDATE SET raw = raw + delta`` statements, so concurrent
    processes and threads lose no update.
``params``
    a small key/value table of JSON values (for example the learned EvoRAG α).
``blobs`` and ``parts``
    a graph event's text once per distinct graph (``blobs``, keyed by its SHA-256), since schema 8
    as a skeleton of content-defined chunks kept once each in ``parts`` (:mod:`~triage_plugins.store.chunks`:
    a snapshot stores what changed since the previous one); ``parts`` also holds the triples and
    chunks retrieval events name (schema 5).
``replayed``
    the ids of spilled writes already replayed (:mod:`triage_plugins.store.guard`), so each is
    applied once. ``runs.store_faults`` (JSON) holds a run's failed writes by cause.

Migrations are numbered in :data:`MIGRATIONS`; opening an older file applies the missing ones,
each in its own ``BEGIN IMMEDIATE`` transaction (so two processes opening a new file at once do not
race). A file written by a newer schema, a file that is not SQLite, or a SQLite file of another
application raises :class:`StoreError`.

Threads: each thread uses its own connection (the manager's background worker writes while the
host thread reads scores); an in-memory store has one connection guarded by a lock. Every public
write is one transaction; :meth:`SQLiteStore.transaction` groups several (nested uses become savepoints).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import secrets
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage_plugins.contract.errors import StoreError
from triage_plugins.contract.events import Event
from triage_plugins.store.rows import (
    SCOPES,
    TABLES,
    MetricRow,
    RunRow,
    ScoreRow,
    _dumps,
    _finite,
    _need_text,
)
from triage_plugins.store.sql import PAGE, SQLStore, Written

if TYPE_CHECKING:
    pass

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SCOPES",
    "TABLES",
    "MetricRow",
    "RunRow",
    "ScoreRow",
    "SQLiteStore",
]

log = logging.getLogger("triage.store")

APPLICATION_ID = 0x54524947  # "TRIG": marks a SQLite file as a triage-plugins store
BUSY_TIMEOUT_SECONDS = 30.0
MEMORY = ":memory:"
_PAGE = PAGE  # ids per IN (...) query
_WRITE_CHUNK = 512  # rows encoded, then inserted by one executemany, at a time inside a batch

#: Ordered schema migrations; migration ``i`` (1-based) brings a file to ``user_version = i``.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: runs, events, metric rows, contribution scores
        f"PRAGMA application_id = {APPLICATION_ID}",
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            config TEXT NOT NULL DEFAULT '{}',
            started_at REAL NOT NULL,
            ended_at REAL
        )""",
        """CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            run_id TEXT REFERENCES runs(id),
            kind TEXT NOT NULL,
            framework TEXT,
            query_id TEXT,
            ts REAL NOT NULL,
            json TEXT NOT NULL
        )""",
        """CREATE TABLE metrics (
            id INTEGER PRIMARY KEY,
            run_id TEXT REFERENCES runs(id),
            scope TEXT NOT NULL CHECK (scope IN ('chunk', 'graph', 'query')),
            scope_id TEXT NOT NULL,
            name TEXT NOT NULL,
            value REAL,
            reason TEXT,
            n INTEGER,
            framework TEXT,
            retriever TEXT,
            details TEXT NOT NULL DEFAULT '{}',
            ts REAL NOT NULL,
            CHECK (value IS NOT NULL OR reason IS NOT NULL)
        )""",
        """CREATE TABLE scores (
            unit TEXT NOT NULL,
            id TEXT NOT NULL,
            raw REAL NOT NULL,
            n_updates INTEGER NOT NULL DEFAULT 0,
            updated_at REAL NOT NULL,
            PRIMARY KEY (unit, id)
        ) WITHOUT ROWID""",
    ),
    (  # 2: learned parameters (EvoRAG alpha ...) and lookup indexes
        """CREATE TABLE params (
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL
        ) WITHOUT ROWID""",
        "CREATE INDEX events_by_run_kind ON events (run_id, kind)",
        "CREATE INDEX events_by_kind ON events (kind)",
        "CREATE INDEX events_by_query ON events (query_id)",
        "CREATE INDEX metrics_by_run ON metrics (run_id)",
        "CREATE INDEX metrics_by_scope_name ON metrics (scope, name)",
    ),
    (  # 3: delivery counts per run; graph snapshots stored once per distinct graph
        "ALTER TABLE runs ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN undelivered INTEGER NOT NULL DEFAULT 0",
        """CREATE TABLE blobs (
            hash TEXT PRIMARY KEY,
            json TEXT NOT NULL
        ) WITHOUT ROWID""",
        "ALTER TABLE events ADD COLUMN blob TEXT REFERENCES blobs(hash)",
    ),
    (  # 4: the newest score change per unit is one index lookup (bounded-staleness checks)
        "CREATE INDEX scores_by_update ON scores (unit, updated_at)",
    ),
    (  # 5: retrieval events as skeletons; each retrieved triple and chunk stored once (sql.py)
        """CREATE TABLE parts (
            hash TEXT PRIMARY KEY,
            json TEXT NOT NULL
        ) WITHOUT ROWID""",
        "CREATE TABLE parts_pruned (n INTEGER NOT NULL)",  # bumped when prune deletes parts
        "INSERT INTO parts_pruned (n) VALUES (0)",
    ),
    # 6: metric rows of one scope id written together may be one packed row (name '*', sql.py); no
    # DDL: the version keeps triage versions that would misread such rows out of the file
    (),
    (  # 7: failed store writes per run, by cause (store/guard.py); spilled writes replayed once each
        "ALTER TABLE runs ADD COLUMN store_faults TEXT NOT NULL DEFAULT '{}'",
        "CREATE TABLE replayed (uid TEXT PRIMARY KEY, ts REAL NOT NULL) WITHOUT ROWID",
    ),
    # 8: graph snapshots stored as content-defined chunks in parts (store/chunks.py); no DDL: the
    # version keeps triage versions whose prune would delete those chunks out of the file
    (),
)
SCHEMA_VERSION = len(MIGRATIONS)


def _parse_target(url_or_path: str | os.PathLike[str]) -> Path | None:
    """The file path a store URL or path names; ``None`` for an in-memory store."""
    if isinstance(url_or_path, os.PathLike):
        return Path(url_or_path).expanduser()
    if not isinstance(url_or_path, str) or not url_or_path.strip():
        raise StoreError(f"a store is opened by a path, a sqlite:/// URL or ':memory:', got {url_or_path!r}")
    text = url_or_path.strip()
    if text == MEMORY:
        return None
    scheme, sep, rest = text.partition("://")
    if not sep:
        return Path(text).expanduser()
    scheme = scheme.lower()
    if scheme != "sqlite":
        raise StoreError(
            f"unsupported store URL scheme {scheme!r}; use a path, sqlite:///relative/path, "
            "sqlite:////absolute/path, ':memory:' or a postgresql://user@host/database URL"
        )
    if rest in ("", "/", "/:memory:"):
        return None
    if not rest.startswith("/") or "?" in rest:
        raise StoreError(
            f"malformed SQLite URL {text!r}: write sqlite:///relative/path or sqlite:////absolute/path "
            "(query parameters are not supported)"
        )
    return Path(rest[1:]).expanduser()


def _chunks(items: Iterable[Any]) -> Iterator[list[Any]]:
    """``items`` in lists of at most ``_WRITE_CHUNK``."""
    it = iter(items)
    while chunk := list(itertools.islice(it, _WRITE_CHUNK)):
        yield chunk


def _identity(db: sqlite3.Connection) -> tuple[int, int, bool]:
    """``(application_id, user_version, holds any schema object)``, read in one statement.

    One statement is one snapshot: read apart, a process opening a new file could see it still
    unmarked, then see the tables another process's first migration just committed, and refuse the
    store as foreign.
    """
    app_id, version, has_schema = db.execute(
        "SELECT a.application_id, v.user_version, EXISTS (SELECT 1 FROM sqlite_master) "
        "FROM pragma_application_id() AS a, pragma_user_version() AS v"
    ).fetchone()
    return int(app_id), int(version), bool(has_schema)


class _Handle:
    """A connection and its transaction nesting depth (0 = no open transaction)."""

    __slots__ = ("db", "depth")

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.depth = 0


# --------------------------------------------------------------------------- the store


def _sidecars(path: Path) -> frozenset[str]:
    """Which of SQLite's ``-wal`` / ``-shm`` files exist beside ``path``."""
    return frozenset(s for s in ("-wal", "-shm") if Path(f"{path}{s}").exists())


def _leave_no_sidecars(path: Path) -> None:
    """Remove the ``-wal`` / ``-shm`` files a read-only open left, the way SQLite itself does: a
    read-write connection opened and closed at once, which deletes them only when it is the last
    connection to the store (another process's live files stay) and writes no data (an empty WAL
    has nothing to checkpoint). On a read-only filesystem nothing happens."""
    try:
        db = sqlite3.connect(str(path), timeout=0.2, isolation_level=None)
        try:
            db.execute("PRAGMA application_id").fetchone()
        finally:
            db.close()
    except sqlite3.Error as exc:
        log.debug("left SQLite's -wal/-shm files beside %s: %s", path, exc)


class SQLiteStore(SQLStore):
    """A SQLite trace + score store (see the module docstring for the tables).

    :param url_or_path: a path, a ``sqlite:///`` URL or ``":memory:"``.
    :param readonly: open an existing store for reading only: nothing is created, switched or
        migrated (reports and ``store info`` open stores so, also on a read-only filesystem).
    :raises StoreError: the URL is unsupported; the file is not a triage-plugins store (a SQLite file
        with tables of its own is refused, never migrated); it was written by a newer
        triage-plugins; or, read-only, it does not exist or needs a migration first.
    """

    def __init__(self, url_or_path: str | os.PathLike[str], *, readonly: bool = False) -> None:
        self._path = _parse_target(url_or_path)
        self.readonly = readonly
        # A delivery batch's writes (events, metric rows, scores) commit as one transaction of a file
        # store (sql.py's grouped): one BEGIN/COMMIT per batch, not per write (benchmarks/RESULTS.md,
        # the adapter's own CPU per query, issue #32 point 5). Not ``:memory:``: other threads' writes would join its one connection.
        self.group_commits = self._path is not None and not readonly
        if readonly and (self._path is None or not self._path.is_file()):
            raise StoreError(f"no store at {url_or_path!s}: pass the path of an existing triage store")
        self._closed = False
        self._pid = os.getpid()
        self._local = threading.local()
        self._registry_lock = threading.Lock()
        self._handles: list[tuple[weakref.ref[threading.Thread], _Handle]] = []
        self._orphans: list[_Handle] = []  # connections inherited through fork: never touched again
        self._memory: _Handle | None = None
        self._memory_lock = threading.RLock()
        #: the ``-wal`` / ``-shm`` files already beside a store opened read-only (close() removes none of them)
        self._sidecars = _sidecars(self._path) if readonly and self._path is not None else frozenset()
        if self._path is not None and not readonly:
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the directory of store {str(self._path)!r}: {exc}") from None
        first = self._connect()
        try:
            self._prepare(first.db)
        except BaseException:
            first.db.close()
            raise
        if self._path is None:
            self._memory = first
        else:
            self._local.handle = first
            self._handles.append((weakref.ref(threading.current_thread()), first))
        log.debug("opened store %s (schema %d)", self.url, SCHEMA_VERSION)

    @classmethod
    def open(
        cls, url_or_path: str | os.PathLike[str] | SQLiteStore, *, readonly: bool = False
    ) -> SQLiteStore:
        """Open (creating and migrating as needed) the store at a path or URL; a store is returned as is."""
        if isinstance(url_or_path, SQLiteStore):
            return url_or_path
        return cls(url_or_path, readonly=readonly)

    # ------------------------------------------------------------------ identity

    @property
    def path(self) -> Path | None:
        """The SQLite file, or ``None`` for an in-memory store."""
        return self._path

    @property
    def url(self) -> str:
        """``sqlite:///<absolute path>`` or ``":memory:"``."""
        if self._path is None:
            return MEMORY
        return f"sqlite:///{self._path.resolve()}"

    @property
    def schema_version(self) -> int:
        """The file's schema version (``PRAGMA user_version``)."""
        with self._lease() as h:
            return int(h.db.execute("PRAGMA user_version").fetchone()[0])

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<SQLiteStore {self.url} {state}>"

    def __enter__(self) -> SQLiteStore:
        return self

    # ------------------------------------------------------------------ connections

    def _where(self) -> str:
        return MEMORY if self._path is None else str(self._path)

    def _connect(self) -> _Handle:
        if self.readonly:
            db = self._connect_readonly()
        else:
            try:
                db = sqlite3.connect(
                    MEMORY if self._path is None else str(self._path),
                    timeout=BUSY_TIMEOUT_SECONDS,
                    isolation_level=None,  # we issue BEGIN / COMMIT ourselves
                    check_same_thread=False,  # close() may close another thread's connection
                )
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open store {self._where()!r}: {exc}") from None
        try:
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
            db.execute("PRAGMA foreign_keys = ON")
            if not self.readonly:
                db.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            db.close()
            raise self._open_error(exc) from None
        return _Handle(db)

    def _connect_readonly(self) -> sqlite3.Connection:
        """``mode=ro``; on a read-only filesystem (no ``-shm`` can be made) ``immutable=1`` as well."""
        uri = self._path.resolve().as_uri()  # type: ignore[union-attr]
        error: sqlite3.Error | None = None
        for query in ("mode=ro", "mode=ro&immutable=1"):
            try:
                db = sqlite3.connect(
                    f"{uri}?{query}", timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None,
                    check_same_thread=False, uri=True,
                )  # fmt: skip
            except sqlite3.Error as exc:
                error = exc
                continue
            try:
                db.execute("PRAGMA application_id").fetchone()
                return db
            except sqlite3.OperationalError as exc:
                error = exc
                db.close()
            except sqlite3.Error:
                return db  # not a database, say: _prepare reports it
        raise StoreError(f"cannot open store {self._where()!r} read-only: {error}")

    def _open_error(self, exc: sqlite3.Error) -> StoreError:
        where = self._where()
        if getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
            return StoreError(
                f"{where!r} is not a SQLite database ({exc}); pass the path of a triage-plugins store "
                "or of a file that does not exist yet"
            )
        return StoreError(f"cannot open store {where!r}: {exc}")

    @staticmethod
    def _switch_to_wal(db: sqlite3.Connection, where: str, timeout: float = 30.0) -> str:
        """``PRAGMA journal_mode = WAL``, retried while another process holds the lock.

        SQLite's busy timeout does not cover this pragma: when several processes open a brand-new
        file at the same moment, all but one get "database is locked" at once. They retry with a
        short backoff until the first one has switched the file (then the pragma is a no-op).
        """
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                return str(db.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise StoreError(f"cannot switch {where!r} to WAL mode: {exc}") from None
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"cannot switch {where!r} to WAL mode: {exc} (after {timeout:.0f} s)"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot switch {where!r} to WAL mode: {exc}") from None

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Check the file is ours and not newer, switch to WAL, apply missing migrations."""
        where = self._where()
        try:
            app_id, version, has_schema = _identity(db)
        except sqlite3.Error as exc:
            raise self._open_error(exc) from None
        if app_id not in (0, APPLICATION_ID):
            raise StoreError(
                f"{where!r} is a SQLite database of another application (application_id {app_id:#x}); "
                "use a separate file for the triage store"
            )
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{where!r} has store schema version {version}, newer than the {SCHEMA_VERSION} this "
                "triage-plugins understands; upgrade triage-plugins to open it"
            )
        if app_id == 0 and has_schema:
            raise StoreError(
                f"{where!r} is a SQLite database but not a triage store (it has tables of its own); "
                "it is left untouched: pass a triage store or a path that does not exist yet"
            )
        if self.readonly:
            if version < SCHEMA_VERSION:
                raise StoreError(
                    f"{where!r} has store schema {version}; run `triage store migrate {where}` to bring it "
                    f"to schema {SCHEMA_VERSION}"
                )
            return
        if self._path is not None:
            mode = self._switch_to_wal(db, where)
            if str(mode).lower() != "wal":
                log.warning("store %s: journal_mode is %s, not WAL", where, mode)
        for number in range(version + 1, SCHEMA_VERSION + 1):
            self._migrate(db, number)

    def _migrate(self, db: sqlite3.Connection, number: int) -> None:
        where = self._where()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot lock {where!r} to migrate it to schema {number}: {exc}") from None
        try:
            # Another process may have migrated while we waited for the lock.
            current = int(db.execute("PRAGMA user_version").fetchone()[0])
            if current >= number:
                db.execute("COMMIT")
                return
            for statement in MIGRATIONS[number - 1]:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {number}")
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise StoreError(
                f"migrating {where!r} to store schema {number} failed: {exc}; is it a triage-plugins store?"
            ) from None
        log.info("store %s migrated to schema %d", where, number)

    def _handle(self) -> _Handle:
        if self._closed:
            raise StoreError(f"store {self._where()!r} is closed")
        if os.getpid() != self._pid:
            self._after_fork()
        if self._memory is not None:
            return self._memory
        handle = getattr(self._local, "handle", None)
        if handle is None:
            handle = self._connect()
            with self._registry_lock:
                self._prune_dead_threads()
                self._handles.append((weakref.ref(threading.current_thread()), handle))
            self._local.handle = handle
        return handle

    def _after_fork(self) -> None:
        if self._memory is not None:
            raise StoreError("an in-memory store cannot be used in a forked process; open a file store")
        with self._registry_lock:
            self._orphans.extend(h for _, h in self._handles)
            self._handles = []
            self._local = threading.local()
            self._pid = os.getpid()

    def _prune_dead_threads(self) -> None:
        """Close the connections of threads that ended. The main thread counts as alive even when
        ``is_alive()`` says otherwise: during interpreter shutdown it is marked stopped while it still
        runs the ``atexit`` handlers (a manager ending its run there must keep its connection)."""
        alive = []
        main = threading.main_thread()
        for ref, handle in self._handles:
            thread = ref()
            if thread is None or (thread is not main and not thread.is_alive()):
                handle.db.close()
            else:
                alive.append((ref, handle))
        self._handles = alive

    @contextmanager
    def _lease(self) -> Iterator[_Handle]:
        """This thread's connection (for an in-memory store: the one connection, locked)."""
        lock = self._memory_lock if self._path is None else nullcontext()
        with lock:
            yield self._handle()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lease() as h:
            db = h.db
            if h.depth == 0:
                try:
                    db.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    raise StoreError(
                        f"cannot start a write transaction on {self._where()!r}: {exc}"
                    ) from None
                h.depth = 1
                try:
                    yield db
                except BaseException as exc:
                    h.depth = 0
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    if isinstance(exc, sqlite3.Error):
                        raise StoreError(
                            f"write to {self._where()!r} failed and was rolled back: {exc}"
                        ) from exc
                    raise
                h.depth = 0
                try:
                    db.execute("COMMIT")
                except sqlite3.Error as exc:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise StoreError(
                        f"commit to {self._where()!r} failed and was rolled back: {exc}"
                    ) from exc
            else:
                name = f"triage_sp{h.depth}"
                db.execute(f"SAVEPOINT {name}")
                h.depth += 1
                try:
                    yield db
                except BaseException as exc:
                    db.execute(f"ROLLBACK TO {name}")
                    db.execute(f"RELEASE {name}")
                    if isinstance(exc, sqlite3.Error):
                        raise StoreError(
                            f"write to {self._where()!r} failed and was rolled back: {exc}"
                        ) from exc
                    raise
                else:
                    db.execute(f"RELEASE {name}")
                finally:
                    h.depth -= 1

    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        with self._lease() as h:
            try:
                return h.db.execute(sql, tuple(params)).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"reading {self._where()!r} failed: {exc}") from exc

    def close(self) -> None:
        """Close every connection of this store (idempotent); later calls raise :class:`StoreError`."""
        with self._memory_lock, self._registry_lock:
            if self._closed:
                return
            self._closed = True
            handles = [h for _, h in self._handles]
            if self._memory is not None:
                handles.append(self._memory)
            self._handles = []
            self._memory = None
        if os.getpid() != self._pid:
            return  # inherited through fork: leave the parent's connections alone
        for handle in handles:
            try:
                handle.db.close()
            except sqlite3.Error as exc:  # pragma: no cover - close failing is logged, not raised
                log.warning("closing a connection of %s failed: %s", self._where(), exc)
        if self.readonly and self._path is not None and _sidecars(self._path) - self._sidecars:
            _leave_no_sidecars(self._path)

    # ------------------------------------------------------------------ runs

    def start_run(self, kind: str, config: Mapping[str, Any] | None = None) -> str:
        """Record a new run and return its id (``<UTC time>-<random hex>``, sortable by start)."""
        _need_text(kind, "run kind")
        config_json = _dumps(dict(config or {}), f"config of run kind {kind!r}", allow_nan=False)
        now = time.time()
        run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(4)
        with self._tx() as db:
            db.execute(
                "INSERT INTO runs (id, kind, config, started_at) VALUES (?, ?, ?, ?)",
                (run_id, kind, config_json, now),
            )
        return run_id

    # ------------------------------------------------------------------ events

    _INSERT_EVENT = (
        "INSERT INTO events (run_id, kind, framework, query_id, ts, json, blob) VALUES (?, ?, ?, ?, ?, ?, ?)"
    )
    _INSERT_BLOB = "INSERT INTO blobs (hash, json) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING"
    _INSERT_PART = "INSERT INTO parts (hash, json) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING"

    def record_event(self, event: Event, run_id: str | None = None, *, ts: float | None = None) -> int:
        """Store one event (its ``to_json()``) under ``run_id``; returns its row id."""
        parts: dict[str, str] = {}
        row = self._event_row(event, run_id, time.time() if ts is None else _finite(ts, "ts"), parts)
        with self._writing_parts() as (db, written):
            return int(self._insert_events(db, [row], parts, run_id, written).lastrowid)

    def record_events(self, events: Iterable[Event], run_id: str | None = None) -> int:
        """Store many events in one transaction (all or none); returns how many were written.

        Rows are inserted by prepared statements (``executemany``), ``_WRITE_CHUNK`` at a time; each
        distinct blob and part of a chunk of events once.
        """
        now = time.time()
        count = 0
        with self._writing_parts() as (db, written):
            for chunk in _chunks(events):
                parts: dict[str, str] = {}
                rows = [self._event_row(event, run_id, now, parts) for event in chunk]
                self._insert_events(db, rows, parts, run_id, written)
                count += len(rows)
        return count

    def _insert_events(
        self,
        db: sqlite3.Connection,
        rows: list[tuple],
        parts: dict[str, str],
        run_id: str | None,
        written: Written,
    ) -> sqlite3.Cursor:
        """Insert event rows after their blobs and the parts not known stored (keys into ``written``)."""
        blobs = self._new_blobs(db, rows, parts)
        if blobs:
            self._insert(db, self._INSERT_BLOB, blobs, run_id, many=True)
        if parts:
            unknown = self._unknown_parts(db, parts, written)
            if unknown:
                self._insert(db, self._INSERT_PART, unknown, run_id, many=True)
        if len(rows) == 1:
            return self._insert(db, self._INSERT_EVENT, rows[0][:7], run_id)
        return self._insert(db, self._INSERT_EVENT, [row[:7] for row in rows], run_id, many=True)

    def _nested(self) -> bool:
        return self._handle().depth > 0

    def _insert(
        self,
        db: sqlite3.Connection,
        sql: str,
        row: Any,
        run_id: str | set[str | None] | None,
        *,
        many: bool = False,
    ) -> sqlite3.Cursor:
        """``execute`` (or, ``many``, ``executemany`` over rows) with the store's error messages.

        :param run_id: the run id of the rows (or the set of them), named when it is unknown.
        """
        try:
            return db.executemany(sql, row) if many else db.execute(sql, row)
        except sqlite3.IntegrityError as exc:
            if "FOREIGN KEY" in str(exc):
                if isinstance(run_id, set):
                    known = {r for (r,) in db.execute("SELECT id FROM runs")} if len(run_id) > 1 else set()
                    run_id = min((r for r in run_id if r is not None and r not in known), default=None)
                raise StoreError(
                    f"unknown run id {run_id!r}: get run ids from start_run() of this store"
                ) from None
            raise
        except UnicodeEncodeError as exc:
            raise StoreError(f"text cannot be stored as UTF-8 (lone surrogate?): {exc}") from None

    # ------------------------------------------------------------------ metrics

    _INSERT_METRIC = (
        "INSERT INTO metrics (run_id, scope, scope_id, name, value, reason, n, framework, retriever, "
        "details, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
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
        """Store one metric value; ``None`` needs a ``reason`` (undefined is not zero).

        ``details`` may hold non-finite floats (kept with Python's JSON ``Infinity`` / ``NaN``).
        """
        row = MetricRow(scope, scope_id, name, value, reason, run_id, framework, retriever, details or {}, n)
        values = self._metric_row(row, run_id, time.time())
        with self._tx() as db:
            self._insert(db, self._INSERT_METRIC, values, values[0])

    def record_metrics(self, rows: Iterable[MetricRow], *, run_id: str | None = None) -> int:
        """Store many metric rows in one transaction (all or none); ``run_id`` fills rows without one.

        Rows are inserted by a prepared statement (``executemany``), ``_WRITE_CHUNK`` at a time.
        """
        now = time.time()
        count = 0
        with self._tx() as db:
            for chunk in _chunks(rows):
                values = self._metric_values(chunk, run_id, now)
                self._insert(db, self._INSERT_METRIC, values, {v[0] for v in values}, many=True)
                count += len(chunk)
        return count

    # ------------------------------------------------------------------ contribution scores

    _UPSERT_SCORE = (
        "INSERT INTO scores (unit, id, raw, n_updates, updated_at) VALUES (?, ?, ? + ?, 1, ?) "
        "ON CONFLICT (unit, id) DO UPDATE SET raw = raw + ?, n_updates = n_updates + 1, "
        "updated_at = excluded.updated_at RETURNING raw"
    )

    def add_scores(self, unit: str, deltas: Mapping[str, float], *, init: float = 100.0) -> dict[str, float]:
        """Atomically add each ``deltas[id]`` in one transaction; returns the new raw score of each id."""
        init, checked = self._checked_deltas(unit, deltas, init)
        now = time.time()
        out: dict[str, float] = {}
        with self._tx() as db:
            for item_id, delta in checked:
                out[item_id] = float(
                    db.execute(self._UPSERT_SCORE, (unit, item_id, init, delta, now, delta)).fetchall()[0][0]
                )
        return out

    def set_score(self, unit: str, id: str, raw: float) -> None:
        """Overwrite a raw score (suppression, resets); keeps its update count (0 for a new id)."""
        _need_text(unit, "score unit")
        _need_text(id, f"{unit} id")
        raw = _finite(raw, f"raw score of {unit} {id!r}")
        with self._tx() as db:
            db.execute(
                "INSERT INTO scores (unit, id, raw, n_updates, updated_at) VALUES (?, ?, ?, 0, ?) "
                "ON CONFLICT (unit, id) DO UPDATE SET raw = excluded.raw, updated_at = excluded.updated_at",
                (unit, id, raw, time.time()),
            )

    def get_scores(self, unit: str, ids: Iterable[str] | None = None) -> dict[str, ScoreRow]:
        """Raw scores of ``unit`` (all of them, or only ``ids``; ids never updated are absent)."""
        sql = "SELECT id, raw, n_updates, updated_at FROM scores WHERE unit = ?"
        if ids is None:
            rows = self._read(sql, (unit,))
        else:
            wanted = list(dict.fromkeys(ids))
            rows = []
            for start in range(0, len(wanted), _PAGE):
                page = wanted[start : start + _PAGE]
                marks = ", ".join("?" * len(page))
                rows.extend(self._read(f"{sql} AND id IN ({marks})", (unit, *page)))
        return {r[0]: ScoreRow(r[1], r[2], r[3]) for r in rows}

    # ------------------------------------------------------------------ params

    def set_param(self, name: str, value: Any) -> None:
        """Store a parameter (any JSON-serializable value, finite numbers only)."""
        _need_text(name, "parameter name")
        text = _dumps(value, f"parameter {name!r}", allow_nan=False)
        with self._tx() as db:
            db.execute(
                "INSERT INTO params (name, value, updated_at) VALUES (?, ?, ?) "
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
        """Atomically step a numeric parameter: ``clamp(value + delta)``, inside one write transaction.

        ``BEGIN IMMEDIATE`` holds the file's write lock from the read to the write, so concurrent
        steps compose (none is lost), as serial steps in the order they took the lock.
        :param initial: the value before the first step. :param bounds: ``(low, high)`` clamp
        applied after each step. :return: the new value.
        """
        delta, initial, lo, hi = self._checked_step(name, delta, initial, bounds)
        with self._tx() as db:
            row = db.execute("SELECT value FROM params WHERE name = ?", (name,)).fetchone()
            value = initial if row is None else json.loads(row[0])
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise StoreError(f"parameter {name!r} is not a number; add_param steps numbers only")
            new = min(max(float(value) + delta, lo), hi)
            db.execute(
                "INSERT INTO params (name, value, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (name, json.dumps(new), time.time()),
            )
        return new

    # ------------------------------------------------------------------ summary
