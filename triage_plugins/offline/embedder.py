"""A hashing embedder: character n-grams hashed into a fixed dimension (DESIGN §5).

Text is normalized (NFKC, casefold, punctuation and underscores to spaces, spaces collapsed) and
padded with one space each side; every character n-gram (n in ``ngram_range``, default 3-5) is
hashed with a fixed polynomial hash over Unicode code points followed by the splitmix64 finalizer
(stable across processes, unlike Python's salted ``hash``). The hash picks a bucket and a sign
(signed feature hashing, so collisions cancel in expectation); the counts are L2-normalized into
float32. Strings that share many n-grams get a high cosine, unrelated strings a cosine near 0.

The whole batch is hashed at once with numpy (no Python loop over n-grams).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.graph_view import normalize_label

__all__ = ["HashingEmbedder"]

_BASE = np.uint64(0x100000001B3)  # FNV-64 prime as the polynomial base
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = 0x9E3779B97F4A7C15


def _splitmix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


class HashingEmbedder:
    """Deterministic text embeddings without a model.

    :param dim: output dimension (default 256).
    :param ngram_range: smallest and largest character n-gram (default 3-5).
    :param seed: changes every hash (different seeds give independent embeddings).
    """

    def __init__(self, dim: int = 256, ngram_range: tuple[int, int] = (3, 5), seed: int = 0) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
            raise ConfigError(f"HashingEmbedder: dim must be a whole number >= 2, got {dim!r}")
        low, high = ngram_range
        if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
            raise ConfigError(
                f"HashingEmbedder: ngram_range must be (low, high) with 1 <= low <= high, got {ngram_range!r}"
            )
        self.dim = dim
        self.ngram_range = (low, high)
        self.seed = seed

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim}, ngram_range={self.ngram_range}, seed={self.seed})"

    def embed(self, texts: Iterable[str]) -> np.ndarray:
        """An ``(n, dim)`` float32 array of L2-normalized embeddings (all-zero for empty text)."""
        items = [texts] if isinstance(texts, str) else list(texts)
        n = len(items)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        padded = [f" {normalize_label(t)} " for t in items]
        lengths = np.fromiter((len(p) for p in padded), dtype=np.int64, count=n)
        codes = np.frombuffer("".join(padded).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        row_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
        end_of = np.repeat(starts + lengths, lengths)  # end offset of each position's own text
        positions = np.arange(codes.size, dtype=np.int64)
        seed = np.uint64((self.seed * _GOLDEN) % 2**64)
        low, high = self.ngram_range
        cells: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        with np.errstate(over="ignore"):
            h = np.full(codes.size, seed, dtype=np.uint64)
            for k in range(high):
                # h[i] = hash of the n-gram of length k + 1 starting at position i
                shifted = np.zeros_like(codes)
                if k < codes.size:
                    shifted[: codes.size - k] = codes[k:]
                h = h * _BASE + shifted + np.uint64(1)
                if k + 1 < low:
                    continue
                valid = positions + k + 1 <= end_of
                mixed = _splitmix(h[valid] ^ np.uint64(k + 1))
                buckets = (mixed % np.uint64(self.dim)).astype(np.int64)
                signs = np.where((mixed >> np.uint64(63)) == 1, -1.0, 1.0)
                cells.append(row_of[valid] * self.dim + buckets)
                weights.append(signs)
        flat = np.bincount(np.concatenate(cells), weights=np.concatenate(weights), minlength=n * self.dim)
        matrix = flat.astype(np.float64).reshape(n, self.dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        np.divide(matrix, norms, out=matrix, where=norms > 0)
        return matrix.astype(np.float32)

    def __call__(self, texts: Iterable[str]) -> np.ndarray:
        return self.embed(texts)

    def embed_one(self, text: str) -> np.ndarray:
        """The ``(dim,)`` embedding of one text."""
        return self.embed([text])[0]

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two texts (0.0 when either is empty after normalization)."""
        va, vb = self.embed([a, b])
        return float(np.dot(va, vb))

    def similarity_matrix(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """``(len(a), len(b))`` cosine similarities."""
        return self.embed(a) @ self.embed(b).T
