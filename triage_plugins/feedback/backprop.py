"""Backward computation: path utility → contribution scores and α (EvoRAG §4.3.2, eq. 4–9; DESIGN §4).

For the paths L_1…L_n of one query, with u_i = (U_i + 1)/2 ∈ [0, 1]::

    E      = Σ_i P(L_i)·u_i,   loss = −log E                                        (eq. 4)
    ∂loss/∂a_i    = P(L_i) − r_i,   r_i = P(L_i)·u_i / E                             (a_i of eq. 3)
    ∂loss/∂S_c(t) = α · Σ_i n_{i,t}·(P(L_i) − r_i) / (|L_i|·P(t))                   (eq. 5–6)
    ∂loss/∂α      = Σ_i (P(L_i) − r_i)/|L_i| · Σ_{t∈L_i} n_{i,t}·(S_c(t) − S_r(t)) / P(t)   (eq. 7)

This is DESIGN §4's form rewritten with −(1/2E)·P(L_i)·(U_i − Ū) = P(L_i) − r_i: r is the
utility-weighted posterior over paths, computed in log space, so both terms stay in [−1, 1] even
when E underflows. Where the published code differs (it squares P(L_j), never stores α) we follow
the mathematics; a test checks every gradient against central finite differences of the loss.

A path whose utility is ``None`` (an evaluator's "no update for this path": EvoRAG §4.3.1's gate,
"the update is suppressed" unless Fidelity is high and Conflict low) stays in the softmax with the
neutral utility U = 0 (u = 1/2: no evidence either way), so the paths that were scored are still
judged against the whole retrieved set, but its logit a_i is held constant (a stop-gradient): its
triples receive no update through it. What is computed is therefore the *exact* gradient of the
gated loss −log Σ_i P(L_i)·u_i in which every gated path's a_i is a constant at the current point
(``path_loss(..., held_at=...)`` evaluates that loss; a test checks every gradient against its
finite differences). Against the ungated loss (a_i of gated paths free) it coincides for the
units that lie only on scored paths, and differs for α and for units shared with a gated path,
which is the point of the gate. (Dropping gated paths instead would leave a single scored path,
whose softmax gradient is identically zero, whenever the judge gates all the others.)

Edge cases. When every path has the same utility (one path, all U = −1, all U = +1 ...) E does not
depend on the priorities at all, so the gradient is exactly zero and nothing is updated; in
particular E = 0 (all U = −1) gives loss = +∞ with a zero gradient, never NaN. The objective is
relative: a query whose paths are all equally bad carries no information about which to prefer.
Likewise −log E is invariant to scaling every u_i, so only utility ratios matter: among paths that
are all nearly harmful, the least harmful is promoted as strongly as a clearly helpful one would be.

Scored paths only, against a baseline (``step(..., baseline=True)``; DESIGN §4, "Credit in the
real frameworks"). Applied literally to a framework's flat context, eq. 4 puts every retrieved
relationship in the softmax: each step is spread over 1/n of a context of n ≈ 20–40 relationships
(a planted fact needed 8–21 bad ratings to leave the top of one framework's local search), and the
bystanders of other relations are pushed down by every good answer. With ``baseline=True`` the
paths whose utility is ``None`` are left out of the softmax altogether, and one *baseline path*
takes their place: a single virtual unit with the mean S_r of the scored units and the initial
S_c (an untouched relationship), gated as above (neutral utility, logit held). The step is then
the exact gradient of eq. 4 over {scored paths, baseline}: its size depends on how many paths
answer the question (1–3), not on the context's size, and a single scored path still moves — up
when it helped, down when it misled (eq. 4 alone gives a lone path no gradient). The baseline's
score is never stored.

Update (eq. 8–9) with the normalization S_c = clip(raw/scale, 0, 1) chained in: ∂loss/∂raw =
∂loss/∂S_c · (1/scale), and raw descends with rate η·scale², i.e. the step in S_c units is η
(default 0.25). Each step is bounded, |ΔS_c| ≤ ``max_step`` (default 0.1 = 20 raw points, the size
of the paper's Figure 5 updates), and projected onto [0, scale] (where the clip's derivative
vanishes). α descends with its own small rate (default 0.01, bounded by 0.01 per update) inside
``alpha_bounds`` (default [0.05, 0.95]) and is persisted; ``learn_alpha=False`` keeps it fixed.
A large α step lets α slide to its floor and erodes the gain of the scores, hence the small default.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from triage_plugins.contract.errors import ConfigError, FeedbackError, StoreError
from triage_plugins.feedback.priority import (
    PathIndex,
    check_alpha,
    clamp_relevance,
    path_logits,
    path_priorities,
    softmax,
    unit_priority,
)
from triage_plugins.feedback.scores import ContributionScores

__all__ = ["BASELINE", "FeedbackOptimizer", "Gradient", "Update", "loss_and_gradient", "path_loss"]

log = logging.getLogger("triage.feedback.backprop")

_EQUAL_UTILITY = 1e-12
#: Unit id of the baseline path of ``FeedbackOptimizer.step(..., baseline=True)`` (never stored).
BASELINE = "\x00triage.baseline"


@dataclass(frozen=True, slots=True)
class Gradient:
    """Loss and exact gradients for one query.

    :param loss: −log E (``inf`` when E = 0).
    :param expected_utility: E of eq. 4.
    :param path_priority: P(L_i) of eq. 3.
    :param d_sc: ∂loss/∂S_c(t), aligned with ``PathIndex.ids``.
    :param d_alpha: ∂loss/∂α.
    :param informative: ``False`` when all utilities are equal (the gradient is exactly zero).
    """

    loss: float
    expected_utility: float
    path_priority: np.ndarray
    d_sc: np.ndarray
    d_alpha: float
    informative: bool


def _logsumexp(x: np.ndarray) -> float:
    m = float(x.max())
    if m == -math.inf:
        return -math.inf
    return m + math.log(float(np.exp(x - m).sum()))


def _check_utilities(utilities: Sequence[float | None], n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """U as an array (None ↦ neutral 0) and the mask of scored paths (None when all are scored)."""
    if len(utilities) != n:
        raise FeedbackError(f"got {len(utilities)} utilities for {n} paths; give one utility per path")
    scored = np.fromiter((v is not None for v in utilities), dtype=bool, count=n)
    try:
        u = np.fromiter((0.0 if v is None else v for v in utilities), dtype=np.float64, count=n)
    except (TypeError, ValueError):
        raise FeedbackError(f"path utilities must be numbers or None, got {list(utilities)!r}") from None
    if not np.all(np.isfinite(u)) or np.any(np.abs(u) > 1.0):
        raise FeedbackError(f"path utilities must be finite and lie in [-1, 1], got {u.tolist()}")
    return u, (None if scored.all() else scored)


def loss_and_gradient(
    s_r: np.ndarray,
    s_c: np.ndarray,
    alpha: float,
    paths: PathIndex,
    utilities: Sequence[float | None],
    factor: np.ndarray | None = None,
) -> Gradient:
    """Eq. 4 and its gradients w.r.t. every S_c(t) and α (module docstring).

    :param s_r: S_r per unit of ``paths.ids`` (clamped into [RELEVANCE_FLOOR, 1]).
    :param s_c: S_c per unit, in [0, 1].
    :param alpha: α in [0, 1).
    :param utilities: U_i ∈ [−1, 1] per path; ``None`` = gated: neutral in E, its logit held
        constant (module docstring), so the gradients are those of the gated loss.
    :param factor: optional positive multiplier of P(t) per unit (relation suppression); it shifts
        log P(t) by a constant, so the derivatives w.r.t. S_c and α keep the form above.
    """
    if paths.n_paths == 0:
        raise FeedbackError("no paths: the loss of eq. 4 needs at least one retrieved path")
    big_u, scored = _check_utilities(utilities, paths.n_paths)
    u = (big_u + 1.0) / 2.0
    s_r = clamp_relevance(s_r)
    s_c = np.asarray(s_c, dtype=np.float64)
    p = unit_priority(s_r, s_c, alpha)
    log_p = np.log(p) if factor is None else np.log(p * factor)
    a = path_logits(log_p, paths)
    log_pl = a - _logsumexp(a)
    pl = np.exp(log_pl)
    with np.errstate(divide="ignore"):
        log_u = np.log(u)
    log_e = _logsumexp(log_pl + log_u)
    e = math.exp(log_e)
    loss = -log_e
    if float(u.max() - u.min()) <= _EQUAL_UTILITY:
        return Gradient(loss, e, pl, np.zeros(len(paths.ids)), 0.0, False)
    r = np.exp(log_pl + log_u - log_e)
    w = (pl - r) / paths.lengths  # ∂loss/∂a_i · 1/|L_i|
    if scored is not None:
        w = np.where(scored, w, 0.0)
    w_at = w[paths.path_of]
    d_sc = alpha * np.bincount(paths.flat, weights=w_at, minlength=len(paths.ids)) / p
    d_alpha = float(np.dot(w_at, ((s_c - s_r) / p)[paths.flat]))
    return Gradient(loss, e, pl, d_sc, d_alpha, True)


def path_loss(
    s_r: np.ndarray,
    s_c: np.ndarray,
    alpha: float,
    paths: PathIndex,
    utilities: Sequence[float | None],
    factor: np.ndarray | None = None,
    *,
    held_at: tuple[np.ndarray, float] | None = None,
) -> float:
    """Eq. 4 computed directly: −log Σ_i P(L_i)·(U_i + 1)/2, None ↦ 0 (used to check the gradients).

    :param held_at: ``(s_c, alpha)`` at which the logits a_i of the gated paths (utility ``None``)
        are evaluated and held, instead of at the arguments: the gated loss whose exact gradient
        :func:`loss_and_gradient` returns (module docstring). ``None``: every logit is free.
    """
    big_u, scored = _check_utilities(utilities, paths.n_paths)
    if held_at is None or scored is None:
        pl = path_priorities(s_r, s_c, alpha, paths, factor)
    else:
        a = _logits(s_r, s_c, alpha, paths, factor)
        a_held = _logits(s_r, held_at[0], held_at[1], paths, factor)
        pl = softmax(np.where(scored, a, a_held))
    e = float(np.dot(pl, (big_u + 1.0) / 2.0))
    return math.inf if e <= 0.0 else -math.log(e)


def _logits(
    s_r: np.ndarray, s_c: np.ndarray, alpha: float, paths: PathIndex, factor: np.ndarray | None
) -> np.ndarray:
    p = unit_priority(clamp_relevance(s_r), np.asarray(s_c, dtype=np.float64), alpha)
    return path_logits(np.log(p if factor is None else p * factor), paths)


def _with_baseline(
    paths: Sequence[Sequence[str]], utilities: Sequence[float | None], relevance: Mapping[str, float]
) -> tuple[list[Sequence[str]], list[float | None], Mapping[str, float]]:
    """The scored paths plus the baseline path (gated), and S_r with the baseline's: the mean S_r of
    the scored units (module docstring)."""
    kept = [(p, u) for p, u in zip(paths, utilities, strict=True) if u is not None]
    ids = list(dict.fromkeys(i for p, _ in kept for i in p))
    if BASELINE in ids:
        raise FeedbackError(f"{BASELINE!r} is reserved for the baseline path")
    try:
        mean = math.fsum(float(relevance[i]) for i in ids) / len(ids)
    except KeyError as exc:
        raise FeedbackError(f"no relevance S_r given for unit {exc.args[0]!r}") from None
    return (
        [p for p, _ in kept] + [(BASELINE,)],
        [u for _, u in kept] + [None],
        {**{i: relevance[i] for i in ids}, BASELINE: mean},
    )


def _canonical(
    paths: Sequence[Sequence[str]], utilities: Sequence[float | None]
) -> tuple[list[Sequence[str]], list[float | None]]:
    """The paths (and their utilities) sorted by their unit ids, then utility: eq. 3–7 do not depend
    on the order of the paths, but their floating-point sums do, and a framework may list the same
    candidates in another order on every run (a host that sorts a community's relationships by
    fresh random ids). Learned scores are then a function of the set of paths, bit for bit."""
    order = sorted(
        range(len(paths)),
        key=lambda k: (tuple(paths[k]), utilities[k] is None, utilities[k] or 0.0),
    )
    return [paths[k] for k in order], [utilities[k] for k in order]


@dataclass(frozen=True, slots=True)
class Update:
    """What one feedback step changed.

    :param deltas: raw score increment per unit id (only non-zero ones).
    :param alpha_before: α used in the forward pass.
    :param alpha_after: α after the step (equal when fixed).
    :param gradient: the loss and gradients of the step, or ``None`` when no path had a utility.
    :param n_paths: paths that were scored (utility not ``None``).
    """

    deltas: Mapping[str, float]
    alpha_before: float
    alpha_after: float
    gradient: Gradient | None
    n_paths: int


class FeedbackOptimizer:
    """Gradient descent on contribution scores and α (eq. 8–9), persisted through ``scores``.

    :param scores: the contribution scores (store-backed).
    :param eta: learning rate in S_c units (raw rate = eta·scale²); default 0.25.
    :param max_step: bound on |ΔS_c| per unit per update; default 0.1 (20 raw points).
    :param alpha: initial α (learned mode) or the fixed α (``learn_alpha=False``).
    :param learn_alpha: learn α by eq. 9; otherwise α stays at ``alpha``.
    :param eta_alpha: learning rate of α; default 0.01.
    :param max_alpha_step: bound on |Δα| per update; default 0.01.
    :param alpha_bounds: clamp of the learned α, within [0, 1); default (0.05, 0.95).
    """

    def __init__(
        self,
        scores: ContributionScores,
        *,
        eta: float = 0.25,
        max_step: float = 0.1,
        alpha: float = 0.5,
        learn_alpha: bool = True,
        eta_alpha: float = 0.01,
        max_alpha_step: float = 0.01,
        alpha_bounds: tuple[float, float] = (0.05, 0.95),
    ) -> None:
        for name, value in (("eta", eta), ("max_step", max_step), ("eta_alpha", eta_alpha)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a non-negative number, got {value!r}")
        if not (isinstance(max_alpha_step, int | float) and max_alpha_step >= 0):
            raise ConfigError(f"max_alpha_step must be a non-negative number, got {max_alpha_step!r}")
        lo, hi = (check_alpha(b, "alpha_bounds") for b in alpha_bounds)
        if lo > hi:
            raise ConfigError(f"alpha_bounds must be (low, high) with low <= high, got {alpha_bounds!r}")
        self.scores = scores
        self.eta = float(eta)
        self.max_step = float(max_step)
        self.learn_alpha = bool(learn_alpha)
        self.eta_alpha = float(eta_alpha)
        self.max_alpha_step = float(max_alpha_step)
        self.alpha_bounds = (lo, hi)
        self.param_name = f"evorag.{scores.unit}.alpha"
        alpha = check_alpha(alpha)
        if self.learn_alpha:
            stored = scores.get_param(self.param_name)
            if isinstance(stored, int | float) and not isinstance(stored, bool) and math.isfinite(stored):
                alpha = float(stored)
            elif stored is not None:
                log.warning(
                    "ignoring stored %s = %r (not a number); starting from %s", self.param_name, stored, alpha
                )
            alpha = min(max(alpha, lo), hi)
        self._alpha = alpha

    @property
    def alpha(self) -> float:
        """The current α (persisted under ``evorag.<unit>.alpha`` when learned)."""
        return self._alpha

    @property
    def raw_learning_rate(self) -> float:
        """The learning rate on the raw scale: eta·scale² (∂S_c/∂raw = 1/scale on both sides)."""
        return self.eta * self.scores.scale**2

    def step(
        self,
        paths: Sequence[Sequence[str]],
        utilities: Sequence[float | None],
        relevance: Mapping[str, float],
        factor: Mapping[str, float] | None = None,
        *,
        baseline: bool = False,
    ) -> Update:
        """One update from one query's paths (unit ids), utilities (None = no update via that path) and S_r.

        :param relevance: S_r of every unit id on the paths.
        :param factor: optional multiplier of P(t) per unit id (suppression), default 1.
        :param baseline: leave the paths whose utility is ``None`` out and add the baseline path
            (module docstring).
        """
        if len(utilities) != len(paths):
            raise FeedbackError(f"got {len(utilities)} utilities for {len(paths)} paths")
        alpha = self._alpha
        n_scored = sum(u is not None for u in utilities)
        if n_scored == 0:
            return Update({}, alpha, alpha, None, 0)
        first_seen = dict.fromkeys(i for p in paths for i in p)
        paths, utilities = _canonical(paths, utilities)
        if baseline:
            paths, utilities, relevance = _with_baseline(paths, utilities, relevance)
        index = PathIndex.build(paths)
        try:
            s_r = np.fromiter((relevance[i] for i in index.ids), dtype=np.float64, count=len(index.ids))
        except KeyError as exc:
            raise FeedbackError(f"no relevance S_r given for unit {exc.args[0]!r}") from None
        fac = None
        if factor:
            fac = np.fromiter((factor.get(i, 1.0) for i in index.ids), dtype=np.float64, count=len(index.ids))
        if baseline:  # the baseline is the last unit: an untouched score, never read from the store
            raw = np.append(self.scores.raw(index.ids[:-1]), self.scores.init)
        else:
            raw = self.scores.raw(index.ids)
        s_c = self.scores.normalize(raw)
        grad = loss_and_gradient(s_r, s_c, alpha, index, utilities, fac)
        if not grad.informative:
            return Update({}, alpha, alpha, grad, n_scored)
        found = self._raw_deltas(index.ids, raw, grad.d_sc)
        deltas = {i: found[i] for i in first_seen if i in found}  # in the order the paths named them
        new_alpha = self._write_step(deltas, grad.d_alpha)
        return Update(deltas, alpha, new_alpha, grad, n_scored)

    def _write_step(self, deltas: Mapping[str, float], d_alpha: float) -> float:
        """Add the raw score ``deltas``, then step α (eq. 8–9); returns the new α."""
        self.scores.add(deltas)
        return self._alpha_step(d_alpha)

    def _raw_deltas(self, ids: Sequence[str], raw: np.ndarray, d_sc: np.ndarray) -> dict[str, float]:
        scale = self.scores.scale
        d_raw = d_sc / scale  # chain rule through S_c = raw/scale
        step = -self.raw_learning_rate * d_raw  # = −eta·scale·∂loss/∂S_c
        bound = self.max_step * scale
        step = step.clip(-bound, bound)
        target = (raw + step).clip(0.0, scale)  # projection onto the clip's range
        # Bounded again: a raw outside [0, scale] (workers projecting from stale caches at once push
        # the stored sum out) would otherwise be pulled back whole by each of them, and grow without end.
        delta = np.where(d_sc != 0.0, (target - raw).clip(-bound, bound), 0.0)
        nonzero = np.flatnonzero(delta)
        return dict(zip(map(ids.__getitem__, nonzero.tolist()), delta[nonzero].tolist(), strict=True))

    def _alpha_step(self, d_alpha: float) -> float:
        """Step α by eq. 9 (bounded, clamped); on a store with an atomic ``add_param`` the step is
        added to the stored α in one statement, so steps of other processes sharing the store are
        kept (a plain write of the new value would overwrite them)."""
        if not self.learn_alpha or not math.isfinite(d_alpha):
            return self._alpha
        lo, hi = self.alpha_bounds
        change = max(-self.max_alpha_step, min(self.max_alpha_step, -self.eta_alpha * d_alpha))
        add_param = getattr(self.scores.store, "add_param", None)
        if add_param is not None and change != 0.0:
            try:
                self._alpha = float(add_param(self.param_name, change, initial=self._alpha, bounds=(lo, hi)))
                return self._alpha
            except StoreError as exc:  # a stored α that is not a number: replaced, as below
                log.warning("could not step %s in the store (%s); writing it", self.param_name, exc)
        new = min(max(self._alpha + change, lo), hi)
        if new != self._alpha:
            self._alpha = new
            self.scores.set_param(self.param_name, new)
        return new
