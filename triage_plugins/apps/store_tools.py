"""What the ``triage store`` commands and ``demo --fresh`` do to a store, as library calls.

Nothing here deletes or changes a file that is not a triage store: a path is first opened read-only,
which refuses a foreign file untouched (:class:`~triage_plugins.contract.errors.StoreError`).
``demo --fresh`` (:func:`reset_demo_store`) deletes only a store of this schema version that is empty or
holds nothing but demo runs, unless forced; a store of another schema version never.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from triage_plugins.contract.errors import StoreError, TriageError
from triage_plugins.store import SCHEMA_VERSION, TABLES, RunRow, open_store
from triage_plugins.store.sqlite import APPLICATION_ID

_log = logging.getLogger("triage.store_tools")

#: Units ``parse_age`` accepts, in seconds.
_AGE_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)


def is_url(target: str) -> bool:
    """Whether ``target`` is a store URL (``scheme://…``) rather than a file path."""
    return "://" in target


def parse_age(text: str) -> float:
    """``"30m"``, ``"12h"``, ``"7d"``, ``"2w"`` or ``"90s"`` as seconds.

    :raises TriageError: anything else (a bare number is refused: its unit would be a guess).
    """
    match = _AGE.match(text)
    if match is None:
        raise TriageError(f"not an age: {text!r}; use a number and a unit, e.g. 90s, 30m, 12h, 7d, 2w")
    return float(match.group(1)) * _AGE_UNITS[match.group(2).lower()]


@dataclass(frozen=True, slots=True)
class StoreSummary:
    """What ``triage store info`` shows: schema, row counts, runs and the events each lost."""

    where: str
    schema_version: int
    counts: dict[str, int]
    runs: list[RunRow]
    #: Feedback the learner could not attribute, per cause (store counters ``feedback.unattributed.*``).
    unattributed: dict[str, int] = field(default_factory=dict)

    @property
    def lost(self) -> tuple[int, int]:
        """Events lost over all runs: ``(dropped, undelivered)``."""
        return sum(r.dropped for r in self.runs), sum(r.undelivered for r in self.runs)


def summarize(target: str) -> StoreSummary:
    """Open ``target`` read-only and summarise it (nothing is created, switched or migrated)."""
    _require_existing(target)
    with open_store(target, readonly=True) as store:
        return StoreSummary(
            target, store.schema_version, store.counts(), store.runs(), _unattributed_feedback(store)
        )


def _unattributed_feedback(store: object) -> dict[str, int]:
    """The learner's counters of unattributed feedback in ``store``, the non-zero ones, per cause."""
    from triage_plugins.plugins.feedback import UNATTRIBUTED_CAUSES, unattributed_param

    out: dict[str, int] = {}
    for cause in UNATTRIBUTED_CAUSES:
        value = store.get_param(unattributed_param(cause))  # type: ignore[attr-defined]
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            out[cause] = int(value)
    return out


def prune(target: str, *, older_than: float | None, keep_runs: int | None) -> dict[str, int]:
    """Delete old runs (events, metric rows) of an existing store; learned scores stay. A SQLite file
    is then compacted (:func:`reclaim_space`), its bytes freed counted under ``"bytes_freed"``; a
    PostgreSQL database is left to autovacuum (``VACUUM`` there is optional)."""
    _require_existing(target)
    with open_store(target, readonly=True):
        pass  # refuses a foreign or newer file before anything opens it for writing
    with open_store(target) as store:
        deleted = store.prune(older_than=older_than, keep_runs=keep_runs)
    if not is_url(target) or target.startswith("sqlite:"):
        deleted["bytes_freed"] = reclaim_space(target)
    return deleted


def _bytes_on_disk(path: Path) -> int:
    """The store file and its write-ahead log, in bytes."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def reclaim_space(target: str) -> int:
    """Give a SQLite store's free pages back to the file system (``VACUUM``, then a WAL checkpoint
    that truncates the log); the bytes freed, 0 when another process holds the store (logged)."""
    path = Path(target.split("sqlite:///", 1)[1] if target.startswith("sqlite:///") else target)
    before = _bytes_on_disk(path)
    try:
        db = sqlite3.connect(str(path), timeout=5.0, isolation_level=None)
        try:
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()
    except sqlite3.OperationalError as exc:  # busy or locked: the rows are deleted, the space is not back
        _log.warning("store %s: space not reclaimed (%s); prune again when nothing writes to it", path, exc)
        return 0
    return max(0, before - _bytes_on_disk(path))


@dataclass(frozen=True, slots=True)
class Migration:
    """What :func:`migrate` did: the schema version found and the one the store has now."""

    where: str
    before: int  # 0: a new PostgreSQL database (no triage tables yet)
    after: int

    @property
    def changed(self) -> bool:
        return self.after != self.before


def migrate(target: str) -> Migration:
    """Bring an existing triage store, or a new PostgreSQL database, to this schema version.

    This is the explicit request the read-only commands point to (``triage store migrate URL``):
    reports and ``store info`` never migrate, and no command migrates a file it did not create
    unless asked. A SQLite path must already be a triage store (its header says so; a foreign file
    or a missing path is refused untouched); a PostgreSQL database may be new (its triage tables
    are created) or hold a triage store of an older schema. A newer schema is refused ("upgrade
    triage-plugins"), as is a database whose schema holds tables of its own.

    :raises StoreError: as described; nothing is changed then.
    """
    if not _is_postgres(target):
        path = _sqlite_path(target)
        if not path.is_file():
            raise StoreError(f"no store at {target}: migrate opens an existing triage store, never creates a file")
        if not is_triage_sqlite_file(path):
            raise StoreError(f"{target!r} is not a triage store; it is left untouched")
    with _migrations_logged() as steps, open_store(target) as store:
        after = store.schema_version
    before = min(steps) - 1 if steps else after
    return Migration(target, before, after)


def _is_postgres(target: str) -> bool:
    from triage_plugins.store.base import POSTGRES_SCHEMES

    scheme, sep, _ = target.strip().partition("://")
    return bool(sep) and scheme.lower().partition("+")[0] in POSTGRES_SCHEMES


def _sqlite_path(target: str) -> Path:
    """The file a SQLite target names (a path or ``sqlite:///…``); ``:memory:`` has none."""
    text = target.strip()
    if text == ":memory:":
        raise StoreError("an in-memory store has nothing to migrate: pass a store file or a postgresql:// URL")
    if text.lower().startswith("sqlite:///"):
        return Path(text[len("sqlite:///") :]).expanduser()
    if "://" in text:
        open_store(text, readonly=True)  # raises the store's own message for an unsupported scheme
    return Path(text).expanduser()


@contextmanager
def _migrations_logged() -> Iterator[list[int]]:
    """The schema numbers the store reports migrating to while the block runs (both backends log
    ``store %s migrated to schema %d`` on ``triage.store``, one record per step)."""
    steps: list[int] = []

    class _Steps(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.msg == "store %s migrated to schema %d" and isinstance(record.args, tuple):
                steps.append(int(record.args[-1]))

    logger = logging.getLogger("triage.store")
    handler, level = _Steps(logging.INFO), logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield steps
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def reset_sqlite_store(path: Path) -> int | None:
    """Delete a triage store file (and its WAL files) so a run starts afresh.

    Whether the file is a triage store is read from its SQLite header (the application id), without
    opening it, so an older triage store is recognised too and a foreign file is never touched.

    :return: how many runs the deleted store held (``0`` for an empty file, which is left in place
        for SQLite to fill), or ``None`` when there was nothing at ``path``.
    :raises StoreError: ``path`` is not a triage store (a text file, another application's
        database, a folder): it is left as it is.
    """
    if not path.exists():
        return None
    if path.is_dir() or not path.is_file():
        raise StoreError(f"{str(path)!r} is not a file, so not a triage store; it is left untouched")
    if path.stat().st_size == 0:
        return 0
    if not is_triage_sqlite_file(path):
        raise StoreError(
            f"{str(path)!r} is not a triage store; it is left untouched: pass a triage store or a path "
            "that does not exist yet"
        )
    try:
        with open_store(path, readonly=True) as store:
            n_runs = len(store.runs())
    except StoreError:
        n_runs = 0  # a triage store of an older schema: still ours to reset
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return n_runs


@dataclass(frozen=True, slots=True)
class StoreContents:
    """What a store holds, as :func:`reset_demo_store` reports it: runs per kind and rows per table."""

    runs: dict[str, int]
    counts: dict[str, int]

    def only(self, prefix: str) -> bool:
        """Whether the store holds nothing but runs whose kind starts with ``prefix`` (and what they
        recorded): every run is one, and a store with no run holds no row at all."""
        if self.runs:
            return all(kind.startswith(prefix) for kind in self.runs)
        return not any(self.counts.values())

    def describe(self) -> str:
        """``"4 runs: 3 serve, 1 demo-static; 1014 events; 12 learned scores"``."""

        def count(n: int, what: str) -> str:
            return f"{n} {what}{'s' * (n != 1)}"

        n_runs = sum(self.runs.values())
        ranked = sorted(self.runs.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = [
            count(n_runs, "run") + (": " + ", ".join(f"{n} {kind}" for kind, n in ranked) if ranked else "")
        ]
        parts.append(count(self.counts.get("events", 0), "event"))
        if self.counts.get("scores"):
            parts.append(count(self.counts["scores"], "learned score"))
        return "; ".join(parts)


def reset_demo_store(path: Path, *, force: bool = False, prefix: str = "demo") -> StoreContents | None:
    """Delete a triage store file (and its WAL files) for a fresh demo run, when it holds only demo runs.

    The store is reset when it is empty or every run in it is a demo's (kind starting with ``prefix``),
    and it has this triage-plugins' schema version; with ``force``, whatever runs it holds. A store
    of another schema version is never reset, ``force`` or not (an older one may be a deployment's
    not migrated yet; a newer one, a newer triage's).

    :return: what the deleted store held (nothing, for an empty file, which is left in place for
        SQLite to fill), or ``None`` when there was nothing at ``path``.
    :raises StoreError: ``path`` is not a triage store, has another schema version, or holds more
        than demo runs without ``force``: it is left as it is.
    """
    if not path.exists():
        return None
    if path.is_dir() or not path.is_file():
        raise StoreError(f"{str(path)!r} is not a file, so not a triage store; it is left untouched")
    if path.stat().st_size == 0:
        return StoreContents({}, {})
    if not is_triage_sqlite_file(path):
        raise StoreError(
            f"{str(path)!r} is not a triage store; it is left untouched: pass a triage store or a path "
            "that does not exist yet"
        )
    version = _header_schema_version(path)
    if version != SCHEMA_VERSION:
        raise StoreError(_other_schema(path, version))
    contents = _read_contents(path)
    if not force and not contents.only(prefix):
        raise StoreError(
            f"{str(path)!r} holds more than demo runs ({contents.describe()}): --fresh would delete "
            "all of it; pass --force to reset it anyway, --no-fresh to add this run to it, or another --store"
        )
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return contents


def _read_contents(path: Path) -> StoreContents:
    """Runs per kind and rows per table of a store file of this schema version, read without writing
    anything beside it: with no write-ahead log holding changes, the file is read as immutable (a
    plain read-only reader would leave ``-wal`` and ``-shm`` files behind)."""
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:  # a store in use, or not closed: its log counts
        with open_store(path, readonly=True) as store:
            if store.schema_version != SCHEMA_VERSION:  # migrated in the log, not yet checkpointed
                raise StoreError(_other_schema(path, store.schema_version))
            runs: dict[str, int] = {}
            for run in store.runs():
                runs[run.kind] = runs.get(run.kind, 0) + 1
            return StoreContents(runs, store.counts())
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            runs = {kind: int(n) for kind, n in db.execute("SELECT kind, COUNT(*) FROM runs GROUP BY kind")}
            counts = {
                table: int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]) for table in TABLES
            }
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read store {str(path)!r}: {exc}") from None
    return StoreContents(runs, counts)


def _header_schema_version(path: Path) -> int:
    """The schema version a SQLite file's header records (``PRAGMA user_version``, bytes 60-63)."""
    with open(path, "rb") as fh:
        header = fh.read(100)
    return int.from_bytes(header[60:64], "big")


def _other_schema(path: Path, version: int) -> str:
    newer = version > SCHEMA_VERSION
    return (
        f"{str(path)!r} is a triage store of schema version {version}, not {SCHEMA_VERSION} (this "
        f"triage-plugins'): it is never reset, even with --force; pass another --store"
        + ("" if newer else ", or --no-fresh to migrate it and add this run to it")
    )


def is_triage_sqlite_file(path: Path) -> bool:
    """Whether ``path`` is a SQLite file carrying triage-plugins' application id (header bytes 68–71)."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(100)
    except OSError:
        return False
    return (
        len(header) == 100
        and header.startswith(b"SQLite format 3\x00")
        and int.from_bytes(header[68:72], "big") == APPLICATION_ID
    )


def _require_existing(target: str) -> None:
    if not is_url(target) and target != ":memory:" and not Path(target).exists():
        raise StoreError(f"no store at {target}")
