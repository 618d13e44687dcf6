"""Multiple comparisons for the pairwise differences of ``triage compare``: a p-value per paired
difference, read off the same clustered bootstrap as its BCa interval, and Holm's step-down adjustment
over a family of them (Holm 1979, "A simple sequentially rejective multiple test procedure").

With m rows a comparison makes m(m−1)/2 pairwise tests; at 95 % each, about 5 % of the true-null
pairs would be marked significant by chance. Holm controls the family-wise error rate at α for any
dependence between the tests and rejects at least as many as Bonferroni.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.special import ndtr, ndtri

from triage_plugins.diagnosis.calibration import bca_terms, cluster_picks

__all__ = ["bca_p_value", "holm_adjust"]


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order: the k-th smallest p becomes
    max over j ≤ k of min(1, (m − j + 1)·p_(j)); reject where the adjusted p < α."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def _cluster_sums(
    a: Mapping[str, float], b: Mapping[str, float], clusters: Mapping[str, str]
) -> tuple[np.ndarray, np.ndarray]:
    """Per cluster (sorted as the interval's bootstrap sorts them): Σ(a − b) and the question count."""
    common = sorted(set(a) & set(b))
    labels = np.asarray([str(clusters.get(q, q)) for q in common])
    diff = np.asarray([a[q] - b[q] for q in common], dtype=float)
    names, inverse = np.unique(labels, return_inverse=True)
    return np.bincount(inverse, diff, len(names)), np.bincount(inverse, None, len(names))


def bca_p_value(
    a: Mapping[str, float],
    b: Mapping[str, float],
    clusters: Mapping[str, str],
    *,
    seed: int = 0,
    n_resamples: int = 2000,
) -> float | None:
    """Two-sided p-value of mean(a) − mean(b) = 0 over the shared questions: the BCa achieved
    significance level (Efron & Tibshirani 1993, §15.4), from the cluster resamples that
    :func:`~triage_plugins.diagnosis.intervals.paired_difference` draws for the same ``seed``, so
    p < 1 − c exactly when its level-c interval excludes 0 (up to quantile interpolation).
    ``None`` with fewer than two shared clusters; 1.0 when a and b agree on every question."""
    sums, counts = _cluster_sums(a, b, clusters)
    k = len(sums)
    if k < 2:
        return None
    estimate = float(sums.sum() / counts.sum())
    picks = cluster_picks(k, n_resamples, seed)  # the interval's own resamples (same clusters, order)
    boot = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    if np.all(boot == estimate):
        return 1.0
    jack = (sums.sum() - sums) / (counts.sum() - counts)
    return _asl(estimate, boot, jack)


def _share_below(boot: np.ndarray, value: float, *, ties: float) -> float:
    """Share of resamples below ``value``, ties counted ``ties`` (0 or 1), kept inside (0, 1)."""
    share = (np.sum(boot < value) + ties * np.sum(boot == value)) / len(boot)
    return float(min(max(share, 0.5 / len(boot)), 1 - 0.5 / len(boot)))


def _asl(estimate: float, boot: np.ndarray, jack: np.ndarray) -> float:
    """The two-sided BCa level at which an interval's end reaches 0 (the BCa map, inverted); resamples
    equal to 0 count against the difference, as an interval ending at 0 does not exclude it."""
    z0, accel = bca_terms(estimate, boot, jack)  # the interval's own z0 and acceleration

    def level(share: float) -> float:
        w = float(ndtri(share)) - z0
        return float(ndtr(w / (1 + accel * w) - z0))

    lower = level(_share_below(boot, 0.0, ties=1.0))  # the low end reaches 0 at this α
    upper = 1 - level(_share_below(boot, 0.0, ties=0.0))  # the high end reaches 0 at this α
    return min(1.0, 2 * min(lower, upper))
