"""Read-only opens leave no files behind (#33 item 6), and never remove a live writer's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from triage_plugins.cli import app
from triage_plugins.contract.events import FeedbackEvent
from triage_plugins.store import open_store


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "s.sqlite"
    with open_store(path) as store:
        store.record_event(FeedbackEvent("toy", "q1", 1.0))
    assert not list(tmp_path.glob("s.sqlite-*"))  # the writer, last to close, removed its WAL files
    return path


def test_reports_and_store_info_leave_no_wal_or_shm(tmp_path: Path) -> None:
    path = _store(tmp_path)
    for args in (["store", "info", str(path)], ["report", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert not list(tmp_path.glob("s.sqlite-*")), args
    with open_store(path, readonly=True) as store:
        assert [e.query_id for e in store.events("feedback")] == ["q1"]
    assert not list(tmp_path.glob("s.sqlite-*"))


def test_a_live_writers_files_stay(tmp_path: Path) -> None:
    path = _store(tmp_path)
    writer = sqlite3.connect(str(path), isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO params (name, value, updated_at) VALUES ('x', '1', 0)")
        writer.execute("COMMIT")  # the WAL now holds a frame only this writer has seen checkpointed
        before = {p.name for p in tmp_path.glob("s.sqlite-*")}
        assert before == {"s.sqlite-wal", "s.sqlite-shm"}
        with open_store(path, readonly=True) as store:
            assert store.get_param("x") == 1
        assert {p.name for p in tmp_path.glob("s.sqlite-*")} == before
        assert writer.execute("SELECT value FROM params WHERE name = 'x'").fetchone() == ("1",)
    finally:
        writer.close()
