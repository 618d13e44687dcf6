"""PostgreSQL-only behaviour of the store: marker table, foreign schemas, newer schemas, read-only, fork."""

from __future__ import annotations

import multiprocessing

import pytest

from triage_plugins.contract.errors import StoreError
from triage_plugins.store import open_store
from triage_plugins.store.postgres import MARKER, SCHEMA_VERSION, PostgresStore, redact


def _sql(url: str, statement: str) -> list:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


def test_a_database_with_foreign_tables_is_refused_untouched(postgres_url):
    _sql(postgres_url, "CREATE TABLE events (x int)")
    with pytest.raises(StoreError, match="not a triage store"):
        open_store(postgres_url)
    tables = {r[0] for r in _sql(postgres_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert tables == {"events"}  # nothing created, nothing migrated


def test_a_newer_schema_asks_to_upgrade(postgres_url):
    open_store(postgres_url).close()
    _sql(postgres_url, f"UPDATE {MARKER} SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="upgrade triage-plugins") as info:
        open_store(postgres_url)
    assert "99" in str(info.value)


def test_readonly_reads_and_refuses_writes_and_missing_stores(postgres_url):
    with pytest.raises(StoreError, match="triage store migrate"):
        open_store(postgres_url, readonly=True)  # an empty database is not migrated read-only
    with open_store(postgres_url) as store:
        store.add_score("triple", "t1", 1.0)
    with open_store(postgres_url, readonly=True) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.get_scores("triple")["t1"].raw == 101.0
        with pytest.raises(StoreError, match="read-only"):
            store.add_score("triple", "t1", 1.0)


def _open_and_score(url: str, barrier, out) -> None:
    barrier.wait()
    try:
        with open_store(url) as store:
            store.add_score("triple", "x", 1.0)
        out.put(None)
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        out.put(repr(exc))


def test_workers_opening_a_new_database_together_migrate_it_once(postgres_url):
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_open_and_score, args=(postgres_url, barrier, out)) for _ in range(6)]
    for p in procs:
        p.start()
    errors = [e for e in (out.get(timeout=60) for _ in procs) if e]
    for p in procs:
        p.join(30)
    assert errors == []
    with open_store(postgres_url) as store:
        assert store.get_scores("triple")["x"].raw == 106.0


def test_a_forked_child_gets_its_own_connections(postgres_url):
    store = open_store(postgres_url)
    store.add_score("triple", "p", 1.0)
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=lambda: store.add_score("triple", "p", 1.0))
    proc.start()
    proc.join(30)
    assert proc.exitcode == 0
    assert store.add_score("triple", "p", 1.0) == 103.0  # the parent's pool still works
    store.close()


def test_the_url_never_shows_the_password():
    assert redact("postgresql://me:pw@host:5432/db") == "postgresql://me:***@host:5432/db"
    assert redact("postgresql://host/db") == "postgresql://host/db"
    assert isinstance(PostgresStore.open.__doc__, str)
