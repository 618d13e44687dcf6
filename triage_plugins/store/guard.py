"""A circuit breaker in front of a store: failed writes are facts, never silent losses (issue #34).

:class:`GuardedStore` wraps any :class:`~triage_plugins.store.Store`; the manager puts its store behind
one, so every write of the default plugins (events, metric rows, scores, parameters) passes here.

- **Counted**: a write that fails with a store fault (disk full, I/O error, connection lost, locked,
  read-only) is counted in :attr:`GuardedStore.faults` by what it wrote and why it failed
  (:func:`classify`); a write the store rejects (a bad row) is counted as lost, ``rejected``, and raised.
- **Spilled**: the write goes to a bounded local file (:class:`Spill`, one JSON line per write,
  ``TRIAGE_SPILL_DIR``, default ``~/.cache/triage/spill``); the circuit opens and one warning line
  says so. While it is open, writes go straight to the spill (order kept) and reads answer from the
  last known values (scores, parameters, the newest spilled events), so the host never waits on a
  failing store. A write that fits nowhere (spill full or unwritable) is counted as lost.
- **Replayed**: at most every ``retry`` seconds (doubling up to ``max_retry``) a write first probes
  the store (``ping``) and replays the spill in order, each entry in the transaction that records its
  id in the store's ``replayed`` table, so an entry is applied once even when replayed twice. A spill
  left by a process that exited with the store down is adopted and replayed by the next guard of the
  same store.
- **Grouped**: on a store with ``group_commits`` (PostgreSQL), the manager's worker wraps each
  delivery batch in :meth:`GuardedStore.group`: the batch's writes (several queries' events, score
  updates and parameter steps) commit in one transaction, and an event counts as committed
  (``emit_feedback(wait=True)``) only once that transaction has. A group that fails (a store fault
  in any of its writes, or at commit) is rolled back and each of its writes is done again on its
  own, as above: stored, or spilled and counted.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage_plugins.contract.errors import StoreError
from triage_plugins.contract.events import Event, from_json
from triage_plugins.store.rows import MetricRow, ScoreRow, _json_default

if TYPE_CHECKING:
    from triage_plugins.store.base import Store

__all__ = [
    "GuardedStore",
    "Spill",
    "StoreFaults",
    "classify",
    "default_spill_dir",
    "describe_faults",
    "replay_file",
    "sum_faults",
]

log = logging.getLogger("triage.store")

DEFAULT_SPILL_BYTES = 256 * 2**20
_KNOWN_SCORES = 1_000_000  # last known scores kept for reads while the store fails
_RECENT_EVENTS = 4096  # spilled retrieval/generation events kept for last_event()
_REPLAY_GROUP = 64  # spilled writes replayed per transaction
_SQLITE_CAUSES = {13: "disk full", 10: "disk I/O error", 8: "read-only", 5: "locked", 6: "locked", 14: "cannot open"}
_OS_CAUSES = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk full", errno.EFBIG: "file too large", errno.EROFS: "read-only"}
_TEXT_CAUSES = (
    ("disk is full", "disk full"),
    ("no space", "disk full"),
    ("disk i/o", "disk I/O error"),
    ("no connection", "connection lost"),
    ("connection", "connection lost"),
    ("server closed", "connection lost"),
    ("is closed", "store closed"),
    ("read-only", "read-only"),
    ("readonly", "read-only"),
    ("locked", "locked"),
)


def classify(exc: BaseException) -> str | None:
    """The store fault behind ``exc`` (``"disk full"``, ``"connection lost"`` …), or ``None`` when the
    store rejected the write itself (a constraint, a bad value): retrying it would fail again."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "sqlite_errorcode", None)
        if isinstance(code, int):
            return _SQLITE_CAUSES.get(code & 0xFF)
        if isinstance(current, OSError) and current.errno is not None:
            return _OS_CAUSES.get(current.errno, "I/O error")
        if type(current).__module__.startswith("psycopg"):
            names = {c.__name__ for c in type(current).__mro__}
            if "DiskFull" in names:
                return "disk full"
            if names & {"OperationalError", "InterfaceError", "PoolTimeout", "PoolClosed"}:
                return "connection lost"
            return "read-only" if "ReadOnlySqlTransaction" in names else None
        current = current.__cause__ or current.__context__
    if not isinstance(exc, StoreError):
        return None
    text = str(exc).lower()
    return next((cause for pattern, cause in _TEXT_CAUSES if pattern in text), None)


class StoreFaults:
    """A run's failed store writes, counted in items (events, metric rows, score ids, parameters).

    Every item that did not commit at the first try is in :attr:`failed` (``(what, cause)``); it then
    ends ``replayed`` (stored after recovery), in :attr:`lost` (``(what, cause)``), or still pending
    in the spill: ``total_failed == replayed + total_lost + pending``.
    """

    def __init__(self) -> None:
        self.failed: Counter[tuple[str, str]] = Counter()
        self.lost: Counter[tuple[str, str]] = Counter()
        self.spilled = 0
        self.replayed = 0

    @property
    def pending(self) -> int:
        """Items in the spill, not yet stored."""
        return sum(self.failed.values()) - self.replayed - sum(self.lost.values())

    def __bool__(self) -> bool:
        return bool(self.failed)

    def to_dict(self) -> dict[str, Any]:
        """``{"failed": {what: {cause: n}}, "lost": {…}, "spilled": n, "replayed": n, "pending": n}``
        (``{}`` when nothing failed): what ``runs.store_faults`` holds."""
        if not self.failed:
            return {}
        return {
            "failed": _nested(self.failed),
            "lost": _nested(self.lost),
            "spilled": self.spilled,
            "replayed": self.replayed,
            "pending": self.pending,
        }


def _nested(counts: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (what, cause), n in sorted(counts.items()):
        out.setdefault(what, {})[cause] = n
    return out


def describe_faults(faults: Mapping[str, Any]) -> str:
    """One line for a report: ``"120 store writes failed (disk full: 120 events); 100 stored after
    recovery, 20 lost (spill full: 20 events)"``; ``""`` when none failed."""
    failed = faults.get("failed") or {}
    total = sum(int(n) for causes in failed.values() for n in causes.values())
    if not total:
        return ""
    lost = faults.get("lost") or {}
    lost_total = sum(int(n) for causes in lost.values() for n in causes.values())
    text = f"{total} store writes failed ({_by_cause(failed)}); {int(faults.get('replayed', 0))} stored after recovery"
    if lost_total:
        text += f", {lost_total} lost ({_by_cause(lost)})"
    pending = int(faults.get("pending", 0) or 0)
    if pending:
        text += f", {pending} still in the spill file"
    return text


def sum_faults(runs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Several runs' ``store_faults`` added up (the shape :meth:`StoreFaults.to_dict` returns)."""
    failed: Counter[tuple[str, str]] = Counter()
    lost: Counter[tuple[str, str]] = Counter()
    total = {"spilled": 0, "replayed": 0, "pending": 0}
    for faults in runs:
        for key, into in (("failed", failed), ("lost", lost)):
            for what, causes in (faults.get(key) or {}).items():
                for cause, n in (causes or {}).items():
                    with contextlib.suppress(TypeError, ValueError):
                        into[(str(what), str(cause))] += int(n)
        for key in total:
            with contextlib.suppress(TypeError, ValueError):
                total[key] += int(faults.get(key, 0) or 0)
    return {"failed": _nested(failed), "lost": _nested(lost), **total} if failed else {}


def _by_cause(counts: Mapping[str, Mapping[str, Any]]) -> str:
    parts = [f"{cause}: {int(n)} {what}" for what, causes in counts.items() for cause, n in causes.items()]
    return ", ".join(parts)


def default_spill_dir() -> Path:
    """``TRIAGE_SPILL_DIR``, else ``$XDG_CACHE_HOME/triage/spill`` (``~/.cache/triage/spill``)."""
    named = os.environ.get("TRIAGE_SPILL_DIR", "").strip()
    if named:
        return Path(named).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(cache) / "triage" / "spill"


class SpillFull(RuntimeError):
    """The spill file reached its bound."""


class Spill:
    """An append-only JSON-lines file of writes waiting for the store, read back in order.

    :param path: the file (created on the first append).
    :param max_bytes: the bound; an append beyond it raises :class:`SpillFull`.
    """

    def __init__(self, path: Path, max_bytes: int = DEFAULT_SPILL_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._size = path.stat().st_size if path.exists() else 0
        self._offset = 0  # bytes already replayed
        self._lock = threading.Lock()

    @property
    def pending(self) -> bool:
        """Whether entries wait to be replayed."""
        return self._size > self._offset

    def append(self, entry: Mapping[str, Any]) -> None:
        """Add one entry, flushed to the file before returning (``OSError`` when it cannot be)."""
        line = (json.dumps(entry, ensure_ascii=False, default=_json_default) + "\n").encode()
        with self._lock:
            if self._size + len(line) > self.max_bytes:
                raise SpillFull(f"spill file {self.path} is full ({self.max_bytes} bytes)")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as f:
                f.write(line)
                f.flush()
            self._size += len(line)

    def read(self, limit: int) -> list[tuple[int, dict[str, Any]]]:
        """Up to ``limit`` unreplayed entries with the offset after each."""
        out: list[tuple[int, dict[str, Any]]] = []
        if not self.pending:
            return out
        with self._lock, open(self.path, "rb") as f:
            f.seek(self._offset)
            offset = self._offset
            while len(out) < limit and offset < self._size:
                line = f.readline()
                if not line.endswith(b"\n"):
                    break  # a torn last line (the process died writing it)
                offset += len(line)
                with contextlib.suppress(ValueError):
                    out.append((offset, json.loads(line)))
        return out

    def advance(self, offset: int) -> None:
        """Mark every entry before ``offset`` replayed; an emptied spill is truncated."""
        with self._lock:
            self._offset = max(self._offset, offset)
            if self._offset >= self._size:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                self._size = self._offset = 0


class _Group:
    """The writes of one delivery batch inside one store transaction (:meth:`GuardedStore.group`):
    each as ``(what, n, op, args, call, fallback, events)``, to mark its events committed, or to be
    done again on its own when the transaction is rolled back; ``cause``: the store fault that
    dooms the transaction."""

    __slots__ = ("cause", "entries", "tx")

    def __init__(self) -> None:
        self.entries: list[tuple[Any, ...]] = []
        self.cause: str | None = None
        self.tx: contextlib.AbstractContextManager[Any] | None = None


class _RollBack(Exception):
    """Thrown into a group's transaction to roll it back."""


class GuardedStore:
    """A store behind a circuit breaker (module docstring); every other attribute is the store's.

    :param store: the store written to.
    :param spill_dir: where the spill file lives (default :func:`default_spill_dir`).
    :param spill_bytes: the spill's bound (default ``TRIAGE_SPILL_MB`` MiB, else 256 MiB).
    :param retry: seconds before the first probe of a failing store (doubling up to ``max_retry``).
    """

    def __init__(
        self,
        store: Store,
        *,
        spill_dir: str | os.PathLike[str] | None = None,
        spill_bytes: int | None = None,
        retry: float = 0.5,
        max_retry: float = 10.0,
    ) -> None:
        self.inner = store
        self.faults = StoreFaults()
        self.run_id: str | None = None
        self._dir = Path(spill_dir) if spill_dir is not None else default_spill_dir()
        key = hashlib.sha1(str(store.url).encode()).hexdigest()[:12]
        self._key = key
        megabytes = float(os.environ.get("TRIAGE_SPILL_MB", "") or DEFAULT_SPILL_BYTES / 2**20)
        bound = spill_bytes if spill_bytes is not None else int(megabytes * 2**20)
        self.spill = Spill(self._dir / f"{key}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl", bound)
        self._retry, self._max_retry = retry, max_retry
        self._backoff = retry
        self._cause: str | None = None  # set while the circuit is open
        self._next_probe = 0.0
        self._lock = threading.RLock()
        self._replaying = threading.Lock()
        self._local = threading.local()
        self._scores: dict[str, dict[str, ScoreRow]] = {}
        self._n_known = 0
        self._params: dict[str, Any] = {}
        self._changed: dict[str, float | None] = {}
        self._recent: OrderedDict[tuple[str, str | None, str], Event] = OrderedDict()
        self._expected: dict[int, list[Any]] = {}  # id(event) -> [event, committed?]
        self.adopted = self._adopt_orphans()

    # ------------------------------------------------------------------ state

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"<GuardedStore {self.inner!r} {'open circuit: ' + self._cause if self._cause else 'ok'}>"

    def __enter__(self) -> GuardedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def degraded(self) -> bool:
        """Whether the store is failing or writes still wait in the spill."""
        return self._cause is not None or self.spill.pending

    def close(self) -> None:
        """Close the store; writes still in the spill stay in its file for the next process."""
        if self.spill.pending:
            log.warning(
                "triage store %s: %d write(s) kept in %s; replayed when this store is opened again",
                self.inner.url, self.faults.pending, self.spill.path,
            )  # fmt: skip
        self.inner.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[GuardedStore]:
        """The store's transaction; writes inside it go straight to the store (no spill)."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            with self.inner.transaction():
                yield self
        finally:
            self._local.depth = depth

    @contextlib.contextmanager
    def group(self) -> Iterator[Callable[[], None]]:
        """Write what this thread writes inside as one transaction of the store (module docstring);
        yields a function that commits what was written so far and goes on in a new transaction
        (the worker calls it before it waits for its host, so no transaction stays open while it
        waits). Nothing is grouped (each write commits alone) on a store without ``group_commits``,
        inside another group or transaction, or while the store is failing."""
        if (
            not getattr(self.inner, "group_commits", False)
            or getattr(self._local, "group", None) is not None
            or getattr(self._local, "depth", 0)
            or self.degraded
        ):
            yield _no_commit
            return
        group = self._local.group = _Group()
        try:
            self._begin(group)
            yield lambda: self._commit_now(group)
        finally:
            try:
                self._end(group)
            finally:
                self._local.group = None

    def _begin(self, group: _Group) -> None:
        """Open the group's transaction; when the store refuses, writes go on one by one."""
        tx = self.inner.grouped()
        try:
            tx.__enter__()
        except Exception as exc:  # noqa: BLE001 - each write then meets the fault itself
            log.debug("triage store: no grouped transaction (%s); writes commit one by one", exc)
            return
        group.tx = tx

    def _commit_now(self, group: _Group) -> None:
        if group.entries or group.cause is not None:
            self._end(group)
            if not self.degraded:
                self._begin(group)

    def _end(self, group: _Group) -> None:
        """Commit the group (its events are then committed), or roll it back and write each of its
        writes again on its own (:meth:`_write`: stored, or spilled and counted)."""
        tx, group.tx = group.tx, None
        entries, group.entries = group.entries, []
        cause, group.cause = group.cause, None
        if tx is None:
            return
        try:
            if cause is None:
                tx.__exit__(None, None, None)
            else:
                tx.__exit__(_RollBack, _RollBack(), None)
        except Exception as exc:  # noqa: BLE001 - the commit failed: nothing of the group is stored
            cause = classify(exc) or f"commit failed ({type(exc).__name__})"
        if cause is None:
            for entry in entries:
                self._mark(entry[6], True)
            return
        log.debug(
            "triage store: a grouped batch of %d write(s) rolled back (%s); one by one", len(entries), cause
        )
        for what, n, op, args, call, fallback, events in entries:
            with contextlib.suppress(StoreError):  # a rejection is counted by _write
                self._write(what, n, op, args, call, fallback, events)

    def _grouped(self, group: _Group, entry: tuple[Any, ...], *, batch: bool) -> Any:
        """One write inside a group: run now (a statement of the group's transaction), its events
        marked committed when the group commits. A rejected write is counted and raised as outside a
        group, and dooms the group (its other writes are done again one by one when it ends); after
        a failure in the group, a write is not run but kept to be done again, and answered by its
        fallback."""
        what, n, _, _, call, fallback, events = entry
        if group.cause is None:
            try:
                result = call()
            except Exception as exc:
                cause = classify(exc)
                if cause is None and not _aborted(exc):  # rejected: it and the group are undone
                    group.cause = "rejected"  # the others are written again one by one
                    if not batch:
                        with self._lock:
                            self.faults.failed[(what, "rejected")] += n
                            self.faults.lost[(what, "rejected")] += n
                        self._mark(events, False)
                    raise
                group.cause = cause or "transaction aborted"
            else:
                group.entries.append(entry)
                return result
        group.entries.append(entry)
        return fallback() if callable(fallback) else fallback

    # ------------------------------------------------------------------ runs

    def start_run(self, kind: str, config: Mapping[str, Any] | None = None) -> str:
        """Open a run (not guarded: the caller learns at once that the store is down); counts restart."""
        run_id = self.inner.start_run(kind, config)
        with self._lock:
            self.run_id, self.faults = run_id, StoreFaults()
        return run_id

    def end_run(
        self, run_id: str, *, dropped: int = 0, undelivered: int = 0, faults: Mapping[str, Any] | None = None
    ) -> None:
        args = {"run_id": run_id, "dropped": dropped, "undelivered": undelivered, "faults": faults}
        self._write("runs", 1, "end_run", args, lambda: self.inner.end_run(**args), None)

    # ------------------------------------------------------------------ writes

    def record_event(self, event: Event, run_id: str | None = None, *, ts: float | None = None) -> int:
        when = time.time() if ts is None else ts
        args = lambda: {"run_id": run_id, "events": [[event.to_json(), when]]}  # noqa: E731 - built only to spill
        result = self._write("events", 1, "events", args, lambda: self.inner.record_event(event, run_id, ts=ts), 0, (event,))
        return result

    def record_events(self, events: Iterable[Event], run_id: str | None = None) -> int:
        batch = list(events)
        if not batch:
            return 0
        now = time.time()
        args = lambda: {"run_id": run_id, "events": [[e.to_json(), now] for e in batch]}  # noqa: E731
        try:
            return self._write("events", len(batch), "events", args, lambda: self.inner.record_events(batch, run_id), 0, batch, batch=True)
        except StoreError:  # rejected as a whole: store the others one by one
            return sum(self._one(lambda e=e: self.record_event(e, run_id)) for e in batch)

    def record_metric(self, scope: str, scope_id: str, name: str, value: float | None, reason: str | None = None, **fields: Any) -> Any:
        row = MetricRow(scope, scope_id, name, value, reason, ts=time.time(), **fields)
        call = lambda: self.inner.record_metric(scope, scope_id, name, value, reason, **fields)  # noqa: E731
        return self._write("metrics", 1, "metrics", {"run_id": None, "rows": [_row_dict(row)]}, call, None)

    def record_metrics(self, rows: Iterable[MetricRow], *, run_id: str | None = None) -> int:
        batch = list(rows)
        if not batch:
            return 0
        now = time.time()
        args = lambda: {"run_id": run_id, "rows": [_row_dict(r, now) for r in batch]}  # noqa: E731
        try:
            return self._write("metrics", len(batch), "metrics", args, lambda: self.inner.record_metrics(batch, run_id=run_id), 0, batch=True)
        except StoreError:
            return sum(self._one(lambda r=r: self.record_metrics([r], run_id=run_id)) for r in batch)

    def add_scores(self, unit: str, deltas: Mapping[str, float], *, init: float = 100.0) -> dict[str, float]:
        clean = dict(deltas)
        if not clean:
            return {}
        args = {"unit": unit, "deltas": clean, "init": init}
        fallback = lambda: self._step_known(unit, clean, init)  # noqa: E731
        new = self._write("scores", len(clean), "add_scores", args, lambda: self.inner.add_scores(unit, clean, init=init), fallback)
        self._remember_scores(unit, {k: ScoreRow(float(v), 0, time.time()) for k, v in new.items()}, only_known=True)
        return new

    def add_score(self, unit: str, id: str, delta: float, *, init: float = 100.0) -> float:
        return self.add_scores(unit, {id: delta}, init=init)[id]

    def set_score(self, unit: str, id: str, raw: float) -> None:
        args = {"unit": unit, "id": id, "raw": raw}
        self._write("scores", 1, "set_score", args, lambda: self.inner.set_score(unit, id, raw), None)
        self._remember_scores(unit, {id: ScoreRow(float(raw), 0, time.time())})

    def set_param(self, name: str, value: Any) -> None:
        self._write("params", 1, "set_param", {"name": name, "value": value}, lambda: self.inner.set_param(name, value), None)
        self._params[name] = value

    def add_param(self, name: str, delta: float, *, initial: float = 0.0, bounds: tuple[float, float] | None = None) -> float:
        args = {"name": name, "delta": delta, "initial": initial, "bounds": bounds}
        fallback = lambda: _bounded(float(self._params.get(name, initial)) + delta, bounds)  # noqa: E731
        value = self._write("params", 1, "add_param", args, lambda: self.inner.add_param(name, delta, initial=initial, bounds=bounds), fallback)
        self._params[name] = value
        return value

    def add_scores_and_param(
        self, unit: str, deltas: Mapping[str, float], *, init: float = 100.0, name: str, delta: float,
        initial: float = 0.0, bounds: tuple[float, float] | None = None, cap: tuple[str, float] | None = None,
    ) -> tuple[dict[str, float], float] | None:
        """:meth:`add_scores` and one :meth:`add_param` step as one write (one round trip on a store
        that has ``add_scores_and_param``, else the two writes); counted as the score write it is.
        ``cap=(counter, limit)``: the counter is stepped by 1 first and nothing else changes when it
        is then over ``limit`` (``None`` is returned)."""
        clean = dict(deltas)
        if getattr(type(self.inner), "add_scores_and_param", None) is None or not clean and cap is None:
            if cap is not None and self.add_param(cap[0], 1.0, bounds=(0.0, cap[1] + 1.0)) > cap[1]:
                return None
            return self.add_scores(unit, clean, init=init), self.add_param(name, delta, initial=initial, bounds=bounds)
        args = {"unit": unit, "deltas": clean, "init": init, "name": name, "delta": delta, "initial": initial, "bounds": bounds, "cap": cap}
        call = lambda: self.inner.add_scores_and_param(unit, clean, init=init, name=name, delta=delta, initial=initial, bounds=bounds, cap=cap)  # noqa: E731
        written = self._write("scores", len(clean), "add_scores_and_param", args, call, lambda: self._capped_known(unit, clean, init, name, delta, initial, bounds, cap))
        if cap is not None:  # the count as far as this process knows (the store's own is not read back)
            self._params[cap[0]] = _bounded(float(self._params.get(cap[0], 0.0)) + 1.0, (0.0, cap[1] + 1.0))
        if written is None:
            return None
        new, value = written
        self._remember_scores(unit, {k: ScoreRow(float(v), 0, time.time()) for k, v in new.items()}, only_known=True)
        self._params[name] = value
        return new, value

    def _capped_known(
        self, unit: str, deltas: Mapping[str, float], init: float, name: str, delta: float, initial: float,
        bounds: tuple[float, float] | None, cap: tuple[str, float] | None,
    ) -> tuple[dict[str, float], float] | None:
        """What ``add_scores_and_param`` would return, from the last known scores and parameters."""
        if cap is not None and _bounded(float(self._params.get(cap[0], 0.0)) + 1.0, (0.0, cap[1] + 1.0)) > cap[1]:
            return None
        return self._step_known(unit, deltas, init), _bounded(float(self._params.get(name, initial)) + delta, bounds)

    def _one(self, write: Callable[[], Any]) -> int:
        try:
            write()
            return 1
        except StoreError:
            return 0

    # ------------------------------------------------------------------ reads (last known while failing)

    def get_scores(self, unit: str, ids: Iterable[str] | None = None) -> dict[str, ScoreRow]:
        wanted = None if ids is None else list(ids)
        rows = self._read(lambda: self.inner.get_scores(unit, wanted))
        if rows is _FAILED:
            known = self._scores.get(unit, {})
            return dict(known) if wanted is None else {i: known[i] for i in wanted if i in known}
        self._remember_scores(unit, rows)
        return rows

    def get_param(self, name: str, default: Any = None) -> Any:
        value = self._read(lambda: self.inner.get_param(name, _FAILED))
        if value is _FAILED:
            return self._params.get(name, default)
        self._params[name] = value
        return value

    def scores_changed_at(self, unit: str) -> float | None:
        value = self._read(lambda: self.inner.scores_changed_at(unit))
        if value is _FAILED:
            return self._changed.get(unit)
        self._changed[unit] = value
        return value

    def scores_changed_since(self, unit: str, since: float, *, limit: int = 10_000) -> dict[str, ScoreRow] | None:
        """The store's ``scores_changed_since``; ``None`` (read them all again) when it has none, and
        no change (``{}``) while it fails: asks go on with the last known scores."""
        if getattr(type(self.inner), "scores_changed_since", None) is None:
            return None
        rows = self._read(lambda: self.inner.scores_changed_since(unit, since, limit=limit))
        if rows is _FAILED:
            return {}
        if rows:
            self._remember_scores(unit, rows, only_known=True)
        return rows

    def last_event(self, kind: str, *, framework: str | None, query_id: str) -> Event | None:
        value = self._read(lambda: self.inner.last_event(kind, framework=framework, query_id=query_id))
        return self._recent.get((kind, framework, query_id)) if value is _FAILED else value

    def _read(self, read: Callable[[], Any]) -> Any:
        """``read()``, or ``_FAILED`` at once while the circuit is open or when it fails with a store fault."""
        if self._cause is not None:
            return _FAILED
        try:
            return read()
        except Exception as exc:
            cause = classify(exc)
            if cause is None:
                raise
            group = getattr(self._local, "group", None)
            if group is not None and group.tx is not None and group.cause is None:
                group.cause = cause  # the group's transaction is lost with the connection
            self._trip(cause, exc)
            return _FAILED

    def _remember_scores(self, unit: str, rows: Mapping[str, ScoreRow], *, only_known: bool = False) -> None:
        known = self._scores.setdefault(unit, {})
        for key, row in rows.items():
            if key in known:
                known[key] = row
            elif not only_known and self._n_known < _KNOWN_SCORES:
                known[key] = row
                self._n_known += 1

    def _step_known(self, unit: str, deltas: Mapping[str, float], init: float) -> dict[str, float]:
        """What ``add_scores`` would return, from the last known scores (the step itself is spilled)."""
        known = self._scores.setdefault(unit, {})
        out = {}
        for key, delta in deltas.items():
            row = known.get(key)
            out[key] = (init if row is None else row.raw) + float(delta)
            if row is None:
                self._n_known += 1
            known[key] = ScoreRow(out[key], 0, time.time())
        return out

    # ------------------------------------------------------------------ wait=True

    def expect(self, event: Event) -> None:
        """Watch whether ``event`` is committed (see :meth:`committed`)."""
        with self._lock:
            self._expected[id(event)] = [event, None]

    def committed(self, event: Event) -> bool | None:
        """Stop watching ``event``: ``True`` once its write committed, ``False`` when it failed, ``None`` if
        it was never written."""
        with self._lock:
            record = self._expected.pop(id(event), None)
        return None if record is None else record[1]

    def _mark(self, events: Iterable[Event], committed: bool) -> None:
        if not self._expected:
            return
        with self._lock:
            for event in events:
                record = self._expected.get(id(event))
                if record is not None and record[0] is event:
                    record[1] = committed

    # ------------------------------------------------------------------ the breaker

    def _write(
        self, what: str, n: int, op: str, args: Any, call: Callable[[], Any], fallback: Any,
        events: Iterable[Event] = (), *, batch: bool = False,
    ) -> Any:
        """Run ``call``; on a store fault (or while the circuit is open) spill the write and return the
        ``fallback`` (called when callable). A rejected write is counted and raised; a rejected
        ``batch`` is raised uncounted (the caller retries its items one by one)."""
        group = getattr(self._local, "group", None)
        if group is not None and group.tx is not None:
            return self._grouped(group, (what, n, op, args, call, fallback, tuple(events)), batch=batch)
        if getattr(self._local, "depth", 0):
            return call()
        if self._cause is None and not self.spill.pending or self._recover():
            try:
                result = call()
            except Exception as exc:
                cause = classify(exc)
                if cause is None:
                    if batch:
                        raise
                    with self._lock:
                        self.faults.failed[(what, "rejected")] += n
                        self.faults.lost[(what, "rejected")] += n
                    self._mark(events, False)
                    raise
                self._trip(cause, exc)
            else:
                self._mark(events, True)
                return result
        self._spill(what, n, op, args, events)
        return fallback() if callable(fallback) else fallback

    def _spill(self, what: str, n: int, op: str, args: Any, events: Iterable[Event]) -> None:
        """Append the write to the spill (``args``: its arguments, or a function building them)."""
        with self._lock:
            cause = self._cause or "store failing"
            self.faults.failed[(what, cause)] += n
            try:
                kept = args() if callable(args) else args
                self.spill.append({"uid": uuid.uuid4().hex, "op": op, "what": what, "n": n, "args": kept})
                self.faults.spilled += n
            except (SpillFull, OSError, ValueError, TypeError) as exc:
                reason = "spill full" if isinstance(exc, SpillFull) else f"spill failed ({type(exc).__name__})"
                self.faults.lost[(what, reason)] += n
                log.debug("triage store: %d %s lost: %s", n, what, exc)
        events = list(events)
        self._mark(events, False)
        for event in events:
            key = (event.kind, getattr(event, "framework", None), getattr(event, "query_id", None))
            if key[2] is not None and event.kind in ("retrieval", "generation"):
                self._recent[key] = event  # type: ignore[index]
                self._recent.move_to_end(key)  # type: ignore[arg-type]
                if len(self._recent) > _RECENT_EVENTS:
                    self._recent.popitem(last=False)

    def _trip(self, cause: str, exc: BaseException) -> None:
        """Open the circuit (one warning line per outage)."""
        with self._lock:
            first = self._cause is None
            self._cause = cause
            self._next_probe = time.monotonic() + self._backoff
        if first:
            log.warning(
                "triage store %s is failing (%s: %s); writes go to the spill file %s and are replayed when "
                "it is back, asks use the last known scores",
                self.inner.url, cause, " ".join(str(exc).split())[:200], self.spill.path,
            )  # fmt: skip

    def _recover(self) -> bool:
        """Probe the store and replay the spill when due; whether writes may go to the store again."""
        if time.monotonic() < self._next_probe or not self._replaying.acquire(blocking=False):
            return False
        try:
            return self._probe_and_replay()
        finally:
            self._replaying.release()

    def replay(self) -> bool:
        """Probe the store and replay the spill now (waits for a replay under way); whether it is empty."""
        with self._replaying:
            return self._probe_and_replay()

    def _probe_and_replay(self) -> bool:
        try:
            ping = getattr(self.inner, "ping", None)
            if ping is not None:
                ping()
            self._replay_all()
        except Exception as exc:  # noqa: BLE001 - any failure keeps the circuit open
            cause = classify(exc) or "replay failed"
            with self._lock:
                self._backoff = min(self._max_retry, self._backoff * 2)
            self._trip(cause, exc)
            return False
        with self._lock:
            if self.spill.pending:
                return False
            was, self._cause, self._backoff = self._cause, None, self._retry
        if was is not None:
            log.warning("triage store %s is back: %d spilled write(s) stored", self.inner.url, self.faults.replayed)
            self._record_faults()
        return True

    def _record_faults(self) -> None:
        if self.run_id is not None and self.faults:
            with contextlib.suppress(Exception):
                self.inner.record_faults(self.run_id, self.faults.to_dict())

    def _replay_all(self) -> None:
        while True:
            entries = self.spill.read(_REPLAY_GROUP)
            if not entries:
                return
            counts = replay_entries(self.inner, [entry for _, entry in entries])
            with self._lock:
                self.faults.replayed += counts[0]
                for (what, cause), n in counts[1].items():
                    self.faults.lost[(what, cause)] += n
            self.spill.advance(entries[-1][0])

    def _adopt_orphans(self) -> int:
        """Replay the spill files of exited processes that wrote to this store; how many items."""
        adopted = 0
        for path in sorted(self._dir.glob(f"{self._key}-*.jsonl")) if self._dir.is_dir() else ():
            pid = path.name.split("-")[1]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            claimed = path.with_name(f"{path.stem}.adopted-{os.getpid()}")
            try:
                path.rename(claimed)
            except OSError:
                continue  # another process adopted it first
            try:
                adopted += replay_file(self.inner, claimed)
                claimed.unlink()
            except Exception as exc:  # noqa: BLE001 - left for the next process
                log.warning("triage store %s: could not replay %s yet: %s", self.inner.url, path, exc)
                with contextlib.suppress(OSError):
                    claimed.rename(path)
        if adopted:
            log.warning("triage store %s: %d write(s) spilled by an exited process stored", self.inner.url, adopted)
        return adopted


_FAILED = object()


def _aborted(exc: BaseException) -> bool:
    """Whether ``exc`` says the transaction was already failed (an earlier statement of a group)."""
    current: BaseException | None = exc
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ == "InFailedSqlTransaction":
            return True
        current = current.__cause__ or current.__context__
    return False


def _no_commit() -> None:
    """What :meth:`GuardedStore.group` yields when it groups nothing."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _bounded(value: float, bounds: tuple[float, float] | None) -> float:
    return value if bounds is None else min(max(value, bounds[0]), bounds[1])


def _row_dict(row: MetricRow, ts: float | None = None) -> dict[str, Any]:
    return {
        "scope": row.scope, "scope_id": row.scope_id, "name": row.name, "value": row.value,
        "reason": row.reason, "run_id": row.run_id, "framework": row.framework,
        "retriever": row.retriever, "details": dict(row.details), "n": row.n,
        "ts": row.ts if row.ts is not None else ts,
    }  # fmt: skip


def replay_file(store: Store, path: Path) -> int:
    """Replay a whole spill file into ``store``; how many items were stored."""
    spill = Spill(path, max_bytes=path.stat().st_size + 1)
    stored = 0
    while entries := spill.read(_REPLAY_GROUP):
        stored += replay_entries(store, [entry for _, entry in entries])[0]
        spill._offset = entries[-1][0]
    return stored


def replay_entries(store: Store, entries: list[dict[str, Any]]) -> tuple[int, Counter[tuple[str, str]]]:
    """Apply spilled writes in order, in one transaction, each at most once (``store.claim_replay``).

    :return: items stored, and items the store rejected by ``(what, "rejected on replay")``.
    :raises StoreError: a store fault; nothing of this group was applied.
    """
    stored, rejected = 0, Counter[tuple[str, str]]()
    with store.transaction():
        for entry in entries:
            try:
                with store.transaction():  # a savepoint: a rejected entry undoes only itself
                    if store.claim_replay(str(entry["uid"])):
                        _apply(store, entry["op"], entry["args"])
                stored += int(entry.get("n", 1))
            except Exception as exc:
                if classify(exc) is not None:
                    raise
                rejected[(str(entry.get("what", "writes")), "rejected on replay")] += int(entry.get("n", 1))
                log.warning("triage store: a spilled %s write was rejected on replay: %s", entry.get("op"), exc)
    return stored, rejected


def _apply(store: Store, op: str, args: dict[str, Any]) -> None:
    if op == "events":
        for text, ts in args["events"]:
            store.record_event(from_json(text), args["run_id"], ts=ts)
    elif op == "metrics":
        store.record_metrics([MetricRow(**row) for row in args["rows"]], run_id=args["run_id"])
    elif op == "add_scores":
        store.add_scores(args["unit"], args["deltas"], init=args["init"])
    elif op == "add_scores_and_param":
        cap = args.get("cap")
        if cap is not None and store.add_param(cap[0], 1.0, bounds=(0.0, cap[1] + 1.0)) > cap[1]:
            return  # over the cap when replayed: only the counter changes, as it would have then
        store.add_scores(args["unit"], args["deltas"], init=args["init"])
        _apply(store, "add_param", args)
    elif op == "set_score":
        store.set_score(args["unit"], args["id"], args["raw"])
    elif op == "set_param":
        store.set_param(args["name"], args["value"])
    elif op == "add_param":
        bounds = args["bounds"]
        store.add_param(args["name"], args["delta"], initial=args["initial"], bounds=None if bounds is None else tuple(bounds))
    elif op == "end_run":
        faults = dict(args["faults"] or {})
        if faults.get("pending"):  # written before the spill it counted was replayed (in order, just now)
            faults["replayed"] = int(faults.get("replayed", 0)) + int(faults["pending"])
            faults["pending"] = 0
        store.end_run(args["run_id"], dropped=args["dropped"], undelivered=args["undelivered"], faults=faults or None)
    else:
        raise StoreError(f"unknown spilled write {op!r}")
