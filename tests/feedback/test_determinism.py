"""Learned scores are a pure function of the ordered events and feedback, whatever the delivery
timing (DESIGN §4, "Credit in the real frameworks"; issue #30).

One fixed sequence of events (the reference pipeline's graph, retrievals, generations, rerank
requests and gold feedback over a seeded world) is replayed through real managers with the default
plugins: synchronous, and on the background worker with other dispatch settings, seeded random
sleeps on the worker's lane and the host's, and items held while the host is busy. Every replay
must end with the same learned scores and α, bit for bit.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from triage_plugins import hookimpl
from triage_plugins.apps.demo import answer_is_correct, run_demo
from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import FeedbackEvent, RerankRequest
from triage_plugins.offline.extractor import extract_chunk
from triage_plugins.offline.world import generate_world
from triage_plugins.reference.pipeline import ReferencePipeline
from triage_plugins.runtime.manager import TriageManager

Tape = list[tuple[str, Any]]


class _Recorder:
    """Records every notification in delivery order and every rerank request (answers nothing)."""

    triage_name = "test.tape"

    def __init__(self) -> None:
        self.items: Tape = []

    @hookimpl
    def triage_graph(self, event):
        self.items.append(("graph", event))

    @hookimpl
    def triage_retrieval(self, event):
        self.items.append(("retrieval", event))

    @hookimpl
    def triage_generation(self, event):
        self.items.append(("generation", event))

    @hookimpl
    def triage_feedback(self, event):
        self.items.append(("feedback", event))

    @hookimpl
    def triage_rerank(self, request):
        self.items.append(("rerank", request))


@pytest.fixture(scope="module")
def tape() -> Tape:
    """Two passes of gold feedback over the training half of seed 4's world, as the host emitted them
    (reweighting off while recording, so the sequence does not depend on what was learned)."""
    world = generate_world(4)
    recorder = _Recorder()
    with TriageManager(
        None, config=TriageConfig(reweight=False), entry_points=False, synchronous=True
    ) as manager:
        manager.register(recorder)
        pipeline = ReferencePipeline(manager)
        pipeline.index_chunks(world.chunks(), extract_chunk, ontology=world.ontology())
        for q in world.questions[0::2] * 2:
            answer = pipeline.ask(q.text, retriever="krag", gold=q.gold())
            pipeline.feedback(answer.query_id, 1.0 if answer_is_correct(answer.text, q.answers) else 0.0)
    return [(k, e) for k, e in recorder.items if k != "rerank" or e.query_id is not None]


def _replay(
    tape: Tape,
    *,
    synchronous: bool = False,
    host_sleep: Callable[[], float] | None = None,
    lane_sleep: Callable[[], float] | None = None,
    busy: bool = False,
    **dispatch: Any,
) -> tuple[dict[str, float], float]:
    """Emit ``tape`` in order through a fresh manager with the default plugins; its learned triple
    scores and α once everything was delivered."""
    config = TriageConfig(reweight=False)  # rerank requests only leave their S_r with the learner
    manager = TriageManager(
        ":memory:", config=config, entry_points=False, synchronous=synchronous, **dispatch
    )
    try:
        emit = {
            "graph": manager.emit_graph,
            "retrieval": manager.emit_retrieval,
            "generation": manager.emit_generation,
            "feedback": manager.emit_feedback,
            "rerank": manager.rerank,  # synchronous: the learner keeps its S_r for the backward pass
        }
        for kind, event in tape:
            if busy and kind in ("rerank", "retrieval", "generation"):
                with manager.host_busy():  # items are held on the host's side meanwhile
                    emit[kind](event)
            else:
                emit[kind](event)
            if lane_sleep is not None:  # delays every later item on the learner's (default) lane
                manager.defer(time.sleep, lane_sleep())
            if host_sleep is not None:
                time.sleep(host_sleep())
        assert manager.flush(timeout=30)
        learner = manager.get_plugin("triage.feedback")
        return manager.learned_scores("triple"), learner.model().optimizer.alpha
    finally:
        manager.close()


def test_learned_scores_do_not_depend_on_delivery_timing(tape) -> None:
    assert sum(k == "feedback" for k, _ in tape) == 60
    scores, alpha = _replay(tape, synchronous=True)
    assert scores and any(v != 100.0 for v in scores.values()) and alpha != 0.5  # something was learned
    lane, host = random.Random(1), random.Random(2)
    timings: dict[str, dict[str, Any]] = {
        "background worker, defaults": {},
        "no batching delay, one item per batch": {"schedule_delay": 0.0, "batch_size": 1},
        "long batching delay, large batches": {"schedule_delay": 0.2, "batch_size": 1024},
        "slow worker lane": {"lane_sleep": lambda: lane.random() * 0.004},
        "slow host, items held while busy": {"host_sleep": lambda: host.random() * 0.004, "busy": True},
        "both, no batching delay": {
            "schedule_delay": 0.0,
            "lane_sleep": lambda: lane.random() * 0.002,
            "host_sleep": lambda: host.random() * 0.002,
            "busy": True,
        },
    }
    for name, timing in timings.items():
        assert _replay(tape, **timing) == (scores, alpha), name  # bit for bit, not approximately


def test_demo_rounds_do_not_depend_on_delivery_timing(monkeypatch) -> None:
    """``run_demo`` with feedback delivered inline, on the worker, and with a slow host in the rounds
    (seeded sleeps before each feedback-phase query: a loaded CI machine) measures the same rounds."""

    def rounds() -> list[dict[str, Any]]:
        return run_demo(seed=4, feedback_rounds=1, retrievers=("krag",)).rounds

    monkeypatch.setenv("TRIAGE_SYNC", "1")
    inline = rounds()
    monkeypatch.delenv("TRIAGE_SYNC")
    assert rounds() == inline
    ask, rng = ReferencePipeline.ask, random.Random(3)

    def slow_ask(self: ReferencePipeline, *args: Any, **kwargs: Any) -> Any:
        if self.manager.config.reweight:  # the feedback rounds only, where the timing mattered
            time.sleep(rng.random() * 0.04)
        return ask(self, *args, **kwargs)

    monkeypatch.setattr(ReferencePipeline, "ask", slow_ask)
    assert rounds() == inline


class _Learned:
    """A plugin on the other lane: it sees a feedback event only after the learner has learned it."""

    triage_name = "test.learned"

    def __init__(self) -> None:
        self.event = threading.Event()

    @hookimpl
    def triage_feedback(self, event):
        self.event.set()


@pytest.mark.parametrize(
    ("read", "what"),
    [("get_scores", "a raw score cached by ContributionScores._load"), ("get_param", "α, by reload_alpha")],
    ids=["score", "alpha"],
)
def test_a_rerank_racing_a_feedback_leaves_nothing_stale(tape, read: str, what: str) -> None:
    """The interleaving is forced: the host's rerank (reweighting on, its staleness look due) reads
    the store, the worker then learns a feedback, and only then is the host's read kept (``what``)."""
    retrieval = next(e for k, e in tape if k == "retrieval")
    generation = next(e for k, e in tape if k == "generation" and e.query_id == retrieval.query_id)
    graph = next(e for k, e in tape if k == "graph")
    ids = tuple(t.id for t in retrieval.subgraph.triples)
    probe = RerankRequest(retrieval.framework, retrieval.query, "triple", ids, (0.5,) * len(ids), "probe")
    feedback = FeedbackEvent(retrieval.framework, retrieval.query_id, 1.0, "gold")

    def run(race: bool) -> tuple[dict[str, float], float]:
        config = TriageConfig(reweight=True)
        manager = TriageManager(":memory:", config=config, entry_points=False, synchronous=not race)
        learned, host_read = _Learned(), threading.Event()
        manager.register(learned)
        original = getattr(manager.store, read)

        def host_reads_first(*args: Any) -> Any:
            value = original(*args)
            if race and threading.current_thread() is threading.main_thread() and not host_read.is_set():
                host_read.set()
                assert learned.event.wait(10), "the feedback was not learned"
            return value

        try:
            manager.emit_graph(graph)
            manager.emit_retrieval(retrieval)
            manager.emit_generation(generation)
            manager.emit_feedback(feedback)
            assert manager.flush(timeout=30)
            learner = manager.get_plugin("triage.feedback")
            learner.model().checked = -math.inf  # the host's staleness look is due (as 1 s later)
            setattr(manager.store, read, host_reads_first)
            if race:
                manager.defer(host_read.wait, 10)  # the worker learns only after the host's read
            learned.event.clear()
            manager.emit_feedback(feedback)
            manager.rerank(probe)  # reads α and the scores of the query's triples
            manager.emit_feedback(feedback)  # learned from what the learner holds in memory
            assert manager.flush(timeout=30)
            return manager.learned_scores("triple"), learner.model().optimizer.alpha
        finally:
            manager.close()

    assert run(race=True) == run(race=False), what
