"""Store faults never lie, never stall the host, never lose silently (issue #34).

Real failures on real stores: a SQLite file that cannot grow (``PRAGMA max_page_count`` at its
current size: SQLite answers ``SQLITE_FULL``, "database or disk is full", exactly as on a full disk),
and a PostgreSQL server stopped mid-run (``pg_ctl stop``) and started again. Each test checks that
every emitted event is either stored after recovery or counted with its cause, that
``emit_feedback(wait=True)`` never says True for a feedback that was not stored, and that synchronous
asks stay within the hook budget while the store is down.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import FeedbackEvent
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import SQLiteStore, open_store
from triage_plugins.store.guard import GuardedStore, StoreFaults, classify, describe_faults, replay_file


class SmallDisk(SQLiteStore):
    """A real SQLite store whose file may not grow while :attr:`full` (a full disk, to SQLite)."""

    full = False

    @contextmanager
    def _tx(self):
        with self._lease() as handle:
            if handle.depth == 0:
                pages = handle.db.execute("PRAGMA page_count").fetchone()[0] if self.full else 2**30
                handle.db.execute(f"PRAGMA max_page_count = {pages}")
        with super()._tx() as db:
            yield db


def _feedback(i: int) -> FeedbackEvent:
    return FeedbackEvent("t", f"q{i}", (i % 5) / 4, "human", "x" * 400)  # ~0.5 kB: pages fill fast


def _stored_queries(store) -> list[str]:
    return [e.query_id for e in store.events("feedback")]


def _check_accounting(faults: dict, emitted: int, stored: int) -> None:
    """Every event is stored or counted lost, and the counts add up."""
    failed = sum(n for causes in faults.get("failed", {}).values() for n in causes.values())
    lost = faults.get("lost", {}).get("events", {})
    assert faults.get("pending", 0) == 0
    assert failed == faults["replayed"] + sum(n for c in faults.get("lost", {}).values() for n in c.values())
    assert stored + sum(lost.values()) == emitted


def test_a_full_disk_loses_no_event_silently_and_wait_never_lies(tmp_path):
    path = tmp_path / "full.sqlite"
    store = SmallDisk(path)
    manager = TriageManager(store, entry_points=False, spill_dir=tmp_path / "spill", schedule_delay=0)
    guard = manager.store
    assert isinstance(guard, GuardedStore)
    guard._retry = guard._backoff = 0.05
    run = manager.start_run("serve")
    said_durable: list[str] = []
    emitted = 0
    for phase, full in (("before", False), ("full", True), ("after", False)):
        store.full = full
        if not full:
            time.sleep(0.1)  # the next write probes the store again
        for i in range(emitted, emitted + 300):
            if manager.emit_feedback(_feedback(i), wait=i % 10 == 0) and i % 10 == 0:
                said_durable.append(f"q{i}")
        emitted += 300
        if phase == "full":
            assert guard.degraded and manager.write_failures["failed"]["events"]["disk full"] > 0
    manager.close()
    with open_store(path, readonly=True) as check:
        stored = _stored_queries(check)
        (row,) = [r for r in check.runs() if r.id == run]
    assert len(stored) == len(set(stored)) == emitted  # replayed once each, none lost
    assert set(said_durable) <= set(stored)
    assert not any(f"q{i}" in said_durable for i in range(300, 600))  # wait=True said False on a full disk
    assert row.faults["failed"]["events"]["disk full"] > 0
    _check_accounting(dict(row.faults), emitted, len(stored))
    assert "disk full" in describe_faults(row.faults)


def test_a_store_that_never_comes_back_keeps_the_spill_for_the_next_process(tmp_path):
    path, spill = tmp_path / "full.sqlite", tmp_path / "spill"
    store = SmallDisk(path)
    store.full = True
    manager = TriageManager(store, entry_points=False, spill_dir=spill, schedule_delay=0)
    manager.start_run("serve")
    for i in range(200):
        manager.emit_feedback(_feedback(i))
    assert manager.emit_feedback(_feedback(200), wait=True) is False
    manager.close(timeout=5)
    faults = manager.write_failures
    assert faults["replayed"] == 0 and not faults["lost"]
    assert faults["pending"] == sum(faults["failed"]["events"].values()) + 1  # and the run's end
    (left,) = spill.glob("*.jsonl")
    store.close()
    # the disk has room again; the spill is an exited process's: a later guard adopts and replays it
    left.rename(left.with_name(left.name.replace(f"-{__import__('os').getpid()}-", "-999999999-")))
    with SQLiteStore(path) as fresh:
        guard = GuardedStore(fresh, spill_dir=spill)
        assert guard.adopted == sum(faults["failed"]["events"].values()) + 1
        assert len(_stored_queries(fresh)) == 201
        assert not list(spill.glob("*.jsonl"))
        (row,) = fresh.runs()
        assert row.ended_at is not None and row.faults["pending"] == 0


def test_a_replayed_spill_is_applied_once(tmp_path):
    path = tmp_path / "s.sqlite"
    store = SmallDisk(path)
    guard = GuardedStore(store, spill_dir=tmp_path / "spill")
    store.full = True
    written = 0
    while not guard.degraded:  # the free space left in the file's pages fills up first
        guard.record_events([_feedback(written)])
        written += 1
    guard.add_scores("triple", {"a": -5.0})
    assert guard.faults.failed[("scores", "disk full")] == 1 and guard.faults.spilled == 2
    assert guard.get_scores("triple", ["a"])["a"].raw == 95.0  # last known, while failing
    store.full = False
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(guard.spill.path.read_bytes())
    assert guard.replay() and not guard.degraded
    assert replay_file(store, copy) == 2  # replayed a second time: the store applies nothing twice
    assert store.get_scores("triple", ["a"])["a"].raw == 95.0
    assert _stored_queries(store) == [f"q{i}" for i in range(written)]
    store.close()


def test_a_staleness_look_while_the_store_fails_changes_no_cached_score(tmp_path):
    store = SmallDisk(tmp_path / "s.sqlite")
    guard = GuardedStore(store, spill_dir=tmp_path / "spill")
    guard.add_scores("triple", {"a": 1.0})
    assert {k: r.raw for k, r in guard.scores_changed_since("triple", 0.0).items()} == {"a": 101.0}
    store.full = True
    written = 0
    while not guard.degraded:
        guard.record_events([_feedback(written)])
        written += 1
    assert guard.scores_changed_since("triple", 0.0) == {}  # no news: asks keep the last known scores
    store.close()


def test_faults_are_classified_by_cause(tmp_path):
    import sqlite3

    from triage_plugins.contract.errors import StoreError

    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13
    assert classify(StoreError("write failed")) is None
    wrapped = StoreError("write failed and was rolled back")
    wrapped.__cause__ = full
    assert classify(wrapped) == "disk full"
    assert classify(OSError(28, "No space left on device")) == "disk full"
    constraint = sqlite3.IntegrityError("FOREIGN KEY constraint failed")
    constraint.sqlite_errorcode = 787
    rejected = StoreError("unknown run id")
    rejected.__cause__ = constraint
    assert classify(rejected) is None
    assert StoreFaults().to_dict() == {}


def test_a_rejected_write_is_counted_and_raised(tmp_path):
    from triage_plugins.contract.errors import StoreError

    with SQLiteStore(tmp_path / "s.sqlite") as store:
        guard = GuardedStore(store, spill_dir=tmp_path / "spill")
        with pytest.raises(StoreError):
            guard.record_event(_feedback(1), run_id="no-such-run")
        assert guard.faults.lost[("events", "rejected")] == 1 and not guard.degraded
        assert guard.record_events([_feedback(2), _feedback(3)], run_id="no-such-run") == 0
        assert guard.faults.lost[("events", "rejected")] == 3


# --------------------------------------------------------------------------- PostgreSQL outage


@pytest.fixture
def own_postgres():
    """A PostgreSQL cluster of this test alone, so it can be stopped without harming other tests."""
    pytest.importorskip("psycopg")
    pg = pytest.importorskip("triage_tests_pgserver")
    if not pg.binaries():
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl)")
    cluster = pg.start_cluster()
    url, drop = pg.fresh_database(cluster.url)
    yield cluster, url
    cluster.stop()


def test_a_postgres_outage_stalls_no_ask_and_loses_no_event(own_postgres, tmp_path):
    cluster, url = own_postgres
    manager = TriageManager(
        url, entry_points=False, spill_dir=tmp_path / "spill", schedule_delay=0, hook_budget=0.25,
        config=TriageConfig(reweight=True),
    )  # fmt: skip
    guard = manager.store
    guard._retry = guard._backoff = 0.2
    run = manager.start_run("serve")
    ids = [f"t{i}" for i in range(20)]
    said_durable: list[str] = []
    asks: list[float] = []
    emitted = 0

    def phase(n: int) -> None:
        nonlocal emitted
        for i in range(emitted, emitted + n):
            if manager.emit_feedback(_feedback(i), wait=i % 10 == 0) and i % 10 == 0:
                said_durable.append(f"q{i}")
            start = time.perf_counter()
            manager.learned_scores("triple", ids)
            asks.append(time.perf_counter() - start)
        emitted += n

    phase(100)
    cluster.pause()
    outage = len(said_durable)
    phase(100)
    assert len(said_durable) == outage  # wait=True never True while the server is down
    assert manager.write_failures["failed"]["events"]["connection lost"] > 0
    outage_asks = asks[100:]
    cluster.resume()
    time.sleep(0.5)
    phase(100)
    manager.close()
    with open_store(url, readonly=True) as check:
        stored = _stored_queries(check)
        (row,) = [r for r in check.runs() if r.id == run]
    assert len(stored) == len(set(stored)) == emitted
    assert set(said_durable) <= set(stored)
    _check_accounting(dict(row.faults), emitted, len(stored))
    assert max(outage_asks) < 0.25, sorted(outage_asks)[-5:]


def test_store_info_and_report_show_failed_writes(tmp_path):
    from typer.testing import CliRunner

    from triage_plugins.cli import app

    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as store:
        run = store.start_run("serve")
        store.end_run(run, faults={"failed": {"events": {"disk full": 7}}, "lost": {"events": {"spill full": 2}},
                                   "spilled": 5, "replayed": 5, "pending": 0})  # fmt: skip
    result = CliRunner().invoke(app, ["store", "info", str(path)])
    assert result.exit_code == 0
    assert "7 store writes failed (disk full: 7 events); 5 stored after recovery, 2 lost (spill full: 2 events)" in (
        " ".join(result.output.split())
    )
    report = CliRunner().invoke(app, ["report", str(path)])
    assert report.exit_code == 0 and "7 store writes failed" in " ".join(report.output.split())
