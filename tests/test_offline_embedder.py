"""The hashing embedder: shape, normalization, stability, similarity ordering, speed (DESIGN §5)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from triage_plugins.contract.errors import ConfigError
from triage_plugins.offline.embedder import HashingEmbedder


def test_shape_dtype_and_unit_norm():
    e = HashingEmbedder(dim=64)
    m = e.embed(["Christopher Nolan", "Valdoria", "a"])
    assert m.shape == (3, 64) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-6)
    assert e.embed([]).shape == (0, 64)
    assert e.embed_one("x y").shape == (64,)


def test_empty_text_is_the_zero_vector():
    e = HashingEmbedder()
    assert not e.embed([""]).any()
    assert not e.embed(["  ...  "]).any()  # nothing left after normalization
    assert e.similarity("", "Christopher Nolan") == 0.0


def test_normalization_makes_surface_variants_identical():
    e = HashingEmbedder()
    assert e.similarity("directed_by", "Directed By") == pytest.approx(1.0, abs=1e-6)
    assert e.similarity("place of birth", "place_of_birth") == pytest.approx(1.0, abs=1e-6)


def test_similar_strings_score_higher_than_unrelated_ones():
    e = HashingEmbedder()
    alias = e.similarity("Christopher Nolan", "Chris Nolan")
    partial = e.similarity("The Glass Orchard", "Glass Orchard")
    unrelated = [
        e.similarity("Christopher Nolan", "Valdoria"),
        e.similarity("Port Elira", "Kestrel Bay"),
        e.similarity("born in", "nationality"),
    ]
    assert partial > alias > 0.4
    assert max(unrelated) < 0.2
    # ordering among three candidates for one query
    sims = e.similarity_matrix(["Chris Nolan"], ["Christopher Nolan", "Chris Evans", "Valdoria"])[0]
    assert sims[0] > sims[1] > sims[2]


def test_embeddings_are_stable_across_processes_and_seeds_differ():
    code = "from triage_plugins.offline.embedder import HashingEmbedder as H; print(H(dim=32).embed(['Chris Nolan']).tobytes().hex())"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": root}
        outs.add(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
            ).stdout.strip()
        )
    assert outs == {HashingEmbedder(dim=32).embed(["Chris Nolan"]).tobytes().hex()}
    assert not np.array_equal(
        HashingEmbedder(seed=1).embed(["Chris Nolan"]), HashingEmbedder(seed=2).embed(["Chris Nolan"])
    )


def test_batch_equals_one_by_one():
    e = HashingEmbedder(dim=128)
    texts = ["Alpha", "Beta Gamma", "", "Ünïcode straße", "x"]
    batch = e.embed(texts)
    for i, text in enumerate(texts):
        assert np.array_equal(batch[i], e.embed([text])[0])


def test_thousands_of_short_strings_in_one_batch():
    # throughput (≈ 40 ms for these 5,000) is measured in benchmarks/bench_core.py
    e = HashingEmbedder()
    texts = [f"entity {i} of the synthetic world" for i in range(5000)]
    vectors = e.embed(texts)
    assert vectors.shape == (5000, e.dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(vectors[:10], e.embed(texts[:10]))


def test_bad_configuration_is_rejected():
    with pytest.raises(ConfigError):
        HashingEmbedder(dim=1)
    with pytest.raises(ConfigError):
        HashingEmbedder(ngram_range=(4, 2))
