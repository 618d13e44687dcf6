"""The `triage` command: help, plugins, store info."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from triage_plugins.cli import app

runner = CliRunner()


def test_help_lists_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for cmd in ("plugins", "store"):
        assert cmd in result.output


def test_plugins_lists_defaults_and_entry_points():
    result = runner.invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    names = {p["name"]: p for p in data["plugins"]}
    assert "triage.recorder" in names
    assert names["triage.recorder"]["source"] == "default"
    assert "triage_retrieval" in names["triage.recorder"]["hooks"]
    # the three adapters are installed entry points of this distribution
    for ep in ("lightrag", "graphrag", "llamaindex"):
        assert names[ep]["source"] == "entry point"
        assert "triage_register_runners" in names[ep]["hooks"]  # each registers its compare runner
    assert data["load_errors"] == []


def test_store_info_counts_rows(tmp_path):
    from triage_plugins.contract.events import FeedbackEvent
    from triage_plugins.store import Store

    path = tmp_path / "s.sqlite"
    store = Store.open(path)
    store.record_event(FeedbackEvent("t", "q1", 0.5))
    store.record_event(FeedbackEvent("t", "q2", 1.0))
    store.close()
    result = runner.invoke(app, ["store", "info", str(path)])
    assert result.exit_code == 0, result.output
    assert "events" in result.output
    line = next(ln for ln in result.output.splitlines() if "events" in ln)
    assert "2" in line


def test_store_info_missing_file_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["store", "info", str(tmp_path / "nope.sqlite")])
    assert result.exit_code == 1
    assert "no store at" in result.output


def _fig4_events():
    from triage_plugins.contract.events import GenerationEvent, GraphEvent, RetrievalEvent, Subgraph, Triple
    from triage_plugins.contract.graph_view import GraphView

    t1 = Triple("t1", "Inception", "directed_by", "Christopher Nolan")
    t2 = Triple("t2", "Interstellar", "directed_by", "Chris Nolan")
    graph = GraphEvent("mine", GraphView([t1, t2]))
    retrieval = RetrievalEvent(
        "mine",
        "q7",
        "Did the director of Inception also direct Interstellar?",
        mentions=("Inception", "Interstellar"),
        grounding={"Inception": "Inception", "Interstellar": "Interstellar"},
        subgraph=Subgraph((t1, t2)),
        expanded_nodes=12,
        seconds=0.004,
        retriever="local",
    )
    generation = GenerationEvent("mine", "q7", "Yes, Christopher Nolan directed both.")
    return [graph, retrieval, generation]


def test_score_prints_metrics_and_signature(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(e.to_json() for e in _fig4_events()) + "\n", encoding="utf-8")
    out = tmp_path / "report.json"
    result = runner.invoke(app, ["score", str(path), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "connectivity_gap" in result.output
    data = json.loads(out.read_text())
    (query,) = data["queries"]
    assert query["signature"] == "connectivity_gap"
    assert query["metrics"]["RRS"]["value"] == 0.0
    assert query["metrics"]["ERC"]["value"] == 1.0


def test_score_bad_line_names_the_line(tmp_path):
    path = tmp_path / "events.jsonl"
    good = _fig4_events()[0].to_json()
    path.write_text(good + "\n{not json}\n", encoding="utf-8")
    result = runner.invoke(app, ["score", str(path)])
    assert result.exit_code == 1
    assert "line 2" in result.output


def test_evolve_bench_command_on_pathquestion(shared_data, tmp_path):
    out = tmp_path / "evolve.json"
    pq = shared_data / "pathquestion"
    result = runner.invoke(
        app,
        [
            "evolve-bench", "--kb", str(pq / "2H-kb.txt"), "--questions", str(pq / "PQ-2H.txt"),
            "--sample", "40", "--iterations", "1", "--modes", "fixed", "--quiet", "--json", str(out),
        ],
    )  # fmt: skip
    repeated = runner.invoke(
        app,
        [
            "evolve-bench", "--kb", str(pq / "2H-kb.txt"), "--questions", str(pq / "PQ-2H.txt"),
            "--sample", "20", "--iterations", "1", "--modes", "fixed", "--quiet", "--repeat-train",
            "--json", str(tmp_path / "repeat.json"),
        ],
    )  # fmt: skip
    assert repeated.exit_code == 0, repeated.output
    assert json.loads((tmp_path / "repeat.json").read_text())["settings"]["train_refresh"] is False
    assert result.exit_code == 0, result.output
    assert "static" in result.output and "ACC gain" in result.output
    data = json.loads(out.read_text())
    assert data  # the per-iteration record
    assert data["settings"]["train_refresh"] is True
    assert data["settings"]["pipeline_options"]["walks"] is True
