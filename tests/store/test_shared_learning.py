"""Many workers learning from one store (DESIGN §7, issue 21): nothing learned is lost or stale.

Each test runs on one SQLite file and on one PostgreSQL database (a real server). Workers are real
processes, each with its own :class:`~triage_plugins.runtime.manager.TriageManager` and feedback learner.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import (
    FeedbackEvent,
    GenerationEvent,
    Gold,
    RerankRequest,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.store import open_store

GOOD = Triple.of("Inception", "directed_by", "Christopher Nolan")
BAD = Triple.of("Inception", "directed_by", "Steven Spielberg")  # a false alternative answer
OTHER = Triple.of("Inception", "released_in", "2010")
QUERY = "Who directed Inception?"
WORKERS = 8
PER_WORKER = int(os.environ.get("TRIAGE_TEST_SHARED_N", "500"))
#: Small α steps, so α stays inside its bounds and the serial result is α0 + Σ steps exactly.
OPTIONS = {"feedback.max_alpha_step": 1e-4, "feedback.eta_alpha": 1e-3, "feedback.staleness": 0.2}


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "shared.sqlite")
    return request.getfixturevalue("postgres_url")


def _manager(url: str, *, synchronous: bool = True, only_learning: bool = True):
    from triage_plugins.runtime.manager import TriageManager

    if only_learning:  # the recorder and the learner: what sharing is about
        os.environ["TRIAGE_DISABLE_PLUGINS"] = "triage.implementation,triage.usage,triage.gate,triage.otel"
    try:
        return TriageManager(
            store=url, config=TriageConfig(options=OPTIONS), entry_points=False, synchronous=synchronous
        )
    finally:
        os.environ.pop("TRIAGE_DISABLE_PLUGINS", None)


def _serve(manager, query_id: str, framework: str = "ref") -> None:
    """What an adapter emits for one answered query: its retrieval (with gold) and generation."""
    manager.emit_retrieval(
        RetrievalEvent(
            framework,
            query_id,
            QUERY,
            mentions=("Inception",),
            grounding={"Inception": "Inception"},
            subgraph=Subgraph((GOOD, BAD, OTHER)),
            gold=Gold(answers=("Christopher Nolan",)),
        )
    )
    manager.emit_generation(
        GenerationEvent(
            framework,
            query_id,
            "Christopher Nolan",
            answer_mentions=("Christopher Nolan",),
            answer_grounding={"Christopher Nolan": "Christopher Nolan"},
        )
    )


def _worker(url: str, worker: int, n: int, barrier, out) -> None:
    try:
        manager = _manager(url)
        learner = manager.get_plugin("triage.feedback")
        deltas: dict[str, float] = {}
        barrier.wait()
        for i in range(n):
            query_id = f"w{worker}-q{i}"
            _serve(manager, query_id)
            manager.emit_feedback(FeedbackEvent("ref", query_id, 1.0 if i % 3 else 0.0))
            for key, value in learner.last_update.deltas.items():
                deltas[key] = deltas.get(key, 0.0) + value
        out.put((worker, deltas, learner.model().optimizer.alpha_steps, dict(learner.unattributed)))
        manager.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        out.put((worker, repr(exc), 0.0, {}))


def test_concurrent_workers_lose_no_score_increment_and_no_alpha_step(url):
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(WORKERS), ctx.Queue()
    open_store(url).close()  # created and migrated once, as a deployment does before starting workers
    procs = [ctx.Process(target=_worker, args=(url, w, PER_WORKER, barrier, out)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    errors = [r[1] for r in results if isinstance(r[1], str)]
    assert not errors, errors
    expected: dict[str, float] = {}
    for _, deltas, _, unattributed in results:
        assert unattributed == {}
        for key, value in deltas.items():
            expected[key] = expected.get(key, 0.0) + value
    alpha_steps = sum(r[2] for r in results)
    with open_store(url) as store:
        rows = store.get_scores("triple")
        assert set(rows) == set(expected) and expected
        for key, total in expected.items():
            assert rows[key].raw == pytest.approx(100.0 + total, abs=1e-6)  # 0 lost increments
            # one increment per informative feedback that moved this triple, from every worker
        assert store.counts()["events"] == 3 * WORKERS * PER_WORKER
        assert abs(alpha_steps) > 0  # α did learn: the check below is not vacuous
        assert store.get_param("evorag.triple.alpha") == pytest.approx(0.5 + alpha_steps, abs=1e-9)


def test_feedback_at_another_worker_learns_and_the_first_worker_follows(url):
    a, b = _manager(url), _manager(url)
    try:
        request = RerankRequest("ref", QUERY, "triple", (GOOD.id, BAD.id), (0.5, 0.5), query_id="qa")
        a.config = TriageConfig(reweight=True, options=OPTIONS)
        before = a.rerank(request)
        assert before == pytest.approx([0.5, 0.5])  # both at the initial score, now cached at A
        _serve(a, "qa")  # A answered the query; B never saw it
        b.emit_feedback(FeedbackEvent("ref", "qa", 1.0), wait=True)
        learned = b.get_plugin("triage.feedback").last_update
        assert learned is not None and learned.deltas  # B learned from A's stored retrieval
        raw = {i: r.raw for i, r in b.store.get_scores("triple").items()}
        assert raw[GOOD.id] > 100.0 > raw[BAD.id]
        deadline = time.monotonic() + 0.2 + 1.0  # the staleness bound, plus slack for a loaded machine
        while a.rerank(request) == before and time.monotonic() < deadline:
            time.sleep(0.02)
        after = a.rerank(request)
        assert after[0] > after[1]  # A's ranking follows B's learning
        learner_a = a.get_plugin("triage.feedback")
        assert after == pytest.approx(learner_a.priorities([GOOD.id, BAD.id], [0.5, 0.5]).tolist())
        assert learner_a.model().scores.raw([GOOD.id]).tolist() == pytest.approx([raw[GOOD.id]])
    finally:
        a.close()
        b.close()


def test_a_worker_keeps_its_cache_through_its_own_learning_and_merges_anothers(url, monkeypatch):
    a, b = _manager(url), _manager(url)
    try:
        learner = a.get_plugin("triage.feedback")
        learner.options["staleness"] = 0.0  # a staleness look before every query
        _serve(a, "q0")
        a.emit_feedback(FeedbackEvent("ref", "q0", 1.0), wait=True)  # the cache is warm
        reads: list[object] = []
        get_scores = a.store.get_scores
        monkeypatch.setattr(a.store, "get_scores", lambda *args: reads.append(args) or get_scores(*args))
        for i in range(1, 6):
            _serve(a, f"q{i}")
            a.emit_feedback(FeedbackEvent("ref", f"q{i}", 1.0), wait=True)
        assert learner.last_update is not None and learner.last_update.deltas
        assert reads == []  # its own writes dropped nothing: no score read again
        _serve(b, "qb")
        b.emit_feedback(FeedbackEvent("ref", "qb", 0.0), wait=True)  # another worker moves the scores
        stored = {i: r.raw for i, r in b.store.get_scores("triple").items()}
        model = learner.model()
        assert model.scores.raw([GOOD.id]).tolist() != [stored[GOOD.id]]  # not seen yet
        learner._keep_fresh(model)
        assert model.scores.raw([GOOD.id, BAD.id]).tolist() == [stored[GOOD.id], stored[BAD.id]]
        assert reads == []  # merged from the changed rows, not read again one by one
    finally:
        a.close()
        b.close()


def test_a_merge_keeps_the_values_this_process_wrote_after_its_read():
    from triage_plugins.feedback.scores import ContributionScores

    scores = ContributionScores(None, "triple")
    assert scores.raw(["a"]).tolist() == [100.0]  # cached
    mark = scores.mark()
    scores.add({"a": 1.0})  # newer than the read that began at mark
    assert scores.merge({"a": 50.0}, mark) == 0 and scores.raw(["a"]).tolist() == [101.0]
    mark = scores.mark()
    assert scores.merge({"a": 50.0, "b": 7.0}, mark) == 1
    assert scores.raw(["a", "b"]).tolist() == [50.0, 100.0]  # b was not cached: read when asked
    mark = scores.mark()
    scores.refresh()
    assert scores.merge({"a": 60.0}, mark) == 0  # a read begun before a refresh is not kept


def test_unattributable_feedback_is_counted_and_logged_once(url, caplog):
    manager = _manager(url)
    try:
        with caplog.at_level("WARNING", logger="triage.plugins.feedback"):
            for i in range(3):
                manager.emit_feedback(FeedbackEvent("ref", f"never-served-{i}", 1.0), wait=True)
        learner = manager.get_plugin("triage.feedback")
        assert learner.unattributed == {"unknown query id": 3}
        assert len([r for r in caplog.records if "changed no score" in r.getMessage()]) == 1
        assert manager.store.counts()["events"] == 3  # recorded all the same
        assert manager.store.get_scores("triple") == {}
    finally:
        manager.close()


def _killed_child(url: str, n: int, conn) -> None:
    manager = _manager(url, synchronous=False)  # the background worker, as deployed
    for i in range(n):
        _serve(manager, f"k{i}")
        manager.emit_feedback(FeedbackEvent("ref", f"k{i}", 1.0), wait=True)
    conn.send("returned")
    time.sleep(60)  # killed before this ends; nothing after feedback() may be needed


def test_sigkill_right_after_feedback_wait_loses_nothing(url, tmp_path):
    n = 20
    open_store(url).close()
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_killed_child, args=(url, n, child))
    proc.start()
    assert parent.poll(120) and parent.recv() == "returned"
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL
    with open_store(url) as store:
        assert len(list(store.events("feedback"))) == n
        killed = {i: (r.raw, r.n_updates) for i, r in store.get_scores("triple").items()}
        alpha = store.get_param("evorag.triple.alpha")
    reference = _manager(str(tmp_path / "reference.sqlite"))  # the same feedback, never killed
    for i in range(n):
        _serve(reference, f"k{i}")
        reference.emit_feedback(FeedbackEvent("ref", f"k{i}", 1.0))
    expected = {i: (r.raw, r.n_updates) for i, r in reference.store.get_scores("triple").items()}
    assert {i: v[1] for i, v in killed.items()} == {i: v[1] for i, v in expected.items()}  # every update
    assert {i: v[0] for i, v in killed.items()} == pytest.approx({i: v[0] for i, v in expected.items()})
    assert killed[GOOD.id][0] > 100.0
    assert alpha == pytest.approx(reference.store.get_param("evorag.triple.alpha"))
    reference.close()
