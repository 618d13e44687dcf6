"""Forward computation of EvoRAG's hybrid priority (EvoRAG §4.3.1, eq. 2–3; §5.2).

    P(t)   = (1 − α)·S_r(t) + α·S_c(t)                                   (eq. 2)
    a_i    = (1/|L_i|)·Σ_{t∈L_i} log P(t)                                (eq. 3, inner)
    P(L_i) = exp(a_i) / Σ_j exp(a_j)                                     (eq. 3)

S_r ∈ (0, 1] is the query relevance: the paper requires it strictly positive, so every relevance is
clamped to [``RELEVANCE_FLOOR``, 1] and log P(t) stays finite for any α < 1 (α is kept below 1 by
the optimizer's bounds). A repeated triple in a path counts once per occurrence (n_{i,t}).

Paths are flattened once into a :class:`PathIndex` (unique unit ids, the unit index of every
position, the path of every position, path lengths); all sums are ``np.bincount`` over it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from triage_plugins.contract.errors import ConfigError, FeedbackError
from triage_plugins.contract.graph_view import normalize_label

__all__ = [
    "RELEVANCE_FLOOR",
    "EmbeddingRelevance",
    "PathIndex",
    "Relevance",
    "check_alpha",
    "clamp_relevance",
    "path_logits",
    "path_priorities",
    "softmax",
    "token_relevance",
    "unit_priority",
]

RELEVANCE_FLOOR = 1e-3
"""Smallest S_r: eq. 2 needs S_r ∈ (0, 1], and log P(t) must stay finite."""

Relevance = Callable[[str, Sequence[str]], np.ndarray]
"""``relevance(query, texts) -> S_r`` of each text, in (0, 1]."""


@dataclass(frozen=True, slots=True)
class PathIndex:
    """Paths L_1…L_n over unit ids, flattened for vectorized sums.

    :param ids: the distinct unit ids, in first-seen order.
    :param flat: unit index (into ``ids``) of every position of every path.
    :param path_of: path index of every position.
    :param lengths: |L_i| (repeats counted).
    """

    ids: tuple[str, ...]
    flat: np.ndarray
    path_of: np.ndarray
    lengths: np.ndarray

    @classmethod
    def build(cls, paths: Sequence[Sequence[str]]) -> PathIndex:
        """Index ``paths`` (each a non-empty sequence of unit ids)."""
        lengths = [len(path) for path in paths]
        if 0 in lengths:
            raise FeedbackError(f"path {lengths.index(0)} is empty; a reasoning path needs at least one unit")
        flat_ids = [uid for path in paths for uid in path]
        ids = tuple(dict.fromkeys(flat_ids))
        position = {uid: k for k, uid in enumerate(ids)}
        lens = np.asarray(lengths, dtype=np.intp)
        return cls(
            ids=ids,
            flat=np.fromiter(map(position.__getitem__, flat_ids), dtype=np.intp, count=len(flat_ids)),
            path_of=np.repeat(np.arange(len(lens), dtype=np.intp), lens),
            lengths=lens,
        )

    @property
    def n_paths(self) -> int:
        return len(self.lengths)


def clamp_relevance(s_r: np.ndarray | Sequence[float]) -> np.ndarray:
    """S_r clamped into [RELEVANCE_FLOOR, 1]."""
    return np.asarray(s_r, dtype=np.float64).clip(RELEVANCE_FLOOR, 1.0)


def unit_priority(s_r: np.ndarray, s_c: np.ndarray, alpha: float) -> np.ndarray:
    """P(t) = (1 − α)·S_r(t) + α·S_c(t) (eq. 2)."""
    return (1.0 - alpha) * s_r + alpha * s_c


def path_logits(log_p: np.ndarray, paths: PathIndex) -> np.ndarray:
    """a_i = (1/|L_i|)·Σ_{t∈L_i} log P(t), from log P per unit id."""
    sums = np.bincount(paths.path_of, weights=log_p[paths.flat], minlength=paths.n_paths)
    return sums / paths.lengths


def softmax(a: np.ndarray) -> np.ndarray:
    """Numerically stable softmax."""
    z = np.exp(a - a.max())
    return z / z.sum()


def path_priorities(
    s_r: np.ndarray,
    s_c: np.ndarray,
    alpha: float,
    paths: PathIndex,
    factor: np.ndarray | None = None,
) -> np.ndarray:
    """P(L_i) of eq. 3; ``factor`` (per unit, e.g. suppression) multiplies P(t) before the log."""
    p = unit_priority(clamp_relevance(s_r), np.asarray(s_c, dtype=np.float64), alpha)
    if factor is not None:
        p = p * factor
    return softmax(path_logits(np.log(p), paths))


# --------------------------------------------------------------------------- relevance S_r


class EmbeddingRelevance:
    """S_r from an embedder: cosine(query, text) mapped by (1 + cos)/2 into [0, 1], then floored.

    (1 + cos)/2 is the monotone bijection [−1, 1] → [0, 1]; for embedders whose vectors are
    non-negative (bags of words, hashing embedders) it lands in [0.5, 1], which only compresses
    the scale — the ranking by S_r is unchanged.

    :param embed: ``embed(texts) -> array (len(texts), dim)``.
    """

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray]) -> None:
        self.embed = embed

    def __call__(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        vecs = np.asarray(self.embed([query, *texts]), dtype=np.float64)
        norms = np.linalg.norm(vecs, axis=1)
        norms[norms == 0] = 1.0
        unit = vecs / norms[:, None]
        cos = unit[1:] @ unit[0]
        return clamp_relevance((1.0 + cos) / 2.0)


_TOKEN = re.compile(r"\w+")


def token_relevance(query: str, texts: Sequence[str]) -> np.ndarray:
    """Default S_r without an embedder: the share of a text's distinct tokens found in the query.

    Tokens are words of :func:`~triage_plugins.contract.graph_view.normalize_label`; the result is floored at
    RELEVANCE_FLOOR. A stand-in used only when the framework supplied no relevance of its own
    (through ``triage_rerank``) and no embedder is configured.
    """
    q = _tokens(query)
    out = np.empty(len(texts))
    for k, text in enumerate(texts):
        toks = _tokens(text)
        out[k] = len(toks & q) / len(toks) if toks else 0.0
    return clamp_relevance(out)


@functools.lru_cache(maxsize=1 << 16)
def _tokens(text: str) -> frozenset[str]:
    """The distinct tokens of a text (memoized: the same triple texts recur query after query)."""
    return frozenset(_TOKEN.findall(normalize_label(text)))


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """α must lie in [0, 1) so that P(t) ≥ (1 − α)·RELEVANCE_FLOOR > 0."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not math.isfinite(alpha):
        raise ConfigError(f"{name} must be a number in [0, 1), got {alpha!r}")
    if not 0.0 <= alpha < 1.0:
        raise ConfigError(f"{name} must lie in [0, 1) so that log P(t) stays finite, got {alpha!r}")
    return float(alpha)
