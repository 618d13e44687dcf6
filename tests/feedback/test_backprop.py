"""EvoRAG backward pass (eq. 4–9): exact gradients, edge cases and the bounded update."""

from __future__ import annotations

import math

import numpy as np
import pytest

from triage_plugins.contract.errors import ConfigError, FeedbackError
from triage_plugins.feedback.backprop import FeedbackOptimizer, loss_and_gradient, path_loss
from triage_plugins.feedback.priority import PathIndex, path_priorities
from triage_plugins.feedback.scores import ContributionScores, MemoryScoreStore

H = 1e-6


def _random_instance(rng: np.random.Generator, n_paths: int, n_units: int):
    ids = [f"t{k}" for k in range(n_units)]
    paths = [[ids[rng.integers(n_units)] for _ in range(rng.integers(1, 4))] for _ in range(n_paths)]
    paths.append([ids[0], ids[0], ids[1]])  # a triple repeated within a path
    paths.append([ids[1], ids[2]])  # and shared across paths
    index = PathIndex.build(paths)
    m = len(index.ids)
    s_r = rng.uniform(0.01, 1.0, m)
    s_c = rng.uniform(0.02, 0.98, m)
    utilities = rng.uniform(-1.0, 1.0, len(paths))
    alpha = float(rng.uniform(0.05, 0.95))
    return index, s_r, s_c, alpha, utilities


def _fd_sc(index, s_r, s_c, alpha, utilities, factor=None) -> np.ndarray:
    out = np.empty(len(s_c))
    for k in range(len(s_c)):
        e = np.zeros(len(s_c))
        e[k] = H
        plus = path_loss(s_r, s_c + e, alpha, index, utilities, factor)
        minus = path_loss(s_r, s_c - e, alpha, index, utilities, factor)
        out[k] = (plus - minus) / (2 * H)
    return out


def _fd_alpha(index, s_r, s_c, alpha, utilities, factor=None) -> float:
    plus = path_loss(s_r, s_c, alpha + H, index, utilities, factor)
    minus = path_loss(s_r, s_c, alpha - H, index, utilities, factor)
    return (plus - minus) / (2 * H)


@pytest.mark.parametrize("seed", range(25))
def test_gradients_match_central_finite_differences(seed: int) -> None:
    rng = np.random.default_rng(seed)
    index, s_r, s_c, alpha, utilities = _random_instance(
        rng, int(rng.integers(2, 12)), int(rng.integers(3, 10))
    )
    factor = rng.uniform(0.3, 1.0, len(s_c)) if seed % 2 else None
    grad = loss_and_gradient(s_r, s_c, alpha, index, utilities, factor)
    assert grad.informative
    fd = _fd_sc(index, s_r, s_c, alpha, utilities, factor)
    assert np.linalg.norm(grad.d_sc - fd) / np.linalg.norm(fd) < 1e-6
    fda = _fd_alpha(index, s_r, s_c, alpha, utilities, factor)
    assert abs(grad.d_alpha - fda) / abs(fda) < 1e-6
    assert grad.loss == pytest.approx(path_loss(s_r, s_c, alpha, index, utilities, factor), rel=1e-12)


def test_gradient_equals_design_formula_term_by_term() -> None:
    """DESIGN §4: ∂loss/∂S_c(t) = −(α/2E)·Σ_i n_{i,t}·P(L_i)·(U_i − Ū)/(|L_i|·P(t)), computed naively."""
    rng = np.random.default_rng(7)
    index, s_r, s_c, alpha, utilities = _random_instance(rng, 6, 5)
    grad = loss_and_gradient(s_r, s_c, alpha, index, utilities)
    pl = path_priorities(s_r, s_c, alpha, index)
    p = (1 - alpha) * s_r + alpha * s_c
    e = float(np.dot(pl, (utilities + 1) / 2))
    u_bar = float(np.dot(pl, utilities))
    paths = [[index.flat[j] for j in np.flatnonzero(index.path_of == i)] for i in range(index.n_paths)]
    expect = np.zeros(len(s_c))
    expect_alpha = 0.0
    for i, path in enumerate(paths):
        for t in range(len(s_c)):
            n_it = path.count(t)
            expect[t] += n_it * pl[i] * (utilities[i] - u_bar) / (len(path) * p[t])
        expect_alpha += (
            pl[i] * (utilities[i] - u_bar) / len(path) * sum((s_c[t] - s_r[t]) / p[t] for t in path)
        )
    np.testing.assert_allclose(grad.d_sc, -alpha / (2 * e) * expect, rtol=1e-10)
    assert grad.d_alpha == pytest.approx(-expect_alpha / (2 * e), rel=1e-10)


def test_hand_computed_two_paths() -> None:
    # S_r = S_c = 0.5, α = 0.5 → P(t) = 0.5, P(L) = (0.5, 0.5); U = (1, −1) → E = 0.5, loss = log 2,
    # ∂loss/∂S_c = α·(P(L_i) − r_i)/P(t) with r = (1, 0): (0.5·(−0.5)/0.5, 0.5·0.5/0.5) = (−0.5, 0.5).
    index = PathIndex.build([["a"], ["b"]])
    grad = loss_and_gradient(np.array([0.5, 0.5]), np.array([0.5, 0.5]), 0.5, index, [1.0, -1.0])
    assert grad.expected_utility == pytest.approx(0.5)
    assert grad.loss == pytest.approx(math.log(2))
    np.testing.assert_allclose(grad.d_sc, [-0.5, 0.5])
    assert grad.d_alpha == pytest.approx(0.0)


def test_masked_paths_keep_exact_gradient_for_units_only_on_scored_paths() -> None:
    # a, b only on scored paths; c only on the gated path; d shared by a scored and the gated path
    paths = [["a", "d"], ["b"], ["c", "d"]]
    index = PathIndex.build(paths)
    rng = np.random.default_rng(3)
    s_r, s_c = rng.uniform(0.1, 1, 4), rng.uniform(0.1, 0.9, 4)
    utilities = [0.8, -0.6, None]
    grad = loss_and_gradient(s_r, s_c, 0.4, index, utilities)
    fd = _fd_sc(index, s_r, s_c, 0.4, [0.8, -0.6, 0.0])  # the gated path counts as neutral in E
    pos = {k: index.ids.index(k) for k in "abcd"}
    for k in "ab":
        assert grad.d_sc[pos[k]] == pytest.approx(fd[pos[k]], rel=1e-6)
    assert grad.d_sc[pos["c"]] == 0.0  # no update through the gated path
    assert grad.d_sc[pos["d"]] != pytest.approx(fd[pos["d"]], rel=1e-3)  # its gated term is masked


@pytest.mark.parametrize("value", [-1.0, 0.0, 1.0])
def test_equal_utilities_give_zero_gradient_without_nan(value: float) -> None:
    index = PathIndex.build([["a", "b"], ["b", "c", "c"], ["d"]])
    grad = loss_and_gradient(np.full(4, 0.3), np.full(4, 0.6), 0.5, index, [value] * 3)
    assert not grad.informative
    assert np.all(grad.d_sc == 0.0) and grad.d_alpha == 0.0
    if value == -1.0:
        assert grad.loss == math.inf and grad.expected_utility == 0.0
    else:
        assert grad.loss == pytest.approx(-math.log((value + 1) / 2))


def test_extreme_priorities_stay_finite() -> None:
    # S_r at the floor, S_c = 0, α near 1: P(t) tiny; E ≈ 1e-14 from one almost-harmful path.
    # −log E is invariant to scaling every u_i, so the gradient is that of U = (1, −1): P(L) − (1, 0).
    index = PathIndex.build([["a"], ["b", "c"]])
    s = np.array([0.0, 1.0, 1.0])
    grad = loss_and_gradient(s, s, 0.95, index, [-1.0 + 1e-9, -1.0])
    assert np.all(np.isfinite(grad.d_sc)) and math.isfinite(grad.d_alpha)
    assert grad.expected_utility < 1e-12
    reference = loss_and_gradient(s, s, 0.95, index, [1.0, -1.0])
    np.testing.assert_allclose(grad.d_sc, reference.d_sc, rtol=1e-6)


def test_bad_utilities_are_rejected() -> None:
    index = PathIndex.build([["a"], ["b"]])
    with pytest.raises(FeedbackError, match="in \\[-1, 1\\]"):
        loss_and_gradient(np.ones(2), np.ones(2) / 2, 0.5, index, [1.5, 0.0])
    with pytest.raises(FeedbackError, match="2 paths"):
        loss_and_gradient(np.ones(2), np.ones(2) / 2, 0.5, index, [1.0])
    with pytest.raises(FeedbackError, match="empty"):
        PathIndex.build([["a"], []])


# --------------------------------------------------------------------------- optimizer


def _optimizer(**kw) -> FeedbackOptimizer:
    return FeedbackOptimizer(ContributionScores(MemoryScoreStore(), "triple"), **kw)


def test_helpful_triple_gains_and_harmful_loses() -> None:
    # hand example above: ∂loss/∂S_c = (−0.5, +0.5); Δraw = −η·scale·∂ = ∓0.25·200·0.5 = ±25
    opt = _optimizer(max_step=1.0)
    update = opt.step([["good"], ["bad"]], [1.0, -1.0], {"good": 0.5, "bad": 0.5})
    assert update.deltas == pytest.approx({"good": 25.0, "bad": -25.0})
    np.testing.assert_allclose(opt.scores.raw(["good", "bad"]), [125.0, 75.0])


def test_update_is_bounded_and_projected() -> None:
    opt = _optimizer()  # max_step 0.1 → at most 20 raw points
    update = opt.step([["good"], ["bad"]], [1.0, -1.0], {"good": 0.5, "bad": 0.5})
    assert update.deltas == pytest.approx({"good": 20.0, "bad": -20.0})
    opt.scores.set("good", 195.0)
    opt.scores.set("bad", 3.0)
    update = opt.step([["good"], ["bad"]], [1.0, -1.0], {"good": 0.5, "bad": 0.5})
    assert update.deltas == pytest.approx({"good": 5.0, "bad": -3.0})  # kept inside [0, 200]
    np.testing.assert_allclose(opt.scores.normalized(["good", "bad"]), [1.0, 0.0])


def test_a_raw_outside_the_range_is_pulled_back_by_at_most_one_step() -> None:
    # Workers projecting from stale caches at once can leave the stored raw outside [0, 200]; each
    # worker's pull back is one bounded step, or the corrections of many workers compound.
    opt = _optimizer()  # max_step 0.1 → at most 20 raw points
    opt.scores.set("good", 900.0)
    opt.scores.set("bad", -500.0)
    update = opt.step([["good"], ["bad"]], [1.0, -1.0], {"good": 0.5, "bad": 0.5})
    assert update.deltas == pytest.approx({"good": -20.0, "bad": 20.0})


def test_unscored_paths_do_not_update() -> None:
    opt = _optimizer()
    update = opt.step([["a"], ["b"]], [None, None], {"a": 0.5, "b": 0.5})
    assert update.deltas == {} and update.gradient is None
    np.testing.assert_allclose(opt.scores.raw(["a", "b"]), [100.0, 100.0])


def test_fixed_alpha_mode_keeps_alpha() -> None:
    opt = _optimizer(alpha=0.3, learn_alpha=False)
    update = opt.step([["a"], ["b"]], [1.0, -1.0], {"a": 0.2, "b": 0.9})
    assert update.alpha_before == update.alpha_after == 0.3
    assert opt.scores.get_param(opt.param_name) is None


def test_learned_alpha_moves_by_a_small_bounded_step_and_persists() -> None:
    # The good path's triple has S_c (0.5) above S_r (0.1): leaning on S_c helps, so α increases.
    store = MemoryScoreStore()
    opt = FeedbackOptimizer(ContributionScores(store, "triple"), alpha=0.5)
    update = opt.step([["a"], ["b"]], [1.0, -1.0], {"a": 0.1, "b": 0.9})
    assert update.gradient is not None and update.gradient.d_alpha < 0
    assert update.alpha_after > 0.5
    assert update.alpha_after - 0.5 <= 0.01 + 1e-15
    again = FeedbackOptimizer(ContributionScores(store, "triple"), alpha=0.5)
    assert again.alpha == update.alpha_after


def test_learned_alpha_respects_its_bounds() -> None:
    opt = _optimizer(alpha=0.94, eta_alpha=10.0, max_alpha_step=1.0, alpha_bounds=(0.05, 0.95))
    for _ in range(5):
        opt.step([["a"], ["b"]], [1.0, -1.0], {"a": 0.1, "b": 0.9})
    assert opt.alpha == 0.95


def test_alpha_validation() -> None:
    with pytest.raises(ConfigError):
        _optimizer(alpha=1.0, learn_alpha=False)
    with pytest.raises(ConfigError):
        _optimizer(alpha_bounds=(0.6, 0.4))
    with pytest.raises(ConfigError):
        _optimizer(eta=-1)


def test_missing_relevance_is_an_error() -> None:
    with pytest.raises(FeedbackError, match="'b'"):
        _optimizer().step([["a"], ["b"]], [1.0, -1.0], {"a": 0.5})


def test_raw_learning_rate_is_eta_times_scale_squared() -> None:
    assert _optimizer(eta=0.25).raw_learning_rate == pytest.approx(0.25 * 200**2)


@pytest.mark.parametrize("seed", range(10))
def test_gated_paths_gradients_are_exact_for_the_gated_loss(seed: int) -> None:
    """With ~30 % of the paths gated (utility None), every gradient equals the central finite
    difference of the gated loss: gated paths neutral in E with their logits held (stop-gradient)."""
    rng = np.random.default_rng(100 + seed)
    index, s_r, s_c, alpha, utilities = _random_instance(rng, 10, 8)
    gated = [None if k % 3 == 0 else float(v) for k, v in enumerate(utilities)]  # 4 of 12 paths
    grad = loss_and_gradient(s_r, s_c, alpha, index, gated)
    at = (s_c.copy(), alpha)
    fd = np.empty(len(s_c))
    for k in range(len(s_c)):
        e = np.zeros(len(s_c))
        e[k] = H
        plus = path_loss(s_r, s_c + e, alpha, index, gated, held_at=at)
        minus = path_loss(s_r, s_c - e, alpha, index, gated, held_at=at)
        fd[k] = (plus - minus) / (2 * H)
    assert np.linalg.norm(grad.d_sc - fd) / np.linalg.norm(fd) < 1e-6
    fda = (
        path_loss(s_r, s_c, alpha + H, index, gated, held_at=at)
        - path_loss(s_r, s_c, alpha - H, index, gated, held_at=at)
    ) / (2 * H)
    assert abs(grad.d_alpha - fda) <= 1e-6 * max(1.0, abs(fda))
    # the loss value itself is the same with or without holding (held only changes derivatives)
    assert grad.loss == pytest.approx(path_loss(s_r, s_c, alpha, index, gated), rel=1e-12)
    assert grad.loss == pytest.approx(path_loss(s_r, s_c, alpha, index, gated, held_at=at), rel=1e-12)
    # the ungated loss (gated logits free) has another α derivative: the gate is a stop-gradient
    free = (path_loss(s_r, s_c, alpha + H, index, gated) - path_loss(s_r, s_c, alpha - H, index, gated)) / (
        2 * H
    )
    assert grad.d_alpha != pytest.approx(free, rel=1e-4, abs=1e-9)
