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
    assert data["load_errors"] == []


def test_store_info_counts_rows(tmp_path):
    from triage_plugins.events import FeedbackEvent
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
