"""The manager facade: isolation, blocking, tracing, background delivery, bounded queue."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from triage_plugins import hookimpl
from triage_plugins.contract.errors import ConfigError, EventError
from triage_plugins.contract.events import FeedbackEvent, GateDecision, RerankRequest, RetrievalEvent
from triage_plugins.runtime.manager import TriageManager


def _retrieval(qid: str = "q1") -> RetrievalEvent:
    return RetrievalEvent("test", qid, "What?")


class Boom:
    triage_name = "boom"

    @hookimpl
    def triage_retrieval(self, event):
        raise RuntimeError("boom")

    @hookimpl
    def triage_gate(self, event):
        raise ValueError("bad gate")

    @hookimpl
    def triage_rerank(self, request):
        raise KeyError("bad rerank")


class Seen:
    triage_name = "seen"

    def __init__(self) -> None:
        self.ids: list[str] = []

    @hookimpl
    def triage_retrieval(self, event):
        self.ids.append(event.query_id)


def test_raising_plugin_is_isolated_logged_once_and_others_still_run(caplog):
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    seen = Seen()
    manager.register(Boom())
    manager.register(seen)
    with caplog.at_level(logging.WARNING, logger="triage.manager"):
        for i in range(3):
            manager.emit_retrieval(_retrieval(f"q{i}"))
    assert seen.ids == ["q0", "q1", "q2"]
    assert manager.failures[("boom", "triage_retrieval", "RuntimeError")] == 3
    logged = [r for r in caplog.records if "boom raised RuntimeError" in r.getMessage()]
    assert len(logged) == 1
    # synchronous hooks degrade to the neutral answer
    assert manager.gate(_retrieval()).action == "proceed"
    assert manager.rerank(RerankRequest("t", "q", "triple", ("a",), (0.5,))) is None
    assert manager.failures[("boom", "triage_gate", "ValueError")] == 1


def test_disable_plugins_by_name(monkeypatch):
    monkeypatch.setenv("TRIAGE_DISABLE_PLUGINS", "seen, triage.recorder")
    manager = TriageManager(synchronous=True, entry_points=False)
    assert manager.register(Seen()) is None
    names = {p.name for p in manager.plugins()}
    assert "seen" not in names and "triage.recorder" not in names


def test_trace_logs_every_hook_call(monkeypatch, caplog):
    monkeypatch.setenv("TRIAGE_TRACE_PLUGINS", "1")
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    manager.register(Seen())
    with caplog.at_level(logging.INFO, logger="triage.trace"):
        manager.emit_retrieval(_retrieval())
        manager.gate(_retrieval())
    msgs = [r.getMessage() for r in caplog.records if r.name == "triage.trace"]
    assert any("call triage_retrieval -> [seen]" in m for m in msgs)
    assert any("call triage_gate" in m for m in msgs)


def test_background_delivery_and_flush():
    manager = TriageManager(synchronous=False, entry_points=False, defaults=False)
    seen = Seen()
    manager.register(seen)
    main = threading.current_thread()
    threads: list[threading.Thread] = []

    class Where:
        @hookimpl
        def triage_retrieval(self, event):
            threads.append(threading.current_thread())

    manager.register(Where())
    for i in range(500):
        manager.emit_retrieval(_retrieval(f"q{i}"))
    assert manager.flush(timeout=10)
    assert seen.ids == [f"q{i}" for i in range(500)]
    assert all(t is not main for t in threads)
    manager.close()


def test_full_queue_drops_and_counts_without_blocking():
    manager = TriageManager(synchronous=False, entry_points=False, defaults=False, queue_size=5)
    gate = threading.Event()

    class Slow:
        @hookimpl
        def triage_feedback(self, event):
            gate.wait(5)

    manager.register(Slow())
    for i in range(50):
        manager.emit_feedback(FeedbackEvent("t", f"q{i}", 0.5))
    assert manager.dropped >= 40
    gate.set()
    assert manager.flush(timeout=10)
    manager.close()


def test_wrong_event_type_is_a_clear_error():
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    with pytest.raises(EventError, match="triage_retrieval takes a RetrievalEvent"):
        manager.emit_retrieval(FeedbackEvent("t", "q", 0.5))  # type: ignore[arg-type]


def test_invalid_rerank_answer_keeps_framework_order(caplog):
    class Short:
        @hookimpl
        def triage_rerank(self, request):
            return [1.0]

    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    manager.register(Short())
    with caplog.at_level(logging.ERROR, logger="triage.manager"):
        assert manager.rerank(RerankRequest("t", "q", "chunk", ("a", "b"), (0.5, 0.5))) is None
    assert "1 value(s) for 2 id(s)" in caplog.text


def test_gate_defaults_to_proceed_and_first_result_wins():
    class Warn:
        @hookimpl
        def triage_gate(self, event):
            return GateDecision("warn", "low ERC")

    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    assert manager.gate(_retrieval()).action == "proceed"
    manager.register(Warn())
    assert manager.gate(_retrieval()).reason == "low ERC"


def test_unregister_and_unknown_name():
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    seen = Seen()
    manager.register(seen)
    manager.unregister("seen")
    manager.emit_retrieval(_retrieval())
    assert seen.ids == []
    with pytest.raises(ConfigError):
        manager.unregister("seen")


def test_default_plugins_load_without_errors(tmp_path):
    manager = TriageManager(tmp_path / "s.sqlite", synchronous=True, entry_points=False)
    assert manager.load_errors == []
    assert any(p.source == "default" for p in manager.plugins())
    manager.close()


def test_batched_worker_delivers_without_flush():
    manager = TriageManager(synchronous=False, entry_points=False, defaults=False, schedule_delay=0.05)
    seen = Seen()
    manager.register(seen)
    manager.emit_retrieval(_retrieval("late"))
    deadline = time.monotonic() + 5
    while not seen.ids and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen.ids == ["late"]
    manager.close()


def test_schedule_delay_is_validated():
    with pytest.raises(ConfigError, match="schedule_delay"):
        TriageManager(entry_points=False, defaults=False, schedule_delay=-1)
