"""95 % intervals for per-question rates of a comparison, and paired differences between rows
(TRIAGE §5.2: bootstrap over questions, BCa, clustered where questions share a unit).

Questions that share a topic entity are not independent draws (two questions about one person fail
or succeed together), so the resampling unit is a *cluster*: the connected components of the
graph linking two questions when their gold entities intersect (:func:`question_clusters`).

Everything is deterministic for a fixed ``seed``: questions are ordered by id, clusters are named by
their smallest question id, and every draw comes from ``numpy.random.default_rng(seed)``; nothing
depends on ``PYTHONHASHSEED``, on set iteration order or on the order events arrived in.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from triage_plugins.diagnosis.calibration import Interval, clustered_bca_interval

__all__ = [
    "format_interval",
    "metric_seed",
    "paired_difference",
    "question_clusters",
    "rate_interval",
    "seed_interval",
]


def question_clusters(entities: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Question id -> cluster label: the smallest question id of its component, two questions being
    linked when they share an entity. A question with no entity is its own cluster."""
    parent = {q: q for q in entities}

    def find(q: str) -> str:
        while parent[q] != q:
            parent[q] = parent[parent[q]]
            q = parent[q]
        return q

    first: dict[str, str] = {}
    for q in sorted(entities):
        for e in sorted(set(entities[q])):
            other = first.setdefault(e, q)
            a, b = find(q), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {q: find(q) for q in sorted(entities)}


def metric_seed(seed: int, metric: str) -> int:
    """The bootstrap seed of one metric: ``seed`` mixed with a stable checksum of its name (the same
    for every row, so rows over the same questions draw the same resamples)."""
    return (int(seed) * 1_000_003 + zlib.crc32(metric.encode())) % 2**32


def _aligned(values: Mapping[str, float], clusters: Mapping[str, str]) -> tuple[list[str], list[str]]:
    ids = sorted(values)
    return ids, [clusters.get(q, q) for q in ids]


def rate_interval(
    values: Mapping[str, float],
    clusters: Mapping[str, str],
    *,
    seed: int = 0,
    n_resamples: int = 2000,
    confidence: float = 0.95,
) -> Interval | None:
    """The clustered BCa interval of the mean of ``values`` (question id -> 0/1 or a number);
    ``None`` with fewer than two clusters (no interval can be estimated)."""
    ids, labels = _aligned(values, clusters)
    if len(set(labels)) < 2:
        return None
    data = np.array([values[q] for q in ids], dtype=float)
    return clustered_bca_interval(data, labels, n_resamples=n_resamples, confidence=confidence, seed=seed)


def _difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(a.mean() - b.mean())


def paired_difference(
    a: Mapping[str, float],
    b: Mapping[str, float],
    clusters: Mapping[str, str],
    *,
    seed: int = 0,
    n_resamples: int = 2000,
    confidence: float = 0.95,
) -> Interval | None:
    """The clustered BCa interval of mean(a) − mean(b) over the questions both rows answered,
    resampled jointly (paired); ``None`` with fewer than two shared clusters. The difference is
    significant at ``confidence`` when the interval excludes 0."""
    common = sorted(set(a) & set(b))
    labels = [clusters.get(q, q) for q in common]
    if len(set(labels)) < 2:
        return None
    data = (np.array([a[q] for q in common], dtype=float), np.array([b[q] for q in common], dtype=float))
    if np.array_equal(data[0], data[1]):
        return Interval(0.0, 0.0, 0.0, confidence, "degenerate", len(common), len(set(labels)), n_resamples)
    return clustered_bca_interval(
        data, labels, _difference, n_resamples=n_resamples, confidence=confidence, seed=seed
    )


def seed_interval(
    values: Sequence[float],
    *,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = (0.0, 1.0),
) -> Interval | None:
    """The Student-t interval of the mean of one rate over corpus seeds (one value per seed, each seed
    an independent corpus): mean ± t(1 − α/2, n − 1)·s/√n, clipped to ``bounds`` (a rate's range;
    ``None``: not clipped); ``None`` with fewer than two seeds. A bootstrap over a handful of seeds
    would understate the spread, hence t."""
    from scipy.stats import t

    n = len(values)
    if n < 2:
        return None
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    half = float(t.ppf(0.5 + confidence / 2, n - 1) * data.std(ddof=1) / np.sqrt(n))
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Interval(mean, low, high, confidence, "t over seeds", n, n, 0)


def format_interval(iv: Interval | None, digits: int = 3) -> str:
    """``"[low, high]"`` for a table cell next to the estimate; ``""`` without an interval."""
    if iv is None:
        return ""
    return f"[{iv.low:.{digits}f}, {iv.high:.{digits}f}]"
