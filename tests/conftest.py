"""Test-wide settings: stay offline whatever the machine has configured."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# A store or a trace exporter configured on this machine must not receive the tests' events.
for var in (
    "TRIAGE_DISABLE_PLUGINS", "TRIAGE_TRACE_PLUGINS", "TRIAGE_SYNC", "TRIAGE_STORE", "TRIAGE_STORE_URL",
    "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
):  # fmt: skip
    os.environ.pop(var, None)

#: Real KGQA data shipped beside the repository (never copied into it).
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _load_pgserver() -> ModuleType:
    """``tests/store/pgserver.py`` as the module ``triage_tests_pgserver`` (one copy for every folder)."""
    spec = importlib.util.spec_from_file_location(
        "triage_tests_pgserver", Path(__file__).parent / "store" / "pgserver.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up; tests import it by this name
    spec.loader.exec_module(module)
    return module


pg = _load_pgserver()


@pytest.fixture(scope="session")
def postgres_server():
    """The PostgreSQL server of the session, shared by every test folder (``tests/store/pgserver.py``:
    ``$TRIAGE_TEST_POSTGRES_URL``, else one started with ``initdb``); skips only where no PostgreSQL
    binaries exist."""
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


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data``, or skip with a clear message when this clone has none."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real KGQA data not found at {SHARED_DATA} (a fresh clone has no ../shared)")
    return SHARED_DATA


@pytest.fixture
def install_plugin(tmp_path: Path):
    """Install ``plugin`` as a distribution with a ``triage`` entry point, for the test's duration.

    ``uninstall = install_plugin("toy_pkg", "toy-name", plugin_object)``; what is still installed when
    the test ends is removed then (call ``uninstall()`` first to refresh caches after removal).
    """
    import importlib
    import sys
    import types

    installed: list[str] = []

    def uninstall() -> None:
        while installed:
            del sys.modules[installed.pop()]
        if str(tmp_path) in sys.path:
            sys.path.remove(str(tmp_path))
        importlib.invalidate_caches()

    def install(module_name: str, entry_point: str, plugin: object):
        dist = tmp_path / f"{module_name}-0.1.dist-info"
        dist.mkdir()
        name = module_name.replace("_", "-")
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text(f"[triage]\n{entry_point} = {module_name}:plugin\n")
        module = types.ModuleType(module_name)
        module.plugin = plugin  # type: ignore[attr-defined]
        sys.modules[module_name] = module
        if str(tmp_path) not in sys.path:
            sys.path.insert(0, str(tmp_path))
        installed.append(module_name)
        importlib.invalidate_caches()
        return uninstall

    yield install
    uninstall()


class LocalServers:
    """Helpers for tests that start a real server process on 127.0.0.1 (fixture ``local_servers``)."""

    @staticmethod
    def free_port() -> int:
        """A TCP port free on 127.0.0.1 right now."""
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    @staticmethod
    def wait_http(proc: Any, url: str, log: Path, seconds: float, what: str = "server") -> None:
        """Poll ``GET url`` until it answers 200; fail with the log's tail if ``proc`` exits or
        ``seconds`` pass first."""
        import time

        import httpx

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(url, timeout=max(0.2, min(1.0, deadline - time.monotonic()))).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        pytest.fail(f"{what} did not answer {url} within {seconds:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def local_servers() -> type[LocalServers]:
    """:class:`LocalServers`: a free local port, and waiting for a started server to answer."""
    return LocalServers
