"""Fixtures of the store tests: a real PostgreSQL server (``pgserver.py``) and a clean database per test."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest


def _load_pgserver():
    spec = importlib.util.spec_from_file_location(
        "triage_tests_pgserver", Path(__file__).with_name("pgserver.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


pg = _load_pgserver()


@pytest.fixture(scope="session")
def postgres_server():
    """The PostgreSQL server of the session; skips only where no PostgreSQL binaries exist."""
    pytest.importorskip("psycopg", reason='psycopg is not installed: pip install "triage-plugins[postgres]"')
    if not pg.binaries() and not os.environ.get(pg.ENV):
        pytest.skip(
            f"no PostgreSQL binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin, and no ${pg.ENV}"
        )
    cluster = pg.server()
    yield cluster
    if cluster.stop is not None:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_server):
    """The URL of an empty database, dropped after the test."""
    url, drop = pg.fresh_database(postgres_server.url)
    yield url
    drop()
