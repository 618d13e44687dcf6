"""Youden thresholds and (clustered) BCa bootstrap intervals (TRIAGE §5.1–5.2)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from triage_plugins.contract.errors import ConfigError
from triage_plugins.diagnosis.calibration import (
    bca_interval,
    clustered_bca_interval,
    youden_j,
    youden_threshold,
)


def test_youden_on_a_perfect_separation() -> None:
    values = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    failed = [v <= 0.4 for v in values]
    fit = youden_threshold(values, failed)
    assert fit.threshold == pytest.approx(0.4)  # the largest value still classified failing
    assert fit.cutoff == pytest.approx(0.45)  # "< 0.45" classifies like "<= 0.4"
    assert fit.j == pytest.approx(1.0)
    assert (fit.sensitivity, fit.specificity) == (1.0, 1.0)


def test_youden_by_hand_with_a_tie() -> None:
    values = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    failed = [1, 1, 0, 1, 0, 0, 1, 0]
    # J(t) for t = .1 … .8: .25, .5, .25, .5, .25, 0, .25, 0 -> ties at .2 and .4; the smaller wins
    fit = youden_threshold(values, failed)
    assert fit.j == pytest.approx(0.5)
    assert fit.threshold == pytest.approx(0.2)
    assert fit.cutoff == pytest.approx(0.25)
    assert fit.sensitivity == pytest.approx(0.5) and fit.specificity == pytest.approx(1.0)
    assert youden_j(values, failed) == pytest.approx(0.5)


def test_youden_reports_two_thirds_like_the_paper() -> None:
    # ERC strata of a PQ-3H-like probe: (value, observations, failures of CC)
    strata = [(0.0, 30, 17), (1 / 3, 40, 22), (2 / 3, 50, 28), (1.0, 100, 2)]
    values, failed = [], []
    for value, n, n_fail in strata:
        values += [value] * n
        failed += [True] * n_fail + [False] * (n - n_fail)
    fit = youden_threshold(values, failed)
    # t = 2/3: sens = 67/69, spec = 98/151 -> J = 0.6201; t = 1/3: J = 0.3600; t = 0: J = 0.1603
    assert fit.threshold == pytest.approx(2 / 3)
    assert round(fit.threshold, 2) == 0.67
    assert fit.j == pytest.approx(67 / 69 + 98 / 151 - 1)
    assert 2 / 3 < fit.cutoff < 1.0


def test_youden_undefined_cases() -> None:
    assert youden_threshold([0.1, 0.5], [True, True]).threshold is None
    assert youden_threshold([0.1, 0.5], [False, False]).reason.startswith("no observation failed")
    inverted = youden_threshold([0.1, 0.9], [False, True])  # high values fail: J <= 0 on this orientation
    assert inverted.threshold is None and "does not separate" in inverted.reason
    dropped = youden_threshold([0.1, None, 0.9, float("nan")], [True, True, False, None])
    assert dropped.n == 2 and dropped.n_dropped == 2 and dropped.threshold == pytest.approx(0.1)
    with pytest.raises(ConfigError):
        youden_threshold([0.1], [True, False])


def test_bca_of_a_normal_mean_matches_the_t_interval() -> None:
    data = np.random.default_rng(1).normal(10.0, 2.0, 400)
    ci = bca_interval(data, np.mean, n_resamples=4000, seed=3)
    half = stats.t.ppf(0.975, 399) * data.std(ddof=1) / np.sqrt(400)
    assert ci.estimate == pytest.approx(data.mean())
    assert ci.low == pytest.approx(data.mean() - half, abs=0.03)
    assert ci.high == pytest.approx(data.mean() + half, abs=0.03)
    assert ci.method == "bca" and ci.n == ci.n_clusters == 400


def test_bca_of_a_skewed_mean_matches_scipy() -> None:
    data = np.random.default_rng(7).exponential(1.0, 60)
    ours = bca_interval(data, np.mean, n_resamples=8000, seed=0)
    ref = stats.bootstrap(
        (data,), np.mean, method="BCa", n_resamples=8000, random_state=0
    ).confidence_interval
    width = ref.high - ref.low
    assert ours.low == pytest.approx(ref.low, abs=0.04 * width)
    assert ours.high == pytest.approx(ref.high, abs=0.04 * width)
    # skewed data: BCa is asymmetric, longer on the right
    assert ours.high - ours.estimate > ours.estimate - ours.low


def test_bca_is_seeded() -> None:
    data = np.random.default_rng(0).normal(size=50)
    assert bca_interval(data, seed=5) == bca_interval(data, seed=5)
    assert bca_interval(data, seed=5).low != bca_interval(data, seed=6).low


def test_bca_on_paired_arrays() -> None:
    rng = np.random.default_rng(2)
    a = rng.normal(1.0, 1.0, 200)
    b = a + rng.normal(0.5, 0.1, 200)  # b - a ≈ 0.5 ± 0.1: a tight paired difference
    ci = bca_interval((a, b), lambda x, y: float(np.mean(y - x)), seed=0)
    assert ci.low < 0.5 < ci.high
    assert ci.width < 0.05


def test_clustered_bootstrap_is_wider_when_observations_are_duplicated() -> None:
    base = np.random.default_rng(4).normal(0.0, 1.0, 40)
    copies = np.repeat(base, 5)  # each question seen under five retrievers
    questions = np.repeat(np.arange(40), 5)
    naive = bca_interval(copies, seed=0)
    clustered = clustered_bca_interval(copies, questions, seed=0)
    honest = bca_interval(base, seed=0)
    assert clustered.n_clusters == 40 and clustered.n == 200
    assert clustered.width > 1.8 * naive.width  # ≈ √5 = 2.24 times wider
    assert clustered.width == pytest.approx(honest.width, rel=0.2)


def test_bootstrap_input_errors() -> None:
    with pytest.raises(ConfigError):
        bca_interval([1.0, 2.0, 3.0], confidence=1.5)
    with pytest.raises(ConfigError):
        bca_interval([1.0])
    with pytest.raises(ConfigError):
        clustered_bca_interval([1.0, 2.0], ["a", "a"])  # one cluster
    with pytest.raises(ConfigError):
        clustered_bca_interval([1.0, 2.0], ["a"])


def test_degenerate_statistic_gives_a_point_interval() -> None:
    ci = bca_interval(np.ones(30), seed=0)
    assert (ci.low, ci.high, ci.method) == (1.0, 1.0, "degenerate")
