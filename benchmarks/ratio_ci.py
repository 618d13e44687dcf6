"""A bootstrap interval for a cost ratio measured in paired blocks, so that a target such as "total
CPU <= 1.03" (issue #20) can be judged on a shared machine whose speed drifts between runs.

Each benchmark runs a plain and an instrumented block back to back (or one query each), so drift
hits both sides of a pair alike; resampling the pairs together keeps that pairing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["cost_interval", "format_interval"]


def cost_interval(
    plain: Sequence[float],
    traced: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``sum(traced) / sum(plain)`` over paired blocks; ``None``
    with fewer than 2 pairs, unequal lengths or a zero plain sample."""
    if len(plain) != len(traced) or len(plain) < 2:
        return None
    pairs = list(zip(plain, traced, strict=True))
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        sample = rng.choices(pairs, k=len(pairs))
        base = sum(p for p, _ in sample)
        if base <= 0:
            return None
        ratios.append(sum(t for _, t in sample) / base)
    ratios.sort()
    tail = (1.0 - level) / 2.0
    low = ratios[int(tail * (resamples - 1))]
    high = ratios[int((1.0 - tail) * (resamples - 1))]
    return low, high


def format_interval(interval: tuple[float, float] | None) -> str:
    """``0.987-1.052``, or ``n/a``."""
    return "n/a" if interval is None else f"{interval[0]:.3f}-{interval[1]:.3f}"
