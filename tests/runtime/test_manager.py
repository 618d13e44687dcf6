"""The manager facade: isolation, blocking, tracing, background delivery, bounded queue."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from triage_plugins import hookimpl
from triage_plugins.contract.config import TriageConfig
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
    assert manager.failures[("Short", "triage_rerank", "InvalidAnswer")] == 1


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


# ---------------------------------------------------------------------- load-time checks (pytest's check_pending)


class _Misspelt:
    @hookimpl
    def triage_retreival(self, event):  # misspelt on purpose
        pass


def test_misspelt_hook_is_refused_with_the_close_match():
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    with pytest.raises(ConfigError) as info:
        manager.register(_Misspelt(), name="typo")
    assert "'triage_retreival'" in str(info.value)
    assert "did you mean 'triage_retrieval'" in str(info.value)
    assert manager.get_plugin("typo") is None  # not half-registered
    manager.check_pending()  # nothing pending is left behind


def test_misspelt_hook_in_an_entry_point_plugin_is_a_load_error_not_a_crash(monkeypatch):
    from importlib import metadata

    class _EP:
        name, value, dist = "typo-pkg", "typo_pkg:plugin", None

        def load(self):
            return _Misspelt()

    monkeypatch.setattr(metadata, "entry_points", lambda group: [_EP()] if group == "triage" else [])
    manager = TriageManager(synchronous=True, defaults=False)
    assert manager.get_plugin("typo-pkg") is None
    assert [e.name for e in manager.load_errors] == ["typo-pkg"]
    assert "triage_retreival" in manager.load_errors[0].error


@pytest.mark.parametrize(
    ("key", "hint"),
    [("gate.mdoe", "'gate.mode'"), ("feedback.etaa", "'feedback.eta'"), ("nobody.knows", "known options")],
)
def test_unknown_option_key_is_a_config_error_naming_close_matches(key, hint):
    with pytest.raises(ConfigError) as info:
        TriageManager(config=TriageConfig(options={key: 1}), synchronous=True, entry_points=False)
    assert repr(key) in str(info.value)
    assert hint in str(info.value)


def test_options_of_a_blocked_default_plugin_are_still_accepted(monkeypatch):
    monkeypatch.setenv("TRIAGE_DISABLE_PLUGINS", "triage.gate")
    manager = TriageManager(
        config=TriageConfig(options={"gate.mode": "warn"}), synchronous=True, entry_points=False
    )
    assert manager.get_plugin("triage.gate") is None
    manager.close()


def test_a_plugin_declares_its_own_options():
    class WithOptions:
        triage_options = {"mine.level": 3}

        @hookimpl
        def triage_retrieval(self, event):
            pass

    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    manager.register(WithOptions(), name="mine")
    manager.config.options["mine.level"] = 4
    manager.check_options()  # declared: fine
    manager.config.options["mine.levle"] = 4
    with pytest.raises(ConfigError, match="did you mean 'mine.level'"):
        manager.check_options()


@pytest.mark.parametrize(
    "options", [{"gate.mode": "rerout"}, {"gate.widen_top_k": 0}, {"gate.expand_hops": "2"}]
)
def test_gate_option_values_are_validated(options):
    with pytest.raises(ConfigError, match="gate\\."):
        TriageManager(config=TriageConfig(options=options), synchronous=True, entry_points=False)


# ---------------------------------------------------------------------- learned state


def test_learned_scores_come_from_the_feedback_learner_and_seeding_keeps_learned_ones():
    manager = TriageManager(synchronous=True, entry_points=False)
    assert manager.learned_scores("triple", ["t1"]) == {}
    assert manager.seed_scores("triple", {"t1": 120.0, "t2": float("nan"), "t3": True}) == 1
    assert manager.learned_scores("triple", ["t1", "t2"]) == {"t1": 120.0}
    assert manager.seed_scores("triple", {"t1": 50.0, "t4": 80.0}) == 1  # t1 is already learned
    assert manager.learned_scores("triple") == {"t1": 120.0, "t4": 80.0}
    learner = manager.get_plugin("triage.feedback")
    assert learner.priorities(["t1"], [0.5]).tolist() == pytest.approx([0.5 * 0.5 + 0.5 * 0.6])
    manager.close()


def test_learned_scores_fall_back_to_the_store_without_a_learner(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_DISABLE_PLUGINS", "triage.feedback")
    manager = TriageManager(tmp_path / "s.sqlite", synchronous=True, entry_points=False)
    assert manager.seed_scores("chunk", {"c1": 90.0}) == 1
    assert manager.store.get_scores("chunk")["c1"].raw == 90.0
    assert manager.learned_scores("chunk", ["c1", "c2"]) == {"c1": 90.0}
    manager.close()


def test_learned_scores_survive_a_hostile_scores_plugin():
    class Hostile:
        @hookimpl(tryfirst=True)
        def triage_learned_scores(self, unit, ids):
            return {"t1": "100", "t2": float("inf"), 3: 1.0, "t3": 70.0}

    class Learner:
        @hookimpl
        def triage_learned_scores(self, unit, ids):
            return {"t1": 101.5}

    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    manager.register(Learner())
    manager.register(Hostile())
    # the hostile answer is refused whole, counted, and the next plugin answers
    assert manager.learned_scores("triple") == {"t1": 101.5}
    assert sum(n for (plugin, hook, _), n in manager.failures.items() if hook == "triage_learned_scores") == 1
    manager.close()


# ---------------------------------------------------------------------- synchronous answers, checked per plugin


class _Boom:
    def __iter__(self):
        raise ZeroDivisionError("iterating this answer fails")


def _forever():
    while True:
        yield 1.0


@pytest.mark.parametrize(
    "answer",
    [
        _Boom(),  # iteration raises something other than TypeError/ValueError
        _forever(),  # infinite iterator: must not hang
        ["1", "2"],  # numeric strings are not numbers
        [True, False],  # nor are bools
        [1.0, float("inf")],
        "12",
        {"a": 1.0, "b": 2.0},
        [1.0, 2.0, 3.0],
    ],
    ids=["raises", "infinite", "strings", "bools", "inf", "str", "dict", "long"],
)
def test_a_bad_rerank_answer_falls_through_to_the_next_plugin(answer):
    class Bad:
        @hookimpl(tryfirst=True)
        def triage_rerank(self, request):
            return answer

    class Good:
        @hookimpl
        def triage_rerank(self, request):
            return [0.25, 0.75]

    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    manager.register(Good(), name="good")
    manager.register(Bad(), name="bad")
    request = RerankRequest("t", "q", "chunk", ("a", "b"), (0.5, 0.5))
    assert manager.rerank(request) == [0.25, 0.75]
    assert sum(n for (plugin, hook, _), n in manager.failures.items() if plugin == "bad") == 1


@pytest.mark.parametrize(
    "answer",
    [
        "reroute",
        GateDecision("reroute", "x", suggestion={"widen_top_k": float("inf")}),
        GateDecision("reroute", "x", suggestion={"delete_index": 1}),
        GateDecision("reroute", "x", suggestion={"top_k": -3}),
    ],
    ids=["not-a-decision", "inf", "unknown-key", "negative"],
)
def test_a_bad_gate_answer_does_not_silence_the_default_gate(answer):
    class Bad:
        @hookimpl(tryfirst=True)
        def triage_gate(self, event):
            return answer

    class Default:
        @hookimpl
        def triage_gate(self, event):
            return GateDecision("reroute", "retrieval gap", suggestion={"widen_top_k": 2})

    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    manager.register(Default(), name="default")
    manager.register(Bad(), name="bad")
    decision = manager.gate(RetrievalEvent("t", "q1", "A?", mentions=("A",), grounding={"A": "A"}))
    assert decision.action == "reroute" and dict(decision.suggestion) == {"widen_top_k": 2}
    assert sum(n for (plugin, _, _), n in manager.failures.items() if plugin == "bad") == 1


# ---------------------------------------------------------------------- the synchronous time budget


def _sleepy_and_default(seconds: float):
    calls = {"sleepy": 0}

    class Sleepy:
        @hookimpl(tryfirst=True)
        def triage_rerank(self, request):
            calls["sleepy"] += 1
            time.sleep(seconds)
            return [9.0] * len(request.ids)

    class Default:
        @hookimpl
        def triage_rerank(self, request):
            return [0.5] * len(request.ids)

    return Sleepy(), Default(), calls


def test_an_answer_over_budget_is_discarded_and_the_plugin_cools_down():
    sleepy, default, calls = _sleepy_and_default(0.2)
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False, hook_budget=0.05)
    manager.register(default, name="default")
    manager.register(sleepy, name="sleepy")
    request = RerankRequest("t", "q", "chunk", ("a", "b"), (0.5, 0.5))
    assert manager.rerank(request) == [0.5, 0.5]  # the slow answer is not used
    for _ in range(5):
        assert manager.rerank(request) == [0.5, 0.5]
    assert calls["sleepy"] == 1  # skipped while cooling down: not asked (and not waited for) again
    assert manager.failures[("sleepy", "triage_rerank", "OverBudget")] == 1
    assert manager.failures[("sleepy", "triage_rerank", "Suspended")] == 5


def test_a_cooled_down_plugin_is_asked_again():
    sleepy, default, calls = _sleepy_and_default(0.06)
    manager = TriageManager(
        synchronous=True, entry_points=False, defaults=False, hook_budget=0.05, hook_cooldown=0.1
    )
    manager.register(default, name="default")
    manager.register(sleepy, name="sleepy")
    request = RerankRequest("t", "q", "chunk", ("a",), (0.5,))
    manager.rerank(request)
    time.sleep(0.15)
    manager.rerank(request)
    assert calls["sleepy"] == 2


def test_the_budget_can_be_switched_off(monkeypatch):
    sleepy, default, calls = _sleepy_and_default(0.06)
    monkeypatch.setenv("TRIAGE_HOOK_BUDGET", "0")
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    manager.register(default, name="default")
    manager.register(sleepy, name="sleepy")
    assert manager.rerank(RerankRequest("t", "q", "chunk", ("a",), (0.5,))) == [9.0]


def test_a_bad_budget_setting_is_a_config_error(monkeypatch):
    monkeypatch.setenv("TRIAGE_HOOK_BUDGET", "fast")
    with pytest.raises(ConfigError, match="TRIAGE_HOOK_BUDGET"):
        TriageManager(synchronous=True, entry_points=False, defaults=False)
