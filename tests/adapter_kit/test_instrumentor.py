"""The Instrumentor base (triage_plugins.adapter_kit.instrumentor) on a toy host: lifecycle, manager
policy, query ids, feedback order, containment. The real adapters are checked in tests/adapters."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection
from typing import Any

import pytest

from triage_plugins import hookimpl
from triage_plugins.adapter_kit import Instrumentor
from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import GenerationEvent, RetrievalEvent
from triage_plugins.runtime.manager import TriageManager


class Host:
    """A framework object with one method an adapter wraps."""

    def answer(self, question: str) -> str:
        return question.upper()


class ToyInstrumentor(Instrumentor):
    """The smallest adapter: wraps ``Host.answer`` on the instance, emits retrieval + generation."""

    framework = "toy"
    requirements: tuple[str, ...] = ("pluggy >= 1.0",)

    def instrumentation_dependencies(self) -> Collection[str]:
        return self.requirements

    def _instrument(self, host: Any) -> None:
        if not hasattr(host, "answer"):
            raise ConfigError("not a Host")
        self._wrap_attribute(host, "answer", self._make_answer)

    def _make_answer(self, original: Any) -> Any:
        def answer(question: str) -> str:
            qid = self._next_query_id()
            result = original(question)
            # built off the host's path, then the generation queued behind it
            self._defer(
                "retrieval event", lambda: self.manager.emit_retrieval(RetrievalEvent("toy", qid, question))
            )
            self.manager.emit_generation(GenerationEvent("toy", qid, result))
            return result

        return answer


class Spy:
    def __init__(self) -> None:
        self.events: list = []

    @hookimpl
    def triage_retrieval(self, event):
        self.events.append(event)

    @hookimpl
    def triage_generation(self, event):
        self.events.append(event)

    @hookimpl
    def triage_feedback(self, event):
        self.events.append(event)


def manager(*, synchronous: bool = True, config: TriageConfig | None = None) -> tuple[TriageManager, Spy]:
    m = TriageManager(store=None, synchronous=synchronous, entry_points=False, defaults=False, config=config)
    spy = Spy()
    m.register(spy)
    return m, spy


# --------------------------------------------------------------------------- lifecycle


def test_instrumenting_twice_adds_nothing():
    host, (m, spy) = Host(), manager()
    inst = ToyInstrumentor()
    assert inst.instrument(host, manager=m) is inst
    wrapper = host.answer
    assert inst.instrument(host, manager=m) is inst and inst.instrument() is inst
    assert host.answer is wrapper  # not wrapped twice
    host.answer("q")
    assert [e.kind for e in spy.events] == ["retrieval", "generation"]  # one pair, not two
    inst.uninstrument()


def test_uninstrument_restores_exactly_what_was_there():
    host = Host()
    inst = ToyInstrumentor().instrument(host, manager=manager()[0])
    assert "answer" in host.__dict__
    inst.uninstrument()
    assert "answer" not in host.__dict__ and host.answer.__func__ is Host.answer
    inst.uninstrument()  # idempotent

    own = Host()
    mine = own.answer = lambda question: "mine"  # an instance attribute of the user's
    inst = ToyInstrumentor().instrument(own, manager=manager()[0])
    assert own.answer is not mine
    inst.uninstrument()
    assert own.__dict__["answer"] is mine


def test_uninstrument_keeps_a_wrapper_installed_after_ours():
    host, (m, spy) = Host(), manager()
    inst = ToyInstrumentor().instrument(host, manager=m)
    ours = host.answer
    theirs = host.answer = lambda question: "their " + ours(question)  # another tool, after us
    inst.uninstrument()
    assert host.__dict__["answer"] is theirs  # left in place
    assert host.answer("q") == "their Q"  # ours is now a pass-through to the original
    assert [e.kind for e in spy.events] == []  # and emits nothing


def test_instrument_again_after_uninstrument_reuses_host_and_manager():
    host, (m, spy) = Host(), manager()
    inst = ToyInstrumentor().instrument(host, manager=m)
    inst.uninstrument()
    host.answer("unobserved")
    inst.instrument()
    host.answer("observed")
    assert [e.query for e in spy.events if e.kind == "retrieval"] == ["observed"]
    assert inst.manager is m
    inst.uninstrument()


def test_wrong_arguments_fail_loudly():
    m = manager()[0]
    inst = ToyInstrumentor()
    with pytest.raises(ConfigError, match="not instrumented yet"):
        inst.manager  # noqa: B018
    with pytest.raises(ConfigError, match="config="):
        inst.instrument(Host(), manager=m, config=TriageConfig())
    with pytest.raises(ConfigError, match="unit"):
        inst.instrument(Host(), manager=m, unit="sentence")
    with pytest.raises(ConfigError, match="not a Host"):
        inst.instrument(object(), manager=m)
    assert not inst.is_instrumented
    inst.instrument(Host(), manager=m)
    with pytest.raises(ConfigError, match="another object"):
        inst.instrument(Host())
    inst.uninstrument()


# --------------------------------------------------------------------------- manager policy


def test_a_manager_passed_in_is_neither_changed_nor_closed(caplog):
    m, spy = manager()
    before = dataclasses.asdict(m.config)
    plugins = [p.name for p in m.plugins()]
    inst = ToyInstrumentor()
    with caplog.at_level(logging.WARNING, logger="triage.adapter_kit"):
        inst.instrument(Host(), manager=m, reweight=True, unit="chunk")
    assert (inst.reweight, inst.unit) == (True, "chunk")  # the adapter's own knobs follow the call
    assert "left as it is" in caplog.text  # and the mismatch with the manager's config is said
    inst.uninstrument()
    assert dataclasses.asdict(m.config) == before
    assert [p.name for p in m.plugins()] == plugins
    assert not inst.owns_manager
    m.emit_generation(GenerationEvent("toy", "after", "still open"))
    assert spy.events[-1].query_id == "after"  # not closed by uninstrument


def test_reweight_and_unit_default_to_the_managers_config():
    m, _ = manager(config=TriageConfig(reweight=True, unit="chunk"))
    inst = ToyInstrumentor().instrument(Host(), manager=m)
    assert (inst.reweight, inst.unit) == (True, "chunk")
    inst.uninstrument()


def test_an_owned_manager_gets_a_copy_of_the_config_and_is_closed(tmp_path, caplog):
    config = TriageConfig(gate=False)
    inst = ToyInstrumentor().instrument(
        Host(), store=tmp_path / "t.sqlite", config=config, reweight=True, unit="chunk"
    )
    owned = inst.manager
    assert inst.owns_manager and owned.store is not None
    assert (owned.config.reweight, owned.config.unit, owned.config.gate) == (True, "chunk", False)
    assert config == TriageConfig(gate=False)  # the caller's config object is not touched
    inst.uninstrument()
    with caplog.at_level(logging.WARNING, logger="triage.manager"):
        owned.emit_generation(GenerationEvent("toy", "late", "x"))
    assert "after close()" in caplog.text


def test_unsupported_framework_versions_are_reported_once(caplog):
    class Old(ToyInstrumentor):
        requirements = ("pluggy < 1.0", "no-such-distribution-xyz >= 1")

    with caplog.at_level(logging.WARNING, logger="triage.adapter_kit"):
        first = Old().instrument(Host(), manager=manager()[0])
        second = Old().instrument(Host(), manager=manager()[0])
    messages = [r.getMessage() for r in caplog.records]
    assert any("supports pluggy < 1.0, found" in msg for msg in messages)
    assert sum("not installed" in msg for msg in messages) == 1  # once per adapter class, not per call
    first.uninstrument()
    second.uninstrument()


# --------------------------------------------------------------------------- queries and feedback


def test_query_yields_the_id_every_event_of_the_block_carries():
    host, (m, spy) = Host(), manager(synchronous=False)
    inst = ToyInstrumentor().instrument(host, manager=m)
    with inst.query("q-7") as qid:
        assert qid == "q-7" and inst.query_id == "q-7"
        host.answer("who?")
    with inst.query() as fresh:
        host.answer("what?")
    host.answer("outside")
    inst.feedback("q-7", 1.0)
    assert inst.flush(timeout=10)
    ids = [(e.kind, e.query_id) for e in spy.events]
    assert ids[:2] == [("retrieval", "q-7"), ("generation", "q-7")]
    assert ids[2:4] == [("retrieval", fresh), ("generation", fresh)] and fresh.startswith("toy-")
    outside = ids[4][1]
    assert outside not in ("q-7", fresh) and inst.query_id == outside  # the last query seen
    assert ids[-1] == ("feedback", "q-7")  # queued behind the query's own events
    inst.uninstrument()


def test_feedback_returns_the_event_and_rejects_a_bad_score():
    inst = ToyInstrumentor().instrument(Host(), manager=manager()[0])
    event = inst.feedback("q", 0.25, source="gold", raw="meh")
    assert (event.framework, event.query_id, event.score, event.source, event.raw) == (
        "toy",
        "q",
        0.25,
        "gold",
        "meh",
    )
    with pytest.raises(Exception, match="score"):
        inst.feedback("q", 7.0)
    inst.uninstrument()


def test_adapter_side_errors_never_reach_the_host(caplog):
    host, (m, _) = Host(), manager()
    inst = ToyInstrumentor().instrument(host, manager=m)

    def broken() -> None:
        raise ValueError("translation bug")

    with caplog.at_level(logging.WARNING, logger="triage.adapter_kit"):
        inst._defer("toy event", broken)
        inst._defer("toy event", broken)
    assert inst.errors == 2 and len(caplog.records) == 1  # logged once per kind, counted each time
    assert host.answer("still") == "STILL"
    inst.uninstrument()
