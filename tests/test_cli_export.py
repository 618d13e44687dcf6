"""`triage export`, `triage score --skip-bad` and the up-front path checks of the CLI."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from triage_plugins.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory):
    from triage_plugins.apps.demo import run_demo

    path = tmp_path_factory.mktemp("demo") / "demo.sqlite"
    run_demo(seed=0, store=str(path), feedback_rounds=1)
    return path


def _one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def test_export_round_trips_through_score(demo_store, tmp_path):
    from triage_plugins.apps.score import score_events
    from triage_plugins.apps.score_file import score_file
    from triage_plugins.store import open_store

    out = tmp_path / "events.jsonl"
    result = runner.invoke(app, ["export", str(demo_store), "--jsonl", str(out)], env=WIDE)
    assert result.exit_code == 0, result.output
    with open_store(demo_store, readonly=True) as store:
        stored = list(store.events())
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(stored) > 0
    assert f"{len(stored)} events written" in result.output
    scored = score_file(out)
    direct = score_events(stored)
    assert scored.total_queries == direct.total_queries > 0
    assert scored.counts == direct.counts
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file is gone


def test_export_filters_by_kind_and_run(demo_store, tmp_path):
    from triage_plugins.store import open_store

    with open_store(demo_store, readonly=True) as store:
        runs = store.runs()
        n_retrieval = sum(1 for _ in store.events("retrieval"))
        first_run = runs[0].id
        n_first = sum(1 for _ in store.events(run_id=first_run))
    out = tmp_path / "r.jsonl"
    assert (
        runner.invoke(app, ["export", str(demo_store), "--jsonl", str(out), "--kind", "retrieval"]).exit_code
        == 0
    )
    kinds = {json.loads(ln)["event"] for ln in out.read_text().splitlines()}
    assert kinds == {"retrieval"} and len(out.read_text().splitlines()) == n_retrieval
    out2 = tmp_path / "run.jsonl"
    assert (
        runner.invoke(app, ["export", str(demo_store), "--jsonl", str(out2), "--run", first_run]).exit_code
        == 0
    )
    assert len(out2.read_text().splitlines()) == n_first


def test_export_refuses_to_overwrite_without_force(demo_store, tmp_path):
    out = tmp_path / "keep.jsonl"
    out.write_text("precious\n")
    line = _one_line_error(runner.invoke(app, ["export", str(demo_store), "--jsonl", str(out)], env=WIDE))
    assert "--force" in line
    assert out.read_text() == "precious\n"
    result = runner.invoke(app, ["export", str(demo_store), "--jsonl", str(out), "--force"])
    assert result.exit_code == 0, result.output
    assert out.read_text() != "precious\n"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--kind", "bogus"], "unknown event kind"),
        (["--run", "no-such-run"], "not in"),
    ],
)
def test_export_bad_filters_are_one_line_errors(demo_store, tmp_path, args, needle):
    out = tmp_path / "x.jsonl"
    line = _one_line_error(
        runner.invoke(app, ["export", str(demo_store), "--jsonl", str(out), *args], env=WIDE)
    )
    assert needle in line
    assert not out.exists()


def test_export_missing_store_and_non_store(tmp_path):
    out = tmp_path / "x.jsonl"
    line = _one_line_error(
        runner.invoke(app, ["export", str(tmp_path / "nope.sqlite"), "--jsonl", str(out)], env=WIDE)
    )
    assert "no store" in line
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    _one_line_error(runner.invoke(app, ["export", str(notes), "--jsonl", str(out)], env=WIDE))
    assert notes.read_text() == "my notes\n" and not out.exists()


def test_export_output_in_missing_folder(demo_store, tmp_path):
    line = _one_line_error(
        runner.invoke(app, ["export", str(demo_store), "--jsonl", str(tmp_path / "no" / "x.jsonl")], env=WIDE)
    )
    assert "does not exist" in line


# --------------------------------------------------------------------------- score --skip-bad


def _trace_with_bad_lines(demo_store, tmp_path):
    from triage_plugins.store import open_store

    with open_store(demo_store, readonly=True) as store:
        good = [e.to_json() for e in store.events()]
    lines = [*good[:3], "{not json", *good[3:6], '{"event": "retrieval"}', b"\xff\xfe bad".decode("latin-1"),
             *good[6:], '{"event": "nope"}']  # fmt: skip
    path = tmp_path / "mixed.jsonl"
    with open(path, "wb") as fh:
        for line in lines:
            fh.write(b"\xff\xfe bad\n" if line.startswith("ÿþ") else (line + "\n").encode("utf-8"))
    clean = tmp_path / "clean.jsonl"
    clean.write_text("".join(g + "\n" for g in good), encoding="utf-8")
    return path, clean, [4, 8, 9, len(lines)]


def test_score_skip_bad_scores_the_rest(demo_store, tmp_path):
    from triage_plugins.apps.score_file import score_file

    mixed, clean, bad_numbers = _trace_with_bad_lines(demo_store, tmp_path)
    stopped = runner.invoke(app, ["score", str(mixed)], env=WIDE)
    assert stopped.exit_code == 1 and "line 4" in stopped.output
    report = score_file(mixed, skip_bad=True)
    assert report.bad_lines.count == 4
    assert [n for n, _ in report.bad_lines.first] == bad_numbers
    expected = score_file(clean)
    assert report.total_queries == expected.total_queries > 0
    assert report.counts == expected.counts
    assert any("4 bad line(s)" in note for note in report.notes)
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["score", str(mixed), "--skip-bad", "--json", str(out)], env=WIDE)
    assert result.exit_code == 0, result.output
    warning = next(ln for ln in result.output.splitlines() if ln.startswith("warning:"))
    assert "4 bad line(s)" in warning and "line 4:" in warning and "line 9: not UTF-8" in warning
    assert len(json.loads(out.read_text())["queries"]) == expected.total_queries


def test_score_skip_bad_summary_lists_only_the_first_few(tmp_path):
    from triage_plugins.apps.score_file import score_file

    path = tmp_path / "bad.jsonl"
    path.write_text("".join(f"garbage {i}\n" for i in range(12)))
    report = score_file(path, skip_bad=True)
    assert report.bad_lines.count == 12 and len(report.bad_lines.first) == 5
    assert "7 more" in report.bad_lines.summary(path)
    assert report.total_queries == 0


# --------------------------------------------------------------------------- path checks


def test_score_rejects_a_folder_and_a_store_up_front(demo_store, tmp_path):
    assert "is a folder" in _one_line_error(runner.invoke(app, ["score", str(tmp_path)], env=WIDE))
    line = _one_line_error(runner.invoke(app, ["score", str(demo_store)], env=WIDE))
    assert "UnicodeDecodeError" not in line


def test_score_bad_json_path_fails_before_scoring(demo_store, tmp_path):
    out = tmp_path / "missing" / "r.json"
    line = _one_line_error(runner.invoke(app, ["score", str(demo_store), "--json", str(out)], env=WIDE))
    assert "--json file" in line and "does not exist" in line


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "--json", "{missing}/x.json"],
        ["compare", "--html", "{folder}"],
        ["compare", "--questions", "{missing}/q.jsonl"],
        ["compare", "--corpus", "{missing}"],
        ["evolve-bench", "--kb", "{missing}/kb.txt", "--questions", "{missing}/q.txt"],
        ["evolve-bench", "--kb", "{file}", "--questions", "{file}", "--json", "{missing}/o.json"],
        ["probe", "--kb", "{missing}/kb.txt"],
        ["probe", "--kb", "{file}", "--json", "{folder}"],
        ["schema", "--out", "{missing}/s.json"],
    ],
)
def test_long_commands_check_paths_first(tmp_path, args):
    f = tmp_path / "kb.txt"
    f.write_text("a\tr\tb\n")
    fill = {"missing": str(tmp_path / "missing"), "folder": str(tmp_path), "file": str(f)}
    line = _one_line_error(runner.invoke(app, [a.format(**fill) for a in args], env=WIDE))
    assert str(tmp_path) in line


def test_compare_unknown_framework_names_close_matches():
    line = _one_line_error(runner.invoke(app, ["compare", "--frameworks", "lightrg", "-q"], env=WIDE))
    assert "lightrag" in line and "did you mean" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_output_folder(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        line = _one_line_error(runner.invoke(app, ["schema", "--out", str(locked / "s.json")], env=WIDE))
        assert "permission denied" in line
    finally:
        locked.chmod(0o700)


def test_compare_unknown_mode_names_close_matches():
    result = runner.invoke(app, ["compare", "--frameworks", "reference", "--modes", "krg", "-q"], env=WIDE)
    line = _one_line_error(result)
    assert "did you mean krag?" in line


def test_calibrate_rejects_a_folder(tmp_path):
    line = _one_line_error(runner.invoke(app, ["calibrate", str(tmp_path)], env=WIDE))
    assert "is a folder" in line
