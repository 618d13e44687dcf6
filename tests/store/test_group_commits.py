"""Group commits (issue #34): the writes of one delivery batch commit in one transaction of a real
PostgreSQL server, and ``emit_feedback(wait=True)`` still returns True only after that commit.

A rejected write in a group (on PostgreSQL and on a SQLite file, which groups too), or a connection killed before the commit (``pg_terminate_backend`` from
another session), rolls the group back; each of its writes is then done again on its own: every
write is stored exactly once or counted with its cause.
"""

from __future__ import annotations

import sys
import threading
import time

import psycopg
import pytest

from triage_plugins.contract.errors import StoreError
from triage_plugins.contract.events import (
    FeedbackEvent,
    GenerationEvent,
    Gold,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import open_store
from triage_plugins.store.guard import GuardedStore
from triage_plugins.store.postgres import PostgresStore


def _commits(url: str) -> int:
    """Transactions the server committed in the database (of sessions that ended, or reported)."""
    time.sleep(0.2)  # an ending session reports its counts as it exits
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        sql = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        return int(conn.execute(sql).fetchone()[0])


def _query(manager: TriageManager, qid: str, k: int) -> None:
    triples = tuple(Triple.of("Inception", f"r{(k + j) % 12}", f"O{(k + j) % 12}") for j in range(3))
    answer = triples[0].object
    manager.emit_retrieval(
        RetrievalEvent("b", qid, "Who?", subgraph=Subgraph(triples), gold=Gold(answers=(answer,)))
    )
    manager.emit_generation(
        GenerationEvent("b", qid, answer, answer_mentions=(answer,), answer_grounding={answer: answer})
    )


def _learn(url: str, tmp_path, *, grouped: bool, n: int = 40) -> tuple[dict, int]:
    """Feedback for ``n`` queries from one host thread, flushed once; the scores learned and the
    server's commits meanwhile."""
    PostgresStore.group_commits = grouped
    try:
        manager = TriageManager(url, entry_points=False, spill_dir=tmp_path / "spill", schedule_delay=0.05)
        before = _commits(url)
        for i in range(n):
            _query(manager, f"q{i}", i)
            manager.emit_feedback(FeedbackEvent("b", f"q{i}", 1.0 if i % 3 else 0.0))
        assert manager.flush(30)
        manager.close()  # its sessions end: the server has counted their commits
        commits = _commits(url) - before
    finally:
        PostgresStore.group_commits = True
    with open_store(url, readonly=True) as store:
        scores = {k: round(r.raw, 9) for k, r in store.get_scores("triple").items()}
        assert len(list(store.events("feedback"))) == n
    return scores, commits


def test_a_batch_commits_once_and_learns_what_one_commit_per_write_learns(postgres_server, tmp_path):
    pg = sys.modules["triage_tests_pgserver"]  # loaded by tests/conftest.py
    grouped_url, drop_grouped = pg.fresh_database(postgres_server.url)
    single_url, drop_single = pg.fresh_database(postgres_server.url)
    try:
        grouped, grouped_commits = _learn(grouped_url, tmp_path / "g", grouped=True)
        single, single_commits = _learn(single_url, tmp_path / "s", grouped=False)
    finally:
        drop_grouped()
        drop_single()
    assert grouped and grouped == single  # same scores, written in other transactions
    assert grouped_commits * 4 < single_commits, (grouped_commits, single_commits)


def test_concurrent_wait_true_callers_share_a_commit_and_each_is_stored(postgres_url, tmp_path):
    manager = TriageManager(postgres_url, entry_points=False, spill_dir=tmp_path / "spill")
    answers: list[bool] = []
    lock = threading.Lock()

    def host(t: int) -> None:
        with psycopg.connect(postgres_url, autocommit=True) as other:  # another session
            for i in range(15):
                qid = f"t{t}-q{i}"
                _query(manager, qid, t + i)
                durable = manager.emit_feedback(FeedbackEvent("b", qid, 1.0), wait=True)
                sql = "SELECT count(*) FROM events WHERE kind = 'feedback' AND query_id = %s"
                seen = other.execute(sql, (qid,)).fetchone()[0] == 1  # committed when it said so
                with lock:
                    answers.append(durable and seen)

    before = _commits(postgres_url)
    hosts = [threading.Thread(target=host, args=(t,)) for t in range(4)]
    for h in hosts:
        h.start()
    for h in hosts:
        h.join()
    manager.close()
    commits = _commits(postgres_url) - before
    assert answers == [True] * 60
    assert manager.write_failures == {}
    # one read per query by the hosts, plus the writes: one by one they are 4+ commits per query
    assert commits < 60 + 60 * 2, commits


def _event(qid: str) -> FeedbackEvent:
    return FeedbackEvent("b", qid, 1.0)


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_a_rejected_write_in_a_group_loses_only_itself(backend, request, tmp_path):
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else str(tmp_path / "r.sqlite")
    guard = GuardedStore(open_store(url), spill_dir=tmp_path / "spill")
    run = guard.start_run("test")
    good, bad = _event("good"), _event("bad")
    guard.expect(good)
    with guard.group():
        assert guard.add_scores("triple", {"a": 1.0}) == {"a": 101.0}
        guard.record_event(good, run)
        with pytest.raises(StoreError, match="unknown run id"):
            guard.record_event(bad, run_id="no-such-run")
        guard.add_param("steps", 1.0)
    assert guard.committed(good) is True
    assert guard.get_scores("triple")["a"].raw == 101.0
    assert guard.get_param("steps") == 1.0
    assert [e.query_id for e in guard.events("feedback")] == ["good"]
    assert guard.faults.to_dict()["lost"] == {"events": {"rejected": 1}}
    guard.close()


def test_a_connection_lost_before_the_commit_writes_each_write_again_once(postgres_url, tmp_path):
    guard = GuardedStore(open_store(postgres_url), spill_dir=tmp_path / "spill")
    run = guard.start_run("test")
    events = [_event(f"q{i}") for i in range(5)]
    for event in events:
        guard.expect(event)
    with guard.group():
        guard.record_events(events, run)
        guard.add_scores("triple", {"a": 2.0, "b": -1.0})
        (pid,) = guard.inner._local.conn.execute("SELECT pg_backend_pid()").fetchone()
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert [guard.committed(e) for e in events] == [True] * 5  # written again, on a new connection
    with open_store(postgres_url, readonly=True) as check:
        assert sorted(e.query_id for e in check.events("feedback")) == [f"q{i}" for i in range(5)]
        assert {k: r.raw for k, r in check.get_scores("triple").items()} == {"a": 102.0, "b": 99.0}
    assert not guard.degraded
    guard.close()
