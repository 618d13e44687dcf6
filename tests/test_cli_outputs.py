"""Outputs never clobber inputs (#34 item 6), and `triage demo` resets only a demo store (#33 item 3).

Every option that writes a file (report/compare --html, demo/compare/score/calibrate/probe/evolve-bench
--json, schema --out, export --jsonl) is refused, with one line and nothing written, when its path is
one of the command's inputs (``--force`` or not) or another of its outputs, and when it names an
existing file that is not a previous output of the same kind (unless ``--force``). ``triage demo``
resets a store file only when it is empty or holds nothing but demo runs, and never one of another
schema version.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage_plugins.apps.paths import (
    HTML_MARKER,
    HTML_REPORT,
    JSON_OUTPUTS,
    check_outputs,
    json_output,
)
from triage_plugins.cli import app
from triage_plugins.contract.errors import TriageError
from triage_plugins.contract.events import FeedbackEvent
from triage_plugins.store import SCHEMA_VERSION, open_store

runner = CliRunner()
WIDE = {"COLUMNS": "250"}
DEMO = ["demo", "--quiet", "--feedback-rounds", "0"]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def _store(path: Path, kinds: tuple[str, ...] = ("serve",), *, score: bool = True) -> Path:
    """A triage store with one run per kind (a feedback event each) and, by default, a learned score."""
    with open_store(path) as store:
        for i, kind in enumerate(kinds):
            run = store.start_run(kind)
            store.record_event(FeedbackEvent("f", f"q{i}", 0.5), run)
            store.record_metric("query", f"q{i}", "ERC", 0.5 * i, framework="f", run_id=run)
            store.record_metric("query", f"q{i}", "CC", float(i % 2), framework="f", run_id=run)
            store.end_run(run)
        if score:
            store.add_score("triple", "t", 3.0)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The inputs of every command: a store, an events file, a KB, a question file, an ontology."""
    root = tmp_path_factory.mktemp("inputs")
    store = _store(root / "deploy.sqlite", ("serve", "serve"))
    events = root / "events.jsonl"
    events.write_text(FeedbackEvent("f", "q1", 0.5).to_json() + "\n", encoding="utf-8")
    kb = root / "kb.txt"
    kb.write_text(
        "alice\tspouse\tbob\nbob\tnationality\tmeridia\ncarol\tspouse\tdan\ndan\tborn_in\tparis\n"
        "alice\tborn_in\tparis\n",
        encoding="utf-8",
    )
    questions = root / "PQ-2H.txt"
    questions.write_text(
        "which nationality is alice 's spouse ?\tmeridia(meridia/)\talice#spouse#bob#nationality#meridia\n",
        encoding="utf-8",
    )
    ontology = root / "ontology.json"
    ontology.write_text('{"entity_types": ["person"], "relations": {}}\n', encoding="utf-8")
    return {"store": store, "events": events, "kb": kb, "questions": questions, "ontology": ontology}


# ------------------------------------------------------------------ an output is never an input

#: (command line with {store}, {events}, {kb}, {questions}, {ontology}; the input the output names).
INPUT_CLOBBERS = [
    (["report", "{store}", "--html", "{store}"], "store"),
    (["report", "{store}", "--html", "{store}-wal"], "store"),
    (["report", "sqlite:///{store}", "--html", "{store}"], "store"),
    (["calibrate", "{store}", "--json", "{store}"], "store"),
    (["export", "{store}", "--jsonl", "{store}"], "store"),
    (["score", "{events}", "--json", "{events}"], "events"),
    (["score", "{events}", "--ontology", "{ontology}", "--json", "{ontology}"], "ontology"),
    (["score", "{events}", "--reference", "{kb}", "--json", "{kb}"], "kb"),
    (["demo", "--quiet", "--store", "{store}", "--json", "{store}"], "store"),
    (["compare", "--store", "{store}", "--html", "{store}"], "store"),
    (["compare", "--questions", "{questions}", "--json", "{questions}"], "questions"),
    (["compare", "--ontology", "{ontology}", "--html", "{ontology}"], "ontology"),
    (["probe", "--kb", "{kb}", "--json", "{kb}"], "kb"),
    (["probe", "--kb", "{kb}", "--questions", "{questions}", "--json", "{questions}"], "questions"),
    (["evolve-bench", "--kb", "{kb}", "--questions", "{questions}", "--json", "{kb}"], "kb"),
    (["evolve-bench", "--kb", "{kb}", "--questions", "{questions}", "--json", "{questions}"], "questions"),
]


@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
@pytest.mark.parametrize(
    ("line", "clobbered"), INPUT_CLOBBERS, ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_an_output_naming_an_input_is_refused_even_with_force(files, line, clobbered, force) -> None:
    names = {k: str(v) for k, v in files.items()}
    args = [part.format(**names) for part in line] + (["--force"] if force else [])
    before = {k: _digest(v) for k, v in files.items()}
    listing = sorted(os.listdir(files["store"].parent))
    error = _one_line_error(runner.invoke(app, args, env=WIDE))
    assert "which this command reads" in error and "--force never replaces an input" in error
    assert {k: _digest(v) for k, v in files.items()} == before  # every input byte-identical
    assert sorted(os.listdir(files["store"].parent)) == listing  # nothing written beside them


def test_an_output_that_links_to_the_store_is_refused(files, tmp_path: Path) -> None:
    before = _digest(files["store"])
    soft = tmp_path / "soft.html"
    soft.symlink_to(files["store"])
    hard = tmp_path / "hard.html"
    os.link(files["store"], hard)
    for link in (soft, hard):
        error = _one_line_error(
            runner.invoke(app, ["report", str(files["store"]), "--html", str(link), "--force"], env=WIDE)
        )
        assert f"is also STORE {files['store']}" in error
    assert _digest(files["store"]) == before


def test_two_outputs_of_one_command_must_differ(tmp_path: Path) -> None:
    out = tmp_path / "same.out"
    error = _one_line_error(
        runner.invoke(app, ["compare", "--json", str(out), "--html", str(out), "--force"], env=WIDE)
    )
    assert "--json file and --html file are the same file" in error
    assert not out.exists()


# ------------------------------------------------------------------ a file the command did not create

#: (command line with {store}, {events}, {kb}, {out}; runs in a few seconds).
OUTPUTS = [
    ["report", "{store}", "--html", "{out}"],
    ["calibrate", "{store}", "--resamples", "200", "--json", "{out}"],
    ["score", "{events}", "--json", "{out}"],
    ["schema", "--out", "{out}"],
    [*DEMO, "--store", "{tmp}/demo.sqlite", "--json", "{out}"],
    ["probe", "--kb", "{kb}", "--per-category", "1", "--resamples", "100", "-q", "--json", "{out}"],
    ["compare", "--frameworks", "reference", "--max-questions", "2", "-q", "--json", "{out}"],
    ["compare", "--frameworks", "reference", "--max-questions", "2", "-q", "--html", "{out}"],
]
_ids = [" ".join(p for p in line if not p.startswith("{") and p not in ("-q", "--quiet")) for line in OUTPUTS]


def _args(line: list[str], files: dict[str, Path], out: Path, tmp: Path) -> list[str]:
    names = {**{k: str(v) for k, v in files.items()}, "out": str(out), "tmp": str(tmp)}
    return [part.format(**names) for part in line]


@pytest.mark.parametrize("line", OUTPUTS, ids=_ids)
def test_an_existing_file_triage_did_not_write_needs_force(files, tmp_path: Path, line) -> None:
    out = tmp_path / "mine.out"
    out.write_text("my own notes, not a triage output\n", encoding="utf-8")
    error = _one_line_error(runner.invoke(app, _args(line, files, out, tmp_path), env=WIDE))
    assert f"{out} exists and is not" in error and "pass --force to replace it" in error
    assert out.read_text(encoding="utf-8") == "my own notes, not a triage output\n"
    assert not (tmp_path / "demo.sqlite").exists()  # refused before any work
    result = runner.invoke(app, [*_args(line, files, out, tmp_path), "--force"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8") != "my own notes, not a triage output\n"


@pytest.mark.parametrize("line", OUTPUTS, ids=_ids)
def test_a_previous_output_of_the_command_is_replaced_without_force(files, tmp_path: Path, line) -> None:
    out = tmp_path / "out"
    for _ in range(2):  # the second run replaces what the first wrote
        result = runner.invoke(app, _args(line, files, out, tmp_path), env=WIDE)
        assert result.exit_code == 0, result.output
    head = out.read_bytes()[:4096]
    assert HTML_REPORT.recognise(head) or any(json_output(c).recognise(head) for c in JSON_OUTPUTS)


def test_an_empty_file_is_replaced_and_another_commands_output_is_not(files, tmp_path: Path) -> None:
    out = tmp_path / "made-by-mktemp"
    out.touch()  # nothing to lose
    assert runner.invoke(app, ["schema", "--out", str(out)]).exit_code == 0
    # a schema file is not a calibrate result: replacing it needs --force
    error = _one_line_error(
        runner.invoke(app, ["calibrate", str(files["store"]), "--json", str(out)], env=WIDE)
    )
    assert "not a JSON file written by triage calibrate" in error
    # an export is never replaced without --force, even empty (as documented before)
    jsonl = tmp_path / "events.jsonl"
    jsonl.touch()
    assert "--force" in _one_line_error(
        runner.invoke(app, ["export", str(files["store"]), "--jsonl", str(jsonl)], env=WIDE)
    )


def test_recognisers_of_each_kind() -> None:
    from triage_plugins.apps.evolve import EvolveBenchResult
    from triage_plugins.report.html import page

    assert HTML_REPORT.recognise(page("triage report", "s", []).encode())
    legacy = page("triage compare", "s", []).replace(HTML_MARKER, "")  # before the marker existed
    assert HTML_REPORT.recognise(legacy.encode())
    for other in ("<!DOCTYPE html>\n<html><head><title>mine</title>", "<html>", "", "{}"):
        assert not HTML_REPORT.recognise(other.encode())
    evolve = json.dumps(EvolveBenchResult({"a": 1}, [], {"b": [1, 2]}, 1.0).to_dict(), indent=1)
    assert json_output("evolve-bench").recognise(evolve.encode())
    assert not json_output("probe").recognise(evolve.encode())
    assert json_output("demo").recognise(b' {\n  "seed": 3,\n  "world": {"x": 1}}')
    for not_demo in (
        b'{"world": 1, "seed": 2}',
        b'{"seed": 1}',
        b"[1, 2]",
        b'{"seed": "unclosed',
        b"\xff\xfe",
    ):
        assert not json_output("demo").recognise(not_demo)


def test_the_shared_check_refuses_before_writing(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.sqlite")
    with pytest.raises(TriageError, match="is also the -shm file of STORE"):
        check_outputs({"--html file": (Path(f"{store}-shm"), HTML_REPORT)}, stores={"STORE": str(store)})
    check_outputs({"--html file": (tmp_path / "new.html", HTML_REPORT)}, stores={"STORE": str(store)})
    check_outputs({"--html file": (None, HTML_REPORT)}, stores={"STORE": "postgresql://h/db"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite"]


def test_every_writing_command_documents_force() -> None:
    for command in (
        "demo",
        "compare",
        "report",
        "score",
        "calibrate",
        "probe",
        "evolve-bench",
        "schema",
        "export",
    ):
        result = runner.invoke(app, [command, "--help"], env=WIDE)
        assert result.exit_code == 0 and "--force" in result.output, command
    doc = (Path(__file__).parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "## Outputs never replace inputs" in doc and HTML_MARKER in doc


# ------------------------------------------------------------------ demo --store resets only a demo store


def test_demo_twice_in_a_fresh_folder_resets_its_own_store(tmp_path: Path, monkeypatch) -> None:
    """`triage demo` as the README runs it, twice; then `.ci/run`'s two commands, twice."""
    monkeypatch.chdir(tmp_path)
    first = runner.invoke(app, ["demo", "--quiet"], env=WIDE)
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, ["demo", "--quiet"], env=WIDE)
    assert again.exit_code == 0, again.output
    assert (
        "--fresh: reset the triage store triage-demo.sqlite (2 runs: 1 demo-feedback, 1 demo-static"
        in again.output
    )
    with open_store(tmp_path / "triage-demo.sqlite", readonly=True) as store:
        assert [r.kind for r in store.runs()] == ["demo-static", "demo-feedback"]  # one run, not two
    for _ in range(2):
        demo = runner.invoke(app, [*DEMO, "--store", ".ci-demo.sqlite"], env=WIDE)
        assert demo.exit_code == 0, demo.output
        report = runner.invoke(app, ["report", ".ci-demo.sqlite", "--html", ".ci-report.html"], env=WIDE)
        assert report.exit_code == 0, report.output


@pytest.mark.parametrize(
    ("kinds", "score", "says"),
    [
        (("serve",), True, "1 run: 1 serve; 1 event; 1 learned score"),
        (
            ("demo-static", "compare", "serve", "serve"),
            False,
            "4 runs: 2 serve, 1 compare, 1 demo-static; 4 events",
        ),
        ((), True, "0 runs; 0 events; 1 learned score"),
    ],
    ids=["deployment", "mixed", "scores only"],
)
def test_demo_refuses_to_reset_a_store_holding_more_than_demo_runs(
    tmp_path: Path, kinds, score, says
) -> None:
    store = _store(tmp_path / "deploy.sqlite", kinds, score=score)
    before = _digest(store)
    out = tmp_path / "demo.json"
    error = _one_line_error(runner.invoke(app, [*DEMO, "--store", str(store), "--json", str(out)], env=WIDE))
    assert f"holds more than demo runs ({says})" in error and "--force" in error and "--no-fresh" in error
    assert _digest(store) == before and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deploy.sqlite"]
    with open_store(store, readonly=True) as opened:
        assert [r.kind for r in opened.runs()] == list(kinds)


def test_demo_no_fresh_adds_to_a_deployment_store_and_force_resets_it(tmp_path: Path) -> None:
    store = _store(tmp_path / "deploy.sqlite")
    result = runner.invoke(app, [*DEMO, "--store", str(store), "--no-fresh"], env=WIDE)
    assert result.exit_code == 0, result.output
    with open_store(store, readonly=True) as opened:
        assert [r.kind for r in opened.runs()] == ["serve", "demo-static"]
    result = runner.invoke(app, [*DEMO, "--store", str(store), "--force"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert f"--force: reset the triage store {store} (2 runs: 1 demo-static, 1 serve;" in result.output
    with open_store(store, readonly=True) as opened:
        assert [r.kind for r in opened.runs()] == ["demo-static"]
        assert "t" not in opened.get_scores("triple")


@pytest.mark.parametrize("delta", [-1, 1], ids=["older", "newer"])
@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
def test_demo_never_resets_a_store_of_another_schema_version(tmp_path: Path, delta: int, force: bool) -> None:
    store = _store(tmp_path / "demo.sqlite", ("demo-static",))
    db = sqlite3.connect(store)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + delta}")
    db.commit()
    db.close()
    before = _digest(store)
    args = [*DEMO, "--store", str(store), *(["--force"] if force else [])]
    error = _one_line_error(runner.invoke(app, args, env=WIDE))
    assert f"schema version {SCHEMA_VERSION + delta}, not {SCHEMA_VERSION}" in error
    assert "never reset, even with --force" in error
    assert _digest(store) == before
