"""``triage demo --seeds N``: held-out accuracy before/after the feedback rounds over N worlds, with a
95 % Student t-interval over seeds; the first seed is the full demo and the only one in the store."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from typer.testing import CliRunner

from triage_plugins.apps.demo import run_demo
from triage_plugins.cli import app
from triage_plugins.report.results import SeedInterval
from triage_plugins.store import Store


def test_seed_interval_is_a_student_t_interval() -> None:
    from scipy.stats import t

    values = [0.55, 0.6, 0.7]
    iv = SeedInterval.of(values)
    half = t.ppf(0.975, 2) * statistics.stdev(values) / math.sqrt(3)
    assert iv.mean == pytest.approx(statistics.fmean(values))
    assert iv.low == pytest.approx(iv.mean - half) and iv.high == pytest.approx(iv.mean + half)
    assert iv.low < min(values) and iv.high > max(values)  # 3 seeds: t(2) is wide, as it should be
    same = SeedInterval.of([0.5, 0.5])
    assert same.low == same.high == 0.5
    one = SeedInterval.of([0.4])
    assert one.mean == 0.4 and one.low is None and one.high is None and "2 seeds" in (one.reason or "")


def test_demo_seeds_reports_each_seed_and_an_interval(tmp_path) -> None:
    store = tmp_path / "demo.sqlite"
    out = tmp_path / "demo.json"
    args = ["demo", "--seeds", "2", "--seed", "3", "--feedback-rounds", "1", "-q"]
    res = CliRunner().invoke(app, [*args, "--store", str(store), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "Learning over 2 seeds" in res.output and "t-interval" in res.output
    data = json.loads(out.read_text(encoding="utf-8"))
    # the first seed is today's full demo ...
    assert data["seed"] == 3 and [r["round"] for r in data["feedback_rounds"]] == [0, 1]
    summary = data["seeds"]
    assert summary["seeds"] == [3, 4]
    before, after, gain = (
        summary[k] for k in ("held_out_accuracy_static", "held_out_accuracy_after", "gain")
    )
    assert before["values"][0] == data["feedback_rounds"][0]["test_accuracy"]
    assert after["values"][0] == data["feedback_rounds"][-1]["test_accuracy"]
    # ... the second is a separate world, measured as a plain run of that seed measures it
    alone = run_demo(seed=4, feedback_rounds=1)
    assert before["values"][1] == alone.rounds[0]["test_accuracy"]
    assert after["values"][1] == alone.rounds[-1]["test_accuracy"]
    assert gain["values"] == pytest.approx(
        [a - b for a, b in zip(after["values"], before["values"], strict=True)]
    )
    for iv in (before, after, gain):
        assert iv["low"] <= iv["mean"] <= iv["high"] and iv["method"] == "Student t-interval over seeds"
    # only the first seed wrote to the store: one static and one feedback run
    with Store.open(store) as s:
        assert sorted(r.kind for r in s.runs()) == ["demo-feedback", "demo-static"]


def test_demo_default_shows_held_out_learning_over_five_worlds_with_an_interval(tmp_path) -> None:
    args = ["demo", "--feedback-rounds", "1", "-q", "--store", str(tmp_path / "d.sqlite")]
    res = CliRunner().invoke(app, [*args, "--json", str(tmp_path / "five.json")])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "the table below repeats it over 5 worlds with a 95 % interval" in text
    assert "held-out ACC" in text and "95% CI" in text and "seeds 0–4:" in text
    assert "`triage explain ERC`" in text
    seeds = json.loads((tmp_path / "five.json").read_text(encoding="utf-8"))["seeds"]
    assert seeds["seeds"] == [0, 1, 2, 3, 4]


def test_demo_single_seed_is_unchanged_and_bad_seeds_are_refused(tmp_path) -> None:
    out = tmp_path / "one.json"
    args = ["demo", "--feedback-rounds", "0", "-q", "--store", str(tmp_path / "d.sqlite"), "--seeds", "1"]
    res = CliRunner().invoke(app, [*args, "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "Learning over" not in res.output
    assert "seeds" not in json.loads(out.read_text(encoding="utf-8"))
    bad = CliRunner().invoke(app, [*args, "--seeds", "0"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
