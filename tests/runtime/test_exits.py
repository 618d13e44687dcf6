"""Exits and budgets (issue #34): SIGTERM flushes, ``close(timeout)`` means what it says, and the
hook budget covers reading and converting an answer."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time

from triage_plugins import hookimpl
from triage_plugins.contract.events import FeedbackEvent, RerankRequest
from triage_plugins.runtime.isolation import OverBudget, Suspended
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import open_store


def test_sigterm_mid_run_stores_or_counts_every_queued_event(tmp_path):
    path = tmp_path / "term.sqlite"
    script = tmp_path / "host.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        from triage_plugins.contract.events import FeedbackEvent
        from triage_plugins.runtime.manager import TriageManager
        m = TriageManager({str(path)!r}, entry_points=False, schedule_delay=10.0, spill_dir={str(tmp_path / "spill")!r})
        m.start_run("serve")
        for i in range(3000):
            m.emit_feedback(FeedbackEvent("t", f"q{{i}}", 1.0))
        print("queued", m.pending, flush=True)
        time.sleep(60)
    """))
    host = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    line = host.stdout.readline()
    assert line.startswith("queued") and int(line.split()[1]) > 0  # events still queued when the signal lands
    start = time.monotonic()
    host.send_signal(signal.SIGTERM)
    assert host.wait(timeout=30) == 128 + signal.SIGTERM
    assert time.monotonic() - start < 10  # bounded: the exit flush has 5 s
    with open_store(path, readonly=True) as store:
        stored = sum(1 for _ in store.events("feedback"))
        (run,) = store.runs()
    assert run.ended_at is not None
    assert stored + run.dropped + run.undelivered == 3000
    assert stored == 3000


def test_close_timeout_is_kept_and_counts_what_a_slow_plugin_missed(tmp_path):
    release = threading.Event()

    class Slow:
        @hookimpl
        def triage_feedback(self, event):
            release.wait(0.05)

    path = tmp_path / "slow.sqlite"
    manager = TriageManager(path, entry_points=False, schedule_delay=0)
    manager.register(Slow())
    run = manager.start_run("serve")
    for i in range(200):
        manager.emit_feedback(FeedbackEvent("t", f"q{i}", 1.0))
    manager.flush(timeout=0)  # hand everything on
    start = time.monotonic()
    left = manager.close(timeout=1.0)
    took = time.monotonic() - start
    release.set()
    assert took < 1.5
    assert left > 0
    with open_store(path, readonly=True) as store:
        (row,) = [r for r in store.runs() if r.id == run]
        stored = sum(1 for _ in store.events("feedback"))
    # the store got every event; only the slow plugin missed some, and the run says so exactly
    assert stored == 200 and row.undelivered == 0 and row.dropped == 0
    assert row.faults["plugins"]["undelivered"] == left


def _rerank(manager: TriageManager) -> tuple[list[float] | None, float]:
    request = RerankRequest("t", "q", "triple", ("a", "b", "c"), (0.1, 0.2, 0.3))
    start = time.perf_counter()
    answer = manager.rerank(request)
    return answer, time.perf_counter() - start


def test_a_lazy_rerank_answer_is_read_only_within_the_budget():
    class Lazy:
        @hookimpl
        def triage_rerank(self, request):
            def values():
                for _ in request.ids:
                    time.sleep(0.2)
                    yield 1.0
            return values()

    manager = TriageManager(entry_points=False, defaults=False, synchronous=True, hook_budget=0.1)
    manager.register(Lazy(), name="lazy")
    answer, took = _rerank(manager)
    assert answer is None and took < 0.35  # one item past the budget, not all three
    assert manager.failures[("lazy", "triage_rerank", OverBudget.__name__)] == 1
    answer, took = _rerank(manager)
    assert took < 0.05 and manager.failures[("lazy", "triage_rerank", Suspended.__name__)] == 1
    manager.close()


def test_a_slow_float_in_an_answer_counts_against_the_budget():
    class SlowNumber(float):
        def __float__(self):
            time.sleep(0.2)
            return 1.0

    class Slow:
        @hookimpl
        def triage_rerank(self, request):
            return [SlowNumber(1.0) for _ in request.ids]

    manager = TriageManager(entry_points=False, defaults=False, synchronous=True, hook_budget=0.1)
    manager.register(Slow(), name="slow")
    answer, took = _rerank(manager)
    assert answer is None and took < 0.35
    assert manager.failures[("slow", "triage_rerank", OverBudget.__name__)] == 1
    manager.close()


def test_a_raising_plugin_is_suspended_like_a_slow_one():
    calls = []

    class Failing:
        @hookimpl
        def triage_rerank(self, request):
            calls.append(1)
            raise ConnectionError("the store is down")

    manager = TriageManager(entry_points=False, defaults=False, synchronous=True, hook_budget=0.1)
    manager.register(Failing(), name="failing")
    for _ in range(5):
        assert _rerank(manager)[0] is None
    assert len(calls) == 1
    assert manager.failures[("failing", "triage_rerank", "ConnectionError")] == 1
    assert manager.failures[("failing", "triage_rerank", Suspended.__name__)] == 4
    manager.close()
