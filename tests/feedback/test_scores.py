"""Contribution scores: init 100, normalization S_c = clip(raw/200, 0, 1), cache and persistence."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from triage_plugins.contract.errors import ConfigError
from triage_plugins.feedback.backprop import FeedbackOptimizer
from triage_plugins.feedback.scores import ContributionScores, MemoryScoreStore


def _store_module():
    if importlib.util.find_spec("triage_plugins.store") is None:
        pytest.skip("triage_plugins.store is not written yet; persistence is tested once it exists")
    from triage_plugins import store

    return store


def test_unscored_units_start_at_init_and_normalize_to_one_half() -> None:
    scores = ContributionScores(None, "triple")
    np.testing.assert_allclose(scores.raw(["x", "y"]), [100.0, 100.0])
    np.testing.assert_allclose(scores.normalized(["x"]), [0.5])


def test_normalization_clips_to_unit_interval() -> None:
    scores = ContributionScores(None, "chunk")
    np.testing.assert_allclose(
        scores.normalize(np.array([-5.0, 0.0, 50.0, 200.0, 300.0])), [0, 0, 0.25, 1, 1]
    )


def test_add_is_an_increment_and_updates_the_cache() -> None:
    scores = ContributionScores(MemoryScoreStore(), "triple")
    assert scores.add({"a": 12.5, "b": -30.0}) == {"a": 112.5, "b": 70.0}
    assert scores.add({"a": 7.5}) == {"a": 120.0}
    np.testing.assert_allclose(scores.raw(["a", "b", "c"]), [120.0, 70.0, 100.0])
    assert scores.scored() == {"a": 120.0, "b": 70.0}


def test_units_are_kept_apart() -> None:
    store = MemoryScoreStore()
    ContributionScores(store, "triple").add({"x": 10.0})
    np.testing.assert_allclose(ContributionScores(store, "chunk").raw(["x"]), [100.0])


def test_cache_miss_reads_the_store_once() -> None:
    class Counting(MemoryScoreStore):
        reads = 0

        def get_scores(self, unit, ids=None):
            Counting.reads += 1
            return super().get_scores(unit, ids)

    store = Counting()
    store.add_scores("triple", {"a": 50.0}, init=100.0)
    scores = ContributionScores(store, "triple")
    np.testing.assert_allclose(scores.raw(["a", "b"]), [150.0, 100.0])
    np.testing.assert_allclose(scores.raw(["a", "b"]), [150.0, 100.0])
    assert Counting.reads == 1


def test_refresh_sees_writes_of_another_process() -> None:
    store = MemoryScoreStore()
    scores = ContributionScores(store, "triple")
    scores.raw(["a"])
    store.add_scores("triple", {"a": -40.0}, init=100.0)  # another worker
    np.testing.assert_allclose(scores.raw(["a"]), [100.0])
    scores.refresh()
    np.testing.assert_allclose(scores.raw(["a"]), [60.0])


def test_invalid_configuration() -> None:
    with pytest.raises(ConfigError):
        ContributionScores(None, "node")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ContributionScores(None, "triple", scale=0)
    with pytest.raises(ConfigError):
        ContributionScores(None, "triple", init=300.0)


def test_scores_and_alpha_survive_a_store_restart(tmp_path) -> None:
    store_mod = _store_module()
    path = tmp_path / "scores.sqlite"
    store = store_mod.Store.open(path)
    opt = FeedbackOptimizer(ContributionScores(store, "triple"), max_step=1.0)
    update = opt.step([["good"], ["bad"]], [1.0, -1.0], {"good": 0.1, "bad": 0.9})
    alpha = opt.alpha
    assert alpha != 0.5
    store.close()

    reopened = store_mod.Store.open(path)
    scores = ContributionScores(reopened, "triple")
    np.testing.assert_allclose(
        scores.raw(["good", "bad"]), [100.0 + update.deltas["good"], 100.0 + update.deltas["bad"]]
    )
    assert FeedbackOptimizer(scores).alpha == pytest.approx(alpha)
    reopened.close()


def test_store_increments_from_two_score_objects_both_count(tmp_path) -> None:
    store_mod = _store_module()
    store = store_mod.Store.open(tmp_path / "s.sqlite")
    first, second = ContributionScores(store, "chunk"), ContributionScores(store, "chunk")
    first.add({"c1": 10.0})
    second.add({"c1": 5.0})
    assert store.get_scores("chunk", ["c1"])["c1"].raw == pytest.approx(115.0)
    store.close()
