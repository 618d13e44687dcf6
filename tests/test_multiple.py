"""Multiple comparisons: Holm's adjustment, the bootstrap p-value of a paired difference, and the
compare views that use them (only Holm-significant pairs are listed on the terminal)."""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

from triage_plugins.apps.compare import _with_holm
from triage_plugins.diagnosis.calibration import Interval
from triage_plugins.diagnosis.intervals import paired_difference
from triage_plugins.diagnosis.multiple import bca_p_value, holm_adjust
from triage_plugins.report.results import Difference
from triage_plugins.report.terminal import _differences_table


def test_holm_adjust_by_hand() -> None:
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, max(0.06, 0.04·1) = 0.06
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm_adjust([]) == []


def _pair(rng: np.random.Generator, n: int, pa: float, pb: float) -> tuple[dict, dict, dict]:
    ids = [f"q{i:03d}" for i in range(n)]
    a = {q: float(rng.random() < pa) for q in ids}
    b = {q: float(rng.random() < pb) for q in ids}
    return a, b, {q: f"c{i // 2}" for i, q in enumerate(ids)}  # clusters of two questions


def test_the_p_value_matches_the_interval_it_comes_with() -> None:
    rng = np.random.default_rng(7)
    for seed, (pa, pb) in enumerate([(0.9, 0.2), (0.5, 0.5), (0.6, 0.4), (0.3, 0.7)]):
        a, b, clusters = _pair(rng, 60, pa, pb)
        iv = paired_difference(a, b, clusters, seed=seed, n_resamples=1000)
        p = bca_p_value(a, b, clusters, seed=seed, n_resamples=1000)
        assert (iv.low > 0 or iv.high < 0) == (p < 0.05), (pa, pb, iv, p)
    same = {"q1": 1.0, "q2": 0.0, "q3": 1.0}
    assert bca_p_value(same, same, {q: q for q in same}) == 1.0
    assert bca_p_value({"q1": 1.0}, {"q1": 0.0}, {"q1": "c"}) is None  # one cluster: no test


def test_the_p_value_and_the_interval_resample_the_same_clusters() -> None:
    from triage_plugins.diagnosis.calibration import cluster_picks, clustered_bca_interval
    from triage_plugins.diagnosis.multiple import _cluster_sums

    a, b, clusters = _pair(np.random.default_rng(3), 40, 0.6, 0.4)
    common = sorted(a)
    seen: list[tuple[float, int]] = []

    def recorded(x: np.ndarray, y: np.ndarray) -> float:
        seen.append((float((x - y).sum()), len(x)))
        return float(x.mean() - y.mean())

    data = (np.array([a[q] for q in common]), np.array([b[q] for q in common]))
    clustered_bca_interval(data, [clusters[q] for q in common], recorded, n_resamples=200, seed=11)
    sums, counts = _cluster_sums(a, b, clusters)
    picks = cluster_picks(len(sums), 200, 11)  # what bca_p_value resamples for seed 11
    assert np.allclose([s for s, _ in seen[1:201]], sums[picks].sum(axis=1))  # seen[0]: the estimate
    assert [n for _, n in seen[1:201]] == counts[picks].sum(axis=1).astype(int).tolist()
    former = np.random.default_rng(11)  # the draws are those both made before (values unchanged)
    assert np.array_equal(picks, np.stack([former.integers(0, len(sums), len(sums)) for _ in range(200)]))


def test_under_the_null_about_5_percent_of_pairs_and_few_holm_families_reject() -> None:
    rng = np.random.default_rng(11)
    families = []
    for f in range(40):
        ps = []
        for k in range(15):  # 15 pairs per family, every one a true null
            a, b, clusters = _pair(rng, 40, 0.5, 0.5)
            ps.append(bca_p_value(a, b, clusters, seed=100 * f + k, n_resamples=400))
        families.append(ps)
    flat = [p for ps in families for p in ps]
    assert 0.01 <= sum(p < 0.05 for p in flat) / len(flat) <= 0.12  # one test alone: ~5 %
    raw_any = sum(any(p < 0.05 for p in ps) for ps in families) / len(families)
    holm_any = sum(any(p < 0.05 for p in holm_adjust(ps)) for ps in families) / len(families)
    assert raw_any > 0.25 and holm_any <= 0.125  # uncorrected, most families cry wolf; Holm keeps ~5 %


def _diff(a: str, b: str, low: float, high: float, p: float | None) -> Difference:
    return Difference(a, b, "Hits@1", Interval((low + high) / 2, low, high, 0.95, "bca", 60, 30, 2000), p)


def test_holm_is_per_metric_and_the_terminal_lists_only_the_pairs_that_survive() -> None:
    diffs = _with_holm([
        _diff("x", "y", 0.2, 0.4, 0.001), _diff("x", "z", 0.01, 0.2, 0.03), _diff("y", "z", -0.1, 0.1, 0.8),
        Difference("x", "y", "chain:supported", Interval(0.1, 0.01, 0.2, 0.95, "bca", 60, 30, 2000), 0.03),
    ])  # fmt: skip
    hits = diffs[:3]
    assert [d.p_holm for d in hits] == pytest.approx([0.003, 0.06, 0.8])
    assert [d.significant for d in hits] == [True, True, False]  # the interval alone
    assert [d.significant_holm for d in hits] == [True, False, False]  # after Holm over three
    assert diffs[3].p_holm == pytest.approx(0.03) and diffs[3].significant_holm  # its own family of one
    assert diffs[0].to_dict()["significant_holm"] is True and diffs[1].to_dict()["p_holm"] == pytest.approx(
        0.06
    )
    buf = io.StringIO()
    _differences_table(SimpleNamespace(differences=diffs), Console(file=buf, width=80, color_system=None))
    text = " ".join(buf.getvalue().split())
    assert "1 of 3 pairs differ after the Holm–Bonferroni correction for 3 comparisons" in text
    assert "x − y" in text and "x − z" not in text and "2 more pairs do not differ after Holm" in text
