"""Group commits on a SQLite file store: a delivery batch's writes commit in one transaction (as on
PostgreSQL, ``test_group_commits.py``), ``emit_feedback(wait=True)`` returns True only once another
connection sees the event (a rejected write in a group: ``test_group_commits.py``, both backends). ``:memory:`` stores,
whose one connection every thread shares, never group.
"""

from __future__ import annotations

import sqlite3
import threading

from triage_plugins.contract.events import FeedbackEvent, GenerationEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store.sqlite import SQLiteStore


def _query(manager: TriageManager, qid: str, k: int) -> None:
    triples = tuple(Triple.of("Inception", f"r{(k + j) % 12}", f"O{(k + j) % 12}") for j in range(3))
    answer = triples[0].object
    manager.emit_retrieval(RetrievalEvent("b", qid, "Who?", subgraph=Subgraph(triples)))
    manager.emit_generation(
        GenerationEvent("b", qid, answer, answer_mentions=(answer,), answer_grounding={answer: answer})
    )


def test_file_stores_group_and_memory_stores_do_not(tmp_path):
    store = SQLiteStore(tmp_path / "s.sqlite")
    assert store.group_commits is True
    store.close()
    memory = SQLiteStore(":memory:")
    assert memory.group_commits is False
    memory.close()
    assert SQLiteStore(tmp_path / "s.sqlite", readonly=True).group_commits is False


def _learn(path, tmp_path, *, grouped: bool, n: int = 30) -> tuple[dict[str, float], list[str]]:
    manager = TriageManager(path, entry_points=False, spill_dir=tmp_path / "spill", schedule_delay=0.05)
    manager._guard().inner.group_commits = grouped
    for i in range(n):
        _query(manager, f"q{i}", i)
        manager.emit_feedback(FeedbackEvent("b", f"q{i}", 1.0 if i % 3 else 0.0))
    assert manager.flush(30)
    manager.close()
    with SQLiteStore(path, readonly=True) as store:
        scores = {k: round(r.raw, 9) for k, r in store.get_scores("triple").items()}
        feedback = sorted(e.query_id for e in store.events("feedback"))
    return scores, feedback


def test_grouped_batches_learn_what_one_commit_per_write_learns(tmp_path):
    grouped = _learn(tmp_path / "g.sqlite", tmp_path / "g", grouped=True)
    single = _learn(tmp_path / "s.sqlite", tmp_path / "s", grouped=False)
    assert grouped[0] and grouped == single
    assert len(grouped[1]) == 30


def test_wait_true_returns_after_the_commit_another_connection_sees(tmp_path):
    path = tmp_path / "w.sqlite"
    manager = TriageManager(path, entry_points=False, spill_dir=tmp_path / "spill")
    assert manager._guard().inner.group_commits
    answers: list[bool] = []
    lock = threading.Lock()

    def host(t: int) -> None:
        other = sqlite3.connect(path)
        try:
            for i in range(10):
                qid = f"t{t}-q{i}"
                _query(manager, qid, t + i)
                durable = manager.emit_feedback(FeedbackEvent("b", qid, 1.0), wait=True)
                sql = "SELECT count(*) FROM events WHERE kind = 'feedback' AND query_id = ?"
                seen = other.execute(sql, (qid,)).fetchone()[0] == 1
                with lock:
                    answers.append(durable and seen)
        finally:
            other.close()

    hosts = [threading.Thread(target=host, args=(t,)) for t in range(3)]
    for h in hosts:
        h.start()
    for h in hosts:
        h.join()
    manager.close()
    assert answers == [True] * 30
    assert manager.write_failures == {}
