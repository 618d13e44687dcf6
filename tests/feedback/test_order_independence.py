"""Learned scores do not depend on the order a framework lists its candidates in, nor on the process.

GraphRAG 3.3 lists a community's relationships sorted by their ids, fresh uuid4s on every index run,
so one global search retrieves the same triples in a different order from run to run (and ``triage
compare`` showed learned scores differing in their last digits between two runs). The sums of the
backward pass (eq. 3–7), the report priorities and the evolution thresholds are therefore taken in
an order of their own (DESIGN §4: same events and feedback, same scores).
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from triage_plugins.feedback.backprop import FeedbackOptimizer
from triage_plugins.feedback.scores import ContributionScores, MemoryScoreStore


def _instance(seed: int) -> tuple[list[list[str]], list[float | None], dict[str, float]]:
    rng = np.random.default_rng(seed)
    ids = [f"t{k}" for k in range(12)]
    paths = [[ids[rng.integers(12)] for _ in range(rng.integers(1, 4))] for _ in range(14)]
    utilities: list[float | None] = [
        None if rng.random() < 0.3 else float(rng.uniform(-1.0, 1.0)) for _ in paths
    ]
    utilities[0] = 0.8
    relevance = {i: float(rng.uniform(0.01, 1.0)) for i in ids}
    return paths, utilities, relevance


def _learned(paths, utilities, relevance, *, baseline: bool) -> tuple[dict[str, str], str]:
    opt = FeedbackOptimizer(ContributionScores(MemoryScoreStore(), "triple"))
    for _ in range(3):
        opt.step(paths, utilities, relevance, baseline=baseline)
    scores = opt.scores.scored()
    return {k: v.hex() for k, v in sorted(scores.items())}, opt.alpha.hex()


@pytest.mark.parametrize("baseline", [False, True])
def test_steps_do_not_depend_on_the_order_of_the_paths(baseline: bool) -> None:
    for seed in range(4):
        paths, utilities, relevance = _instance(seed)
        expected = _learned(paths, utilities, relevance, baseline=baseline)
        rng = random.Random(seed)
        for _ in range(6):
            order = list(range(len(paths)))
            rng.shuffle(order)
            got = _learned([paths[k] for k in order], [utilities[k] for k in order], relevance, baseline=baseline)
            assert got == expected  # bit for bit


def test_reordered_reports_get_the_same_weights() -> None:
    from types import SimpleNamespace

    pytest.importorskip("graphrag")
    from triage_graphrag.reweight import reweight_reports
    from triage_graphrag.translate import GraphTables

    ids = [f"T{k}|U{k}" for k in range(9)]
    values = [0.1, 0.7, 0.2, 0.3, 0.9, 0.6, 0.05, 0.4, 0.8]
    p_of = dict(zip(ids, values, strict=True))

    class _Manager:
        def rerank(self, request):
            return [p_of[i] for i in request.ids]

    def weights(order: list[int]) -> str:
        tables = GraphTables()
        tables.community_triples["1"] = tuple(ids[k] for k in order)
        report = SimpleNamespace(community_id="1", attributes={"occurrence weight": 1.0})
        other = SimpleNamespace(community_id="2", attributes={"occurrence weight": 0.5})
        reweight_reports([report, other], tables, _Manager(), "q")  # type: ignore[arg-type]
        return float(report.attributes["occurrence weight"]).hex()

    rng = random.Random(0)
    expected = weights(list(range(len(ids))))
    for _ in range(12):
        order = list(range(len(ids)))
        rng.shuffle(order)
        assert weights(order) == expected


# Each process gives GraphRAG its own ids (uuid4, seeded so that the test is reproducible): as two real
# runs do, they list a community's relationships, hence each global retrieval's triples, in two orders.
_RUN = textwrap.dedent(
    """
    import random, sys, uuid
    ids = random.Random(int(sys.argv[1]))
    uuid.uuid4 = lambda: uuid.UUID(int=ids.getrandbits(128), version=4)
    from triage_plugins.cli import main
    sys.argv = ["triage", *sys.argv[2:]]
    sys.exit(main())
    """
)


def _learned_in_process(tmp_path: Path, seed: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    cmd = [
        sys.executable, "-c", _RUN, seed, "compare", "--frameworks", "graphrag", "--modes", "global",
        "--max-questions", "10", "--feedback-rounds", "2", "--quiet",
        "--json", str(tmp_path / f"{seed}.json"), "--store", str(tmp_path / f"{seed}.sqlite"),
    ]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _stored(path: Path) -> tuple[dict, dict]:
    """Every stored score and α, by namespace without its run stamp (``graphrag/global:triple``)."""
    con = sqlite3.connect(path)
    try:
        def bare(name: str) -> str:
            return re.sub(r"@[^:]*", "", name)

        scores = {
            (bare(unit), i): (raw.hex(), n)
            for unit, i, raw, n in con.execute("SELECT unit, id, raw, n_updates FROM scores")
        }
        alphas = {bare(k): v for k, v in con.execute("SELECT name, value FROM params") if k.endswith(".alpha")}
    finally:
        con.close()
    return scores, alphas


@pytest.mark.slow
def test_graphrag_global_learns_the_same_scores_in_two_processes(tmp_path: Path) -> None:
    pytest.importorskip("graphrag")
    runs = {seed: _learned_in_process(tmp_path, seed) for seed in ("1", "2")}
    for proc in runs.values():
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-3000:]
    (scores_1, alpha_1), (scores_2, alpha_2) = (_stored(tmp_path / f"{s}.sqlite") for s in runs)
    assert len(scores_1) > 10 and alpha_1
    assert scores_1 == scores_2  # bit for bit
    assert alpha_1 == alpha_2
    moves = [json.loads((tmp_path / f"{s}.json").read_text())["rows"][0]["score_moves"] for s in runs]
    assert moves[0] == moves[1]
