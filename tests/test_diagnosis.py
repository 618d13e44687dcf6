"""The diagnostic chain, signatures, remediation map and windowed triggers (TRIAGE §4.5)."""

from __future__ import annotations

import pytest

from triage_plugins.contract.errors import ConfigError
from triage_plugins.diagnosis.chain import (
    CHAIN,
    REMEDIATION,
    SIGNATURES,
    WindowTrigger,
    diagnose,
    render_trace,
    signature,
    trace,
)
from triage_plugins.metrics.result import MetricResult, na, ok

GOOD = {"QGR": 1.0, "ERC": 1.0, "RRS": 1.0, "ARF": 1.0, "AGR": 1.0}


@pytest.mark.parametrize(
    ("low", "expected"),
    [
        ("QGR", "out_of_scope"),
        ("ERC", "retrieval_gap"),
        ("RRS", "connectivity_gap"),
        ("ARF", "relational_gap"),
        ("AGR", "generation_gap"),
    ],
)
def test_first_failing_link_names_the_signature(low: str, expected: str) -> None:
    metrics = {**GOOD, low: 0.1}
    assert signature(metrics) == expected


def test_all_links_holding_is_supported() -> None:
    assert signature(GOOD) == "supported"


def test_only_the_first_broken_link_counts() -> None:
    # ERC and AGR both low: the chain stops at ERC.
    steps = trace({**GOOD, "ERC": 0.3, "AGR": 0.0})
    assert [s.status for s in steps] == ["pass", "fail", "not reached", "not reached", "not reached"]
    assert signature({**GOOD, "ERC": 0.3, "AGR": 0.0}) == "retrieval_gap"


def test_fig4_trace() -> None:
    metrics = {"QGR": ok("QGR", 1.0), "ERC": ok("ERC", 1.0), "RRS": ok("RRS", 0.0)}
    d = diagnose(metrics)
    assert d.signature == "connectivity_gap"
    assert [s.metric for s in d.steps] == ["QGR", "ERC", "RRS", "ARF", "AGR"]
    assert [s.status for s in d.steps] == ["pass", "pass", "fail", "not reached", "not reached"]
    assert d.remediation.stage == "retrieval"
    assert any("alias" in u for u in d.remediation.upstream)  # Fig. 4's fix: merge Chris Nolan
    text = render_trace(d)
    assert "connectivity_gap" in text and "FAIL" in text and "RRS" in text


def test_threshold_comparison_is_strict_and_configurable() -> None:
    assert signature({**GOOD, "ERC": 0.67}) == "supported"  # not below θ = 0.67
    assert signature({**GOOD, "ERC": 2 / 3}) == "retrieval_gap"  # 0.6667 < 0.67
    assert signature({**GOOD, "ERC": 2 / 3}, {"ERC": 0.6}) == "supported"
    assert signature({**GOOD, "RRS": 0.4}, {"RRS": 0.3}) == "supported"


def test_qgr_na_for_lack_of_mentions_is_out_of_scope() -> None:
    no_mentions = na("QGR", "no entity mention", cause="no_mentions")
    assert signature({"QGR": no_mentions}) == "out_of_scope"
    assert signature({"QGR": None}) == "out_of_scope"  # bare N/A: |M_q| = 0
    d = diagnose({"QGR": no_mentions})
    assert d.defined and d.steps[0].status == "fail"


def test_unavailable_links_are_skipped_and_flagged_undetermined() -> None:
    unavailable = na("QGR", "mentions not supplied", cause="unavailable")
    d = diagnose({"QGR": unavailable, "ERC": na("ERC", "x", cause="unavailable")})
    assert d.signature == "supported"
    assert not d.defined and d.evaluated == ()
    assert [s.status for s in d.steps] == ["n/a"] * 5


def test_na_arf_is_skipped_and_agr_still_read() -> None:
    metrics = {**GOOD, "ARF": na("ARF", "|C_q|=0"), "AGR": ok("AGR", 0.25)}
    d = diagnose(metrics)
    assert d.signature == "generation_gap"
    assert d.steps[3].status == "n/a"
    assert d.evaluated == ("QGR", "ERC", "RRS", "AGR")


def test_before_generation_only_the_head_links_are_read() -> None:
    d = diagnose({"QGR": 1.0, "ERC": 1.0, "RRS": 1.0})
    assert d.signature == "supported" and d.evaluated == ("QGR", "ERC", "RRS")


def test_remediation_map_covers_every_signature() -> None:
    assert set(REMEDIATION) == set(SIGNATURES)
    assert len(CHAIN) == 5
    for link in CHAIN:
        remedy = REMEDIATION[link.signature]
        assert remedy.stage in ("graph", "retrieval", "generation")
        assert remedy.levers, link.signature
    assert REMEDIATION["supported"].stage is None
    assert "seed" in REMEDIATION["retrieval_gap"].levers[0]
    assert REMEDIATION["out_of_scope"].stage == "graph"
    assert REMEDIATION["generation_gap"].stage == "generation"


# --------------------------------------------------------------------------- windowed triggers


def test_a_single_low_query_never_fires() -> None:
    trigger = WindowTrigger("ERC", window=5)
    signals = [trigger.update(v) for v in (1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0)]
    assert signals == [None] * 7  # worst window mean = 0.8 >= 0.67
    lone = WindowTrigger("ERC", window=5)
    assert lone.update(0.0) is None  # a window of one value is never judged


def test_a_sustained_drop_fires_once_naming_the_stage() -> None:
    trigger = WindowTrigger("ERC", window=4)
    for v in (1.0, 1.0, 1.0, 1.0):
        assert trigger.update(v) is None
    # window means: (1+1+1+.2)/4 = .8, (1+1+.2+.2)/4 = .6 -> fires on the 6th value
    assert trigger.update(0.2) is None
    signal = trigger.update(0.2)
    assert signal is not None
    assert signal.value == pytest.approx(0.6) and signal.threshold == pytest.approx(0.67)
    assert signal.stage == "retrieval" and signal.signature == "retrieval_gap"
    assert "retrieval" in signal.message
    assert trigger.update(0.2) is None  # edge-triggered: still low, no second signal
    assert trigger.firing
    for v in (1.0, 1.0, 1.0):
        trigger.update(v)
    assert not trigger.firing  # recovered: mean (.2+1+1+1)/4 = .8
    for v in (0.0, 0.0):
        last = trigger.update(v)
    assert last is not None  # re-armed: fires again on the next crossing


def test_failing_rate_and_quantile_statistics() -> None:
    rate = WindowTrigger("RRS", window=4, statistic="failing_rate", threshold=0.5)
    # per-query θ_RRS = 0.5: failing values are 0.0 and 0.4
    outs = [rate.update(v) for v in (1.0, 0.0, 1.0, 0.4)]
    assert outs == [None] * 4  # rate 2/4 = 0.5 is not above 0.5
    signal = rate.update(0.0)  # window (0, 1, .4, 0): 3/4 failing
    assert signal is not None and signal.value == pytest.approx(0.75)
    assert signal.signature == "connectivity_gap"

    low = WindowTrigger("AGR", window=5, statistic="quantile", quantile=0.25, threshold=0.5)
    values = [1.0, 0.9, 0.3, 0.8, 0.7]
    outs = [low.update(v) for v in values]
    assert outs == [None] * 5  # 25% quantile of (0.3, 0.7, 0.8, 0.9, 1.0) = 0.7
    signal = low.update(0.1)  # window (0.9, 0.3, 0.8, 0.7, 0.1): 25% quantile = 0.3
    assert signal is not None and signal.value == pytest.approx(0.3)
    assert signal.stage == "generation"


def test_na_values_are_skipped_and_results_accepted() -> None:
    trigger = WindowTrigger("ERC", window=2)
    assert trigger.update(na("ERC", "no mentions")) is None
    assert trigger.update(None) is None
    assert trigger.update(MetricResult("ERC", 0.1)) is None
    assert trigger.update(0.1) is not None


def test_rpc_trigger_fires_on_high_values() -> None:
    trigger = WindowTrigger("RPC", window=3, threshold=500, bad="high")
    outs = [trigger.update(v) for v in (100, 900, 900)]
    assert outs[:2] == [None, None]
    assert outs[2] is not None and outs[2].stage == "retrieval"


def test_invalid_trigger_configuration() -> None:
    with pytest.raises(ConfigError):
        WindowTrigger("ERC", window=1)
    with pytest.raises(ConfigError):
        WindowTrigger("ERC", window=5, statistic="median")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        WindowTrigger("XYZ", window=5)  # no default threshold for an unknown metric
    with pytest.raises(ConfigError):
        WindowTrigger("ERC", window=5, min_count=1)


# --------------------------------------------------------------------------- compare intervals (#18 item 4)


def test_question_clusters_link_questions_sharing_an_entity() -> None:
    from triage_plugins.diagnosis.intervals import question_clusters

    clusters = question_clusters({"q3": ["C"], "q1": ["A", "B"], "q2": ["B"], "q4": [], "q5": ["C", "A"]})
    # q1–q2 share B, q5 shares A with q1 and C with q3: one component named q1; q4 alone
    assert clusters == {"q1": "q1", "q2": "q1", "q3": "q1", "q4": "q4", "q5": "q1"}
    assert question_clusters({"b": ["x"], "a": ["y"]}) == {"a": "a", "b": "b"}


def test_rate_interval_is_clustered_and_deterministic() -> None:
    from triage_plugins.diagnosis.intervals import metric_seed, rate_interval

    values = {f"q{i:02d}": float(i % 3 == 0) for i in range(30)}  # mean 10/30
    alone = {q: q for q in values}
    iv = rate_interval(values, alone, seed=metric_seed(0, "Hits@1"))
    assert iv is not None and iv.n == 30 and iv.n_clusters == 30
    assert iv.estimate == pytest.approx(1 / 3) and iv.low < 1 / 3 < iv.high
    again = rate_interval(dict(reversed(list(values.items()))), alone, seed=metric_seed(0, "Hits@1"))
    assert (again.low, again.high) == (iv.low, iv.high)  # insertion order does not matter
    pairs = {q: f"c{int(q[1:]) // 2}" for q in values}  # 15 clusters of two questions
    clustered = rate_interval(values, pairs, seed=metric_seed(0, "Hits@1"))
    assert clustered.n_clusters == 15
    assert rate_interval(values, dict.fromkeys(values, "one")) is None  # a single cluster: no interval
    assert metric_seed(0, "Hits@1") == metric_seed(0, "Hits@1") != metric_seed(1, "Hits@1")


def test_paired_difference_marks_significance() -> None:
    from triage_plugins.diagnosis.intervals import paired_difference

    ids = [f"q{i:02d}" for i in range(40)]
    clusters = {q: q for q in ids}
    good = dict.fromkeys(ids, 1.0)
    bad = {q: float(i % 10 == 0) for i, q in enumerate(ids)}  # 4/40
    iv = paired_difference(good, bad, clusters)
    assert iv.estimate == pytest.approx(0.9) and iv.low > 0  # significant
    near = {q: float(i != 0) for i, q in enumerate(ids)}  # differs on one question
    close = paired_difference(good, near, clusters)
    assert close.low <= 0 <= close.high  # not significant
    same = paired_difference(good, dict(good), clusters)
    assert (same.low, same.high, same.method) == (0.0, 0.0, "degenerate")


def test_format_interval() -> None:
    from triage_plugins.diagnosis.calibration import Interval
    from triage_plugins.diagnosis.intervals import format_interval

    assert format_interval(Interval(0.5, 0.25, 0.75, 0.95, "bca", 10, 10, 2000)) == "[0.250, 0.750]"
    assert format_interval(None) == ""
