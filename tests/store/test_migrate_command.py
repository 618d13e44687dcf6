"""``triage store migrate STORE``: the one command that migrates a store on request.

Read-only commands refuse an older store (or a new PostgreSQL database) and name this command; it
migrates a triage store of an older schema keeping its data, sets up a new PostgreSQL database,
changes nothing on a current store, and refuses (untouched) a missing path or a foreign file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage_plugins.apps.store_tools import migrate
from triage_plugins.cli import app
from triage_plugins.contract.errors import StoreError
from triage_plugins.store import SCHEMA_VERSION, open_store
from triage_plugins.store.sqlite import MIGRATIONS

runner = CliRunner()


def _version_1_store(path: Path) -> Path:
    raw = sqlite3.connect(path, isolation_level=None)
    for statement in MIGRATIONS[0]:
        raw.execute(statement)
    raw.execute("PRAGMA user_version = 1")
    raw.execute("INSERT INTO scores (unit, id, raw, n_updates, updated_at) VALUES ('triple', 't1', 130.5, 7, 1.0)")
    raw.close()
    return path


def _cli(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})


def test_read_only_commands_name_the_migrate_command(tmp_path: Path) -> None:
    old = _version_1_store(tmp_path / "old.sqlite")
    out = _cli("store", "info", str(old))
    assert out.exit_code == 1
    assert f"triage store migrate {old}" in out.output and "Traceback" not in out.output
    assert sqlite3.connect(old).execute("PRAGMA user_version").fetchone()[0] == 1  # not migrated


def test_migrate_an_older_sqlite_store_keeps_its_data(tmp_path: Path) -> None:
    old = _version_1_store(tmp_path / "old.sqlite")
    out = _cli("store", "migrate", str(old))
    assert out.exit_code == 0, out.output
    assert f"from store schema 1 to {SCHEMA_VERSION}" in out.output
    with open_store(old, readonly=True) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.get_scores("triple")["t1"].raw == 130.5
    again = _cli("store", "migrate", str(old))
    assert again.exit_code == 0 and "nothing to migrate" in again.output


@pytest.mark.parametrize("content", [None, b"", b"just text\n", b"SQLite format 3\x00" + bytes(84)])
def test_migrate_refuses_what_is_not_a_triage_store_untouched(tmp_path: Path, content: bytes | None) -> None:
    target = tmp_path / "thing.sqlite"
    if content is not None:
        target.write_bytes(content)
    out = _cli("store", "migrate", str(target))
    assert out.exit_code == 1 and out.output.startswith("error:"), out.output
    assert len(out.output.strip().splitlines()) == 1
    assert (target.read_bytes() if content is not None else None) == content
    assert not target.exists() or content is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if content is None else ["thing.sqlite"])


def test_migrate_refuses_a_newer_store(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    open_store(path).close()
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(StoreError, match="upgrade triage-plugins"):
        migrate(str(path))


def test_unsupported_scheme_names_postgresql(tmp_path: Path) -> None:
    out = _cli("store", "migrate", "mysql://db.example/triage")
    assert out.exit_code == 1 and "postgresql://" in out.output


def test_a_new_postgresql_database_is_set_up_on_request(postgres_url: str) -> None:
    info = _cli("store", "info", postgres_url)
    assert info.exit_code == 1 and "triage store migrate" in info.output, info.output
    out = _cli("store", "migrate", postgres_url)
    assert out.exit_code == 0, out.output
    assert f"created the triage store in {postgres_url} (schema {SCHEMA_VERSION})" in out.output
    info = _cli("store", "info", postgres_url)
    assert info.exit_code == 0, info.output
    again = _cli("store", "migrate", postgres_url)
    assert again.exit_code == 0 and "nothing to migrate" in again.output
