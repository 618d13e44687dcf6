"""`triage demo` smoke tests: the whole loop runs offline and reports every phase."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from triage_plugins.apps.demo import answer_is_correct, run_demo
from triage_plugins.cli import app
from triage_plugins.store import Store


def test_answer_is_correct_is_containment():
    assert answer_is_correct("It is Christopher Nolan.", ["christopher nolan"])
    assert answer_is_correct("frederica of mecklenburg-strelitz", ["frederica_of_mecklenburg-strelitz"])
    assert not answer_is_correct("", ["x"])
    assert not answer_is_correct("Chris Nolan", ["Christopher Nolan"])


def test_run_demo_measures_every_phase(tmp_path):
    store = tmp_path / "demo.sqlite"
    result = run_demo(seed=1, store=store, feedback_rounds=1, retrievers=("extracted-entity", "krag"))
    # implementation metrics from the extraction events: the rule extractor has no log-probabilities
    assert result.implementation["TCS"].value is None
    assert "log-probabilities" in result.implementation["TCS"].reason
    assert result.implementation["SC"].value is not None  # the world ships an ontology
    assert result.validation["DNR"].value is not None
    # every world question went through both retrievers, probe questions through extracted-entity
    retrievers = {q.retriever for q in result.usage.queries}
    assert retrievers == {"extracted-entity", "krag"}
    assert set(result.accuracy) == {"extracted-entity", "krag"}
    assert all(0.0 <= a <= 1.0 for a in result.accuracy.values())
    # the probe's fictional names are out of scope: the chain must say so
    assert result.usage.signatures.get("out_of_scope", 0) >= 1
    assert result.traced is not None and result.traced.diagnosis is not None
    # feedback: static round plus one learning round, learned scores persisted
    assert [r["round"] for r in result.rounds] == [0, 1]
    with Store.open(store) as s:
        counts = s.counts()
        assert counts["scores"] > 0
        assert counts["metrics"] > 0
        assert {r.kind for r in s.runs()} == {"demo-static", "demo-feedback"}
    assert result.dropped_events == 0
    assert result.plugin_failures == 0


def test_demo_command_prints_and_writes_json(tmp_path):
    out = tmp_path / "demo.json"
    result = CliRunner().invoke(
        app,
        ["demo", "--quiet", "--store", str(tmp_path / "d.sqlite"), "--json", str(out), "--feedback-rounds", "1"],
    )
    assert result.exit_code == 0, result.output
    for heading in ("KG Implementation", "KG Validation", "KG Usage", "Chain signatures", "feedback learning"):
        assert heading in result.output
    data = json.loads(out.read_text())
    assert data["world"]["questions"] == 60
    assert len(data["feedback_rounds"]) == 2
