"""Threshold calibration and bootstrap confidence intervals (TRIAGE §5.1–5.2).

* :func:`youden_threshold` — the operating point θ of a metric for predicting a failure outcome,
  maximizing Youden's J = sensitivity + specificity − 1 where a query is *classified failing* when its
  metric value is ≤ t. Like the paper (θ_ERC = 0.67 on the PQ-3H probe) it reports θ as the **largest
  metric value still classified as failing**; ``cutoff`` is the midpoint to the next observed value,
  the number to configure for the chain's strict ``value < θ`` rule.
* :func:`bca_interval` — bias-corrected and accelerated bootstrap CI (Efron 1987), seeded.
* :func:`clustered_bca_interval` — the same, resampling whole clusters (questions) rather than
  observations, for pooled question-by-retriever data (§5.1: "480 observations should not be read as
  480 independent questions").

numpy/scipy only; every random draw comes from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from triage_plugins.contract.errors import ConfigError

__all__ = [
    "Interval",
    "Youden",
    "bca_interval",
    "bca_terms",
    "cluster_picks",
    "clustered_bca_interval",
    "youden_j",
    "youden_threshold",
]

Statistic = Callable[..., float]


# --------------------------------------------------------------------------- Youden


@dataclass(frozen=True, slots=True)
class Youden:
    """A Youden-optimal threshold for predicting failure from low metric values.

    :param threshold: the largest metric value classified as failing (``None`` when undefined).
    :param cutoff: a value between ``threshold`` and the next observed value: ``metric < cutoff``
        classifies exactly like ``metric <= threshold`` on the data.
    :param j: Youden's J at the threshold.
    :param n_dropped: observations left out because the metric or the outcome was N/A.
    """

    threshold: float | None
    cutoff: float | None
    j: float | None
    sensitivity: float | None
    specificity: float | None
    n: int
    n_failed: int
    n_dropped: int = 0
    reason: str | None = None


def _clean(values: Sequence[Any], failed: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, int]:
    if len(values) != len(failed):
        raise ConfigError(
            f"need one outcome per metric value, got {len(values)} values and {len(failed)} outcomes"
        )
    x = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    y = np.array([np.nan if f is None else float(bool(f)) for f in failed], dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep].astype(bool), int((~keep).sum())


def _best_split(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float, int]:
    """(j, threshold, sensitivity, specificity, index into the sorted unique values)."""
    order = np.argsort(x, kind="stable")
    xs, ys = x[order], y[order]
    n_fail = ys.sum()
    n_ok = len(ys) - n_fail
    uniq = np.unique(xs)
    # cumulative counts of failing / passing observations with value <= each unique value
    ends = np.searchsorted(xs, uniq, side="right")
    fail_le = np.cumsum(ys)[ends - 1]
    ok_le = ends - fail_le
    sens = fail_le / n_fail
    spec = (n_ok - ok_le) / n_ok
    j = sens + spec - 1.0
    best = int(np.argmax(j))  # first maximum: the smallest threshold among ties (fewest flagged)
    return float(j[best]), float(uniq[best]), float(sens[best]), float(spec[best]), best


def youden_j(values: Sequence[Any], failed: Sequence[Any]) -> float:
    """The maximal Youden J over thresholds (NaN when either class is empty); a bootstrap statistic."""
    x, y, _ = _clean(values, failed)
    if y.all() or not y.any():
        return math.nan
    return _best_split(x, y)[0]


def youden_threshold(values: Sequence[Any], failed: Sequence[Any]) -> Youden:
    """Youden-optimal θ for predicting ``failed`` from low ``values`` (TRIAGE §5.1, §5.2).

    :param values: the metric per observation (``None``/NaN are dropped and counted).
    :param failed: truthy when the observation failed (``None`` dropped).
    """
    x, y, dropped = _clean(values, failed)
    n, n_fail = len(x), int(y.sum())
    if n == 0:
        return Youden(
            None, None, None, None, None, 0, 0, dropped, "no observation with both metric and outcome"
        )
    if n_fail == 0 or n_fail == n:
        why = "every observation failed" if n_fail == n else "no observation failed"
        return Youden(None, None, None, None, None, n, n_fail, dropped, f"{why}: J is undefined")
    j, theta, sens, spec, best = _best_split(x, y)
    if j <= 0:
        return Youden(
            None, None, j, sens, spec, n, n_fail, dropped, "the metric does not separate failures (J <= 0)"
        )
    uniq = np.unique(x)
    cutoff = (theta + float(uniq[best + 1])) / 2 if best + 1 < len(uniq) else math.nextafter(theta, math.inf)
    return Youden(theta, cutoff, j, sens, spec, n, n_fail, dropped)


# --------------------------------------------------------------------------- bootstrap


@dataclass(frozen=True, slots=True)
class Interval:
    """A bootstrap confidence interval.

    :param method: ``"bca"``, or ``"degenerate"`` when every resample gave the estimate.
    :param n: observations; ``n_clusters``: resampling units (equal to ``n`` when not clustered).
    :param n_failed: resamples whose statistic was NaN (dropped).
    """

    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    n: int
    n_clusters: int
    n_resamples: int
    n_failed: int = 0

    @property
    def width(self) -> float:
        return self.high - self.low


def _as_arrays(data: Any) -> tuple[np.ndarray, ...]:
    arrays = (
        tuple(np.asarray(a, dtype=float) for a in data)
        if isinstance(data, tuple)
        else (np.asarray(data, dtype=float),)
    )
    n = len(arrays[0])
    if any(a.ndim != 1 or len(a) != n for a in arrays):
        raise ConfigError("bootstrap data must be a 1-D array or a tuple of equal-length 1-D arrays")
    if n < 2:
        raise ConfigError(f"a bootstrap needs at least 2 observations, got {n}")
    return arrays


def bca_terms(estimate: float, boot: np.ndarray, jack: np.ndarray) -> tuple[float, float]:
    """The BCa bias correction z0 and acceleration a (Efron 1987) of ``estimate`` from its bootstrap
    replicates ``boot`` (no NaN) and jackknife values ``jack`` (leave one unit out)."""
    # Bias correction z0; ties count half, which keeps discrete statistics (thresholds) unbiased.
    below = (np.sum(boot < estimate) + 0.5 * np.sum(boot == estimate)) / len(boot)
    below = min(max(below, 0.5 / len(boot)), 1 - 0.5 / len(boot))
    z0 = float(ndtri(below))
    # Acceleration from the jackknife.
    diffs = jack.mean() - jack if len(jack) else np.zeros(1)
    denom = 6.0 * float(np.sum(diffs**2)) ** 1.5
    a = float(np.sum(diffs**3)) / denom if denom > 0 else 0.0
    return z0, a


def _bca(
    estimate: float,
    boot: np.ndarray,
    jack: np.ndarray,
    confidence: float,
    n: int,
    n_clusters: int,
    n_resamples: int,
) -> Interval:
    failed = int(np.isnan(boot).sum())
    boot = boot[~np.isnan(boot)]
    jack = jack[~np.isnan(jack)]
    if len(boot) == 0 or (np.all(boot == boot[0]) and boot[0] == estimate):
        return Interval(
            estimate, estimate, estimate, confidence, "degenerate", n, n_clusters, n_resamples, failed
        )
    z0, a = bca_terms(estimate, boot, jack)
    alpha = (1.0 - confidence) / 2
    levels = []
    for z_alpha in (ndtri(alpha), ndtri(1 - alpha)):
        shift = z0 + z_alpha
        levels.append(float(ndtr(z0 + shift / (1 - a * shift))))
    low, high = np.quantile(boot, levels)
    return Interval(estimate, float(low), float(high), confidence, "bca", n, n_clusters, n_resamples, failed)


def _check(confidence: float, n_resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence!r}")
    if n_resamples < 100:
        raise ConfigError(f"n_resamples must be at least 100, got {n_resamples!r}")


def _call(statistic: Statistic, arrays: tuple[np.ndarray, ...], idx: np.ndarray) -> float:
    with np.errstate(all="ignore"):
        value = statistic(*(a[idx] for a in arrays))
    return math.nan if value is None else float(value)


def bca_interval(
    data: Any,
    statistic: Statistic = np.mean,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """BCa bootstrap CI of ``statistic(*data)`` (TRIAGE §5.2, Efron 1987).

    :param data: a 1-D array, or a tuple of equal-length arrays resampled jointly (paired rows).
    :param statistic: maps the (resampled) arrays to a number; NaN results are dropped and counted.
    """
    _check(confidence, n_resamples)
    arrays = _as_arrays(data)
    n = len(arrays[0])
    everything = np.arange(n)
    estimate = _call(statistic, arrays, everything)
    if math.isnan(estimate):
        raise ConfigError("the statistic is undefined (NaN) on the full data")
    rng = np.random.default_rng(seed)
    boot = np.array([_call(statistic, arrays, rng.integers(0, n, n)) for _ in range(n_resamples)])
    jack = np.array([_call(statistic, arrays, np.delete(everything, i)) for i in range(n)])
    return _bca(estimate, boot, jack, confidence, n, n, n_resamples)


def cluster_picks(k: int, n_resamples: int, seed: int) -> np.ndarray:
    """The cluster bootstrap's resamples: row ``b`` holds the ``k`` cluster indices (0 … k−1, drawn
    with replacement) of resample ``b``, from ``numpy.random.default_rng(seed)``, one row per draw
    call; :func:`clustered_bca_interval` and
    :func:`~triage_plugins.diagnosis.multiple.bca_p_value` both resample through it."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, k, k) for _ in range(n_resamples)])


def clustered_bca_interval(
    data: Any,
    clusters: Sequence[Any],
    statistic: Statistic = np.mean,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """BCa CI resampling whole clusters with replacement (the cluster bootstrap).

    Use it when observations share a unit — TRIAGE §5.1 pools five retrievers per question, so the
    question is the cluster. The jackknife for the acceleration leaves one cluster out at a time.

    :param clusters: one cluster label per observation (for example the question id).
    """
    _check(confidence, n_resamples)
    arrays = _as_arrays(data)
    n = len(arrays[0])
    if len(clusters) != n:
        raise ConfigError(f"need one cluster label per observation, got {len(clusters)} for {n}")
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    members = [np.flatnonzero(inverse == k) for k in range(inverse.max() + 1)]
    k = len(members)
    if k < 2:
        raise ConfigError("a cluster bootstrap needs at least 2 clusters")
    estimate = _call(statistic, arrays, np.arange(n))
    if math.isnan(estimate):
        raise ConfigError("the statistic is undefined (NaN) on the full data")
    boot = np.empty(n_resamples)
    for b, picks in enumerate(cluster_picks(k, n_resamples, seed)):
        boot[b] = _call(statistic, arrays, np.concatenate([members[c] for c in picks]))
    jack = np.array(
        [
            _call(statistic, arrays, np.concatenate([members[c] for c in range(k) if c != left]))
            for left in range(k)
        ]
    )
    return _bca(estimate, boot, jack, confidence, n, k, n_resamples)
