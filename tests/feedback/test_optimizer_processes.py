"""The bare ``FeedbackOptimizer`` keeps every α step of processes sharing a store (issue #34, item 7).

Before, each optimizer wrote its own α over the stored one, so with four processes three quarters
of the steps were lost. Each process here builds its optimizer, waits for the others, then steps;
the stored α must be the start plus every step of every process.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from triage_plugins.feedback.backprop import FeedbackOptimizer
from triage_plugins.feedback.scores import ContributionScores, MemoryScoreStore
from triage_plugins.store import open_store

WORKERS, STEPS, MAX_STEP = 4, 15, 0.001
PATHS, UTILITIES, RELEVANCE = [["a"], ["b"]], [1.0, -1.0], {"a": 0.1, "b": 0.9}  # α rises at each step


def _step_size(optimizer: FeedbackOptimizer, d_alpha: float) -> float:
    return max(-MAX_STEP, min(MAX_STEP, -optimizer.eta_alpha * d_alpha))


def _worker(path: str, barrier, out) -> None:
    try:
        with open_store(path) as store:
            optimizer = FeedbackOptimizer(ContributionScores(store, "triple"), max_alpha_step=MAX_STEP)
            barrier.wait(30)
            total = 0.0
            for _ in range(STEPS):
                update = optimizer.step(PATHS, UTILITIES, RELEVANCE)
                total += _step_size(optimizer, update.gradient.d_alpha)
        out.put(total)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        out.put(repr(exc))


def test_alpha_steps_of_processes_sharing_a_store_all_count(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    open_store(path).close()
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, barrier, out)) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    totals = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert all(isinstance(t, float) for t in totals), totals
    with open_store(path) as store:
        alpha = store.get_param("evorag.triple.alpha")
    assert sum(totals) > 0.9 * WORKERS * STEPS * MAX_STEP  # the steps were real
    assert alpha == pytest.approx(0.5 + sum(totals), abs=1e-9)  # none lost


def test_a_store_without_atomic_steps_still_learns_alpha() -> None:
    optimizer = FeedbackOptimizer(ContributionScores(MemoryScoreStore(), "triple"), max_alpha_step=MAX_STEP)
    update = optimizer.step(PATHS, UTILITIES, RELEVANCE)
    assert update.alpha_after == pytest.approx(0.5 + _step_size(optimizer, update.gradient.d_alpha))
    assert optimizer.scores.get_param(optimizer.param_name) == update.alpha_after
