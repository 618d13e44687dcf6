"""The CLI never touches what is not a triage store: demo --store/--fresh, store info/prune, report."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage_plugins.apps.store_tools import is_triage_sqlite_file, parse_age, reset_sqlite_store
from triage_plugins.cli import app
from triage_plugins.contract.errors import StoreError, TriageError
from triage_plugins.contract.events import FeedbackEvent
from triage_plugins.store import open_store

runner = CliRunner()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _foreign_sqlite(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    db.execute("INSERT INTO notes (body) VALUES ('keep me')")
    db.commit()
    db.close()
    return path


def _store_with_runs(path: Path, n: int, *, lost: tuple[int, int] = (0, 0)) -> Path:
    with open_store(path) as store:
        for i in range(n):
            run = store.start_run("serve")
            store.record_event(FeedbackEvent("f", f"q{i}", 0.5), run)
            store.end_run(run, dropped=lost[0] if i == 0 else 0, undelivered=lost[1] if i == 0 else 0)
        store.add_score("triple", "t", 3.0)
    return path


def _one_line_error(result) -> str:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    text = result.output.strip()
    assert text.startswith("error:"), text
    return text


@pytest.mark.parametrize("kind", ["text", "foreign sqlite", "folder"])
def test_demo_refuses_a_store_path_that_is_not_a_triage_store(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "thing"
    if kind == "text":
        target.write_text("my notes, not a store\n")
    elif kind == "foreign sqlite":
        _foreign_sqlite(target)
    else:
        target.mkdir()
        (target / "inside.txt").write_text("x")
    before = _digest(target) if target.is_file() else sorted(p.name for p in target.iterdir())
    result = runner.invoke(app, ["demo", "--quiet", "--feedback-rounds", "0", "--store", str(target)])
    assert "left untouched" in _one_line_error(result)
    after = _digest(target) if target.is_file() else sorted(p.name for p in target.iterdir())
    assert after == before


def test_demo_with_a_postgres_url_appends_and_refuses_fresh_and_creates_no_folder(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = "postgresql://u@127.0.0.1:1/db"
    # the default adds the run to the database (nothing reset): here, no server to connect to
    result = runner.invoke(app, ["demo", "--quiet", "--feedback-rounds", "0", "--store", url])
    assert "cannot connect" in _one_line_error(result)
    result = runner.invoke(app, ["demo", "--quiet", "--feedback-rounds", "0", "--store", url, "--fresh"])
    assert "--fresh resets only a store file" in _one_line_error(result)
    assert list(tmp_path.iterdir()) == []


def test_reset_deletes_only_a_triage_store_and_counts_its_runs(tmp_path: Path) -> None:
    store = _store_with_runs(tmp_path / "s.sqlite", 3)
    assert is_triage_sqlite_file(store)
    assert reset_sqlite_store(store) == 3
    assert not store.exists()
    assert reset_sqlite_store(store) is None  # nothing there any more
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert reset_sqlite_store(empty) == 0 and empty.exists()  # an empty file is left for SQLite
    foreign = _foreign_sqlite(tmp_path / "f.sqlite")
    assert not is_triage_sqlite_file(foreign)
    with pytest.raises(StoreError, match="left untouched"):
        reset_sqlite_store(foreign)
    assert foreign.exists()


def test_demo_force_resets_a_triage_store_and_says_so(tmp_path: Path) -> None:
    store = _store_with_runs(tmp_path / "demo.sqlite", 4)
    args = ["demo", "--quiet", "--feedback-rounds", "0", "--store", str(store), "--force"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"--force: reset the triage store {store} (4 runs: 4 serve; 4 events" in result.output
    with open_store(store, readonly=True) as s:
        assert all(r.kind.startswith("demo") for r in s.runs())  # the four "serve" runs are gone
        assert "t" not in s.get_scores("triple")


def test_store_info_lists_runs_and_lost_events_read_only(tmp_path: Path) -> None:
    store = _store_with_runs(tmp_path / "s.sqlite", 2, lost=(7, 5))
    for suffix in ("-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)  # closed cleanly: nothing left beside it
    before = _digest(store)
    result = runner.invoke(app, ["store", "info", str(store)])
    assert result.exit_code == 0, result.output
    assert "runs (latest 2 of 2" in result.output
    assert "12 events never reached this store (7 dropped" in result.output
    assert _digest(store) == before  # read-only: not even the journal mode changed


def test_store_info_on_a_foreign_sqlite_file_changes_nothing(tmp_path: Path) -> None:
    foreign = _foreign_sqlite(tmp_path / "other.sqlite")
    before = _digest(foreign)
    result = runner.invoke(app, ["store", "info", str(foreign)])
    assert "not a triage store" in _one_line_error(result)
    assert _digest(foreign) == before
    assert not Path(f"{foreign}-wal").exists()


def test_report_warns_about_lost_events(tmp_path: Path) -> None:
    store = _store_with_runs(tmp_path / "s.sqlite", 2, lost=(3, 0))
    result = runner.invoke(app, ["report", str(store)])
    assert result.exit_code == 0, result.output
    assert "warning: 3 events never reached this store" in result.output
    html = tmp_path / "r.html"
    assert runner.invoke(app, ["report", str(store), "--html", str(html)]).exit_code == 0
    assert "3 events lost" in html.read_text(encoding="utf-8")


def test_store_prune_keeps_the_latest_runs_and_the_scores(tmp_path: Path) -> None:
    store = _store_with_runs(tmp_path / "s.sqlite", 5)
    result = runner.invoke(app, ["store", "prune", str(store), "--keep-runs", "2"])
    assert result.exit_code == 0, result.output
    assert "pruned" in result.output and "3 runs, 3 events" in result.output
    with open_store(store, readonly=True) as s:
        assert len(s.runs()) == 2
        assert s.counts()["events"] == 2
        assert s.get_scores("triple")["t"].raw == 103.0  # learned scores stay


def test_store_prune_older_than_spares_recent_runs(tmp_path: Path) -> None:
    store = _store_with_runs(tmp_path / "s.sqlite", 2)
    result = runner.invoke(app, ["store", "prune", str(store), "--older-than", "1h"])
    assert result.exit_code == 0, result.output
    with open_store(store, readonly=True) as s:
        assert len(s.runs()) == 2
    time.sleep(0.05)
    assert runner.invoke(app, ["store", "prune", str(store), "--older-than", "0s"]).exit_code == 0
    with open_store(store, readonly=True) as s:
        assert s.runs() == []


@pytest.mark.parametrize(
    "args, expected",
    [
        ([], "--older-than"),
        (["--older-than", "7"], "not an age"),
        (["--older-than", "soon"], "not an age"),
        (["--keep-runs", "-1"], "keep_runs"),
    ],
)
def test_store_prune_bad_arguments_are_one_line_errors(tmp_path: Path, args, expected) -> None:
    store = _store_with_runs(tmp_path / "s.sqlite", 2)
    result = runner.invoke(app, ["store", "prune", str(store), *args])
    assert expected in _one_line_error(result)
    with open_store(store, readonly=True) as s:
        assert len(s.runs()) == 2


def test_store_prune_refuses_foreign_and_missing_files(tmp_path: Path) -> None:
    foreign = _foreign_sqlite(tmp_path / "other.sqlite")
    before = _digest(foreign)
    result = runner.invoke(app, ["store", "prune", str(foreign), "--keep-runs", "0"])
    assert "not a triage store" in _one_line_error(result)
    assert _digest(foreign) == before
    missing = tmp_path / "nope.sqlite"
    result = runner.invoke(app, ["store", "prune", str(missing), "--keep-runs", "0"])
    assert "no store at" in _one_line_error(result)
    assert not missing.exists()


def test_parse_age() -> None:
    assert parse_age("90s") == 90 and parse_age("30m") == 1800 and parse_age("1.5h") == 5400
    assert parse_age("7d") == 7 * 86400 and parse_age("2W") == 14 * 86400
    for bad in ("", "7", "-1d", "1y", "d"):
        with pytest.raises(TriageError):
            parse_age(bad)


def test_store_info_shows_feedback_the_learner_could_not_attribute(tmp_path: Path) -> None:
    from triage_plugins.plugins.feedback import unattributed_param

    path = tmp_path / "t.sqlite"
    with open_store(path) as store:
        store.add_param(unattributed_param("no answer entity"), 3)
    result = runner.invoke(app, ["store", "info", str(path)])
    assert result.exit_code == 0, result.output
    assert "could not attribute" in result.output and "no answer entity: 3" in result.output
    with open_store(tmp_path / "clean.sqlite"):
        pass
    clean = runner.invoke(app, ["store", "info", str(tmp_path / "clean.sqlite")])
    assert clean.exit_code == 0 and "could not attribute" not in clean.output


def test_every_demo_run_is_ended(tmp_path: Path) -> None:
    store = tmp_path / "demo.sqlite"
    result = runner.invoke(app, ["demo", "--quiet", "--feedback-rounds", "1", "--store", str(store)])
    assert result.exit_code == 0, result.output
    with open_store(store, readonly=True) as s:
        runs = s.runs()
    assert [r.kind for r in runs] == ["demo-static", "demo-feedback"]
    assert all(r.ended_at is not None and r.ended_at >= r.started_at for r in runs)
