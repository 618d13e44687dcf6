"""The `triage` command: help, plugins, store info, score, and one-line errors for ordinary mistakes."""

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


# --------------------------------------------------------------------------- ordinary mistakes (#19)


def _one_line_error(result) -> str:
    """The command failed with exit 1 and one ``error:`` line, at a narrow width too (no traceback)."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


NARROW = {"COLUMNS": "60"}


def _scored_store(tmp_path):
    from triage_plugins.store import Store

    path = tmp_path / "scored.sqlite"
    with Store.open(path) as store:
        run = store.start_run("test")
        for i, (erc, cc) in enumerate(((0.2, 0.0), (0.9, 1.0), (1.0, 1.0), (0.4, 0.0))):
            for name, value in (("ERC", erc), ("CC", cc)):
                store.record_metric("query", f"q{i}", name, value, framework="t", run_id=run)
    return path


def test_calibrate_names_an_unknown_metric_with_its_close_match(tmp_path):
    path = _scored_store(tmp_path)
    line = _one_line_error(runner.invoke(app, ["calibrate", str(path), "--metric", "erc"], env=NARROW))
    assert "--metric erc" in line and "did you mean ERC?" in line
    line = _one_line_error(runner.invoke(app, ["calibrate", str(path), "--outcome", "FOO"], env=NARROW))
    assert "--outcome FOO: no such column" in line and "CC" in line
    ok = runner.invoke(app, ["calibrate", str(path), "--resamples", "200"], env=NARROW)
    assert ok.exit_code == 0, ok.output


def test_score_given_a_store_says_to_export_it_first(tmp_path):
    path = _scored_store(tmp_path)
    line = _one_line_error(runner.invoke(app, ["score", str(path)], env=NARROW))
    assert "is a SQLite store, not an events file" in line
    assert f"triage export {path} --jsonl" in line


def test_a_question_file_given_as_the_kb_is_refused_before_any_work(tmp_path):
    questions = tmp_path / "PQ-2H.txt"
    questions.write_text(
        "which nationality is alice 's spouse ?\tmeridia(meridia/)\talice#spouse#bob#nationality#meridia\n"
        "what is the nation of alice 's couple ?\tmeridia(meridia/)\talice#spouse#bob#nationality#meridia\n",
        encoding="utf-8",
    )
    kb = tmp_path / "kb.txt"
    kb.write_text("alice\tspouse\tbob\nbob\tnationality\tmeridia\n", encoding="utf-8")
    for command in (["probe"], ["evolve-bench", "--questions", str(questions)]):
        line = _one_line_error(runner.invoke(app, [*command, "--kb", str(questions)], env=NARROW))
        assert "looks like a question file, not a KB" in line and "--questions" in line
    missing = _one_line_error(runner.invoke(app, ["probe", "--kb", str(kb), "--kb", "nope.txt"], env=NARROW))
    assert missing == "error: no KB file 2 at nope.txt"


def test_explain_wraps_at_words_under_its_labels_at_60_columns():
    from triage_plugins.apps.explain import find_metric, metric_entry

    result = runner.invoke(app, ["explain", "ERC"], env=NARROW)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 60, lines
    lever = metric_entry(find_metric("ERC")).lever
    assert " ".join(result.output.split()).count(" ".join(lever.split())) == 1  # whole, words unbroken
    # a wrapped value continues under its own column, not under the label
    start = next(i for i, line in enumerate(lines) if "when low:" in line)
    after = lines[start].index("when low:") + len("when low:")
    column = after + len(lines[start][after:]) - len(lines[start][after:].lstrip())
    assert lines[start + 1][:column].strip() == "" and lines[start + 1][column] != " "


def test_calibrate_checks_its_output_first_and_names_a_file_that_is_not_json_lines(tmp_path):
    store = _scored_store(tmp_path)
    bad_out = tmp_path / "no" / "such" / "out.json"
    line = _one_line_error(runner.invoke(app, ["calibrate", str(store), "--json", str(bad_out)], env=NARROW))
    assert "cannot write --json file" in line and not bad_out.parent.exists()
    notes = tmp_path / "notes.txt"
    notes.write_text("some notes\n", encoding="utf-8")
    assert "line 1: not valid JSON" in _one_line_error(
        runner.invoke(app, ["calibrate", str(notes)], env=NARROW)
    )
    binary = tmp_path / "store.bin"
    binary.write_bytes(store.read_bytes())
    assert "not UTF-8 text" in _one_line_error(runner.invoke(app, ["calibrate", str(binary)], env=NARROW))


def test_output_paths_and_counts_are_checked_before_any_work(tmp_path):
    """A bad --json/--html path or a negative round count stops the command at once: no store is
    created, no report built (a demo or a compare would otherwise run first and fail at the end)."""
    store = tmp_path / "demo.sqlite"
    nowhere = tmp_path / "missing-folder" / "out.json"
    line = _one_line_error(
        runner.invoke(app, ["demo", "--store", str(store), "--json", str(nowhere)], env=NARROW)
    )
    assert "cannot write --json file" in line and not store.exists()
    line = _one_line_error(
        runner.invoke(app, ["demo", "--store", str(store), "--feedback-rounds", "-1"], env=NARROW)
    )
    assert "--feedback-rounds" in line and not store.exists()
    line = _one_line_error(runner.invoke(app, ["compare", "--feedback-rounds", "-2"], env=NARROW))
    assert "--feedback-rounds" in line
    typo = tmp_path / "no-such-folder" / "demo.sqlite"
    line = _one_line_error(runner.invoke(app, ["demo", "--store", str(typo)], env=NARROW))
    assert "cannot write --store file" in line and not typo.parent.exists()  # no folder made for a typo
    scored = _scored_store(tmp_path)
    line = _one_line_error(runner.invoke(app, ["report", str(scored), "--html", str(nowhere)], env=NARROW))
    assert "cannot write --html file" in line and not nowhere.parent.exists()
