"""A real PostgreSQL server for the tests: the one ``TRIAGE_TEST_POSTGRES_URL`` names, or a throw-away one.

Without the variable, :func:`start_cluster` runs ``initdb`` in a temporary directory and ``pg_ctl
start`` on 127.0.0.1 at a free port (as the ``postgres`` or ``nobody`` user when run as root: initdb
refuses root). The binaries come from ``PATH`` or ``/usr/lib/postgresql/*/bin``. :func:`fresh_database`
creates an empty database per test, so every test starts clean.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ENV = "TRIAGE_TEST_POSTGRES_URL"


@dataclass
class Cluster:
    """A running server: its admin URL and, when we started it, how to stop it, and to stop and start
    it again keeping its data (``pause`` / ``resume``: a real outage)."""

    url: str
    stop: object = None
    pause: object = None
    resume: object = None


def binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or ``None`` when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(directory) / "initdb").exists() and (Path(directory) / "pg_ctl").exists():
            return Path(directory)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_user() -> tuple[list[str], str | None]:
    """The command prefix to run server binaries unprivileged, and that user's name."""
    if os.geteuid() != 0:
        return [], None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return ["runuser", "-u", name, "--"], name
    raise RuntimeError("running as root with neither a postgres nor a nobody user: initdb refuses root")


def start_cluster(*, fsync: bool = False) -> Cluster:
    """Start a throw-away cluster (trust authentication, 127.0.0.1 only) and return it.

    ``fsync=False`` (the tests) skips flushing to disk; benchmarks of durable commits pass ``True``."""
    bin_dir = binaries()
    if bin_dir is None:
        raise FileNotFoundError("no PostgreSQL binaries (initdb, pg_ctl)")
    prefix, user = _as_user()
    root = Path(tempfile.mkdtemp(prefix="triage-pg-"))
    data = root / "data"
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    run = {"check": True, "capture_output": True, "text": True, "timeout": 120}
    subprocess.run(
        [*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "triage", "-A", "trust", "-E", "UTF8",
         "--no-sync", "--locale=C"],
        **run,
    )  # fmt: skip
    port = _free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync={'on' if fsync else 'off'} -c max_connections=200"
    subprocess.run(
        [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"],
        **run,
    )  # fmt: skip

    def stop() -> None:
        subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)

    def pause() -> None:
        subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], **run)

    def resume() -> None:
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"],
            **run,
        )  # fmt: skip

    return Cluster(f"postgresql://triage@127.0.0.1:{port}/postgres", stop, pause, resume)


def server() -> Cluster:
    """The server of ``TRIAGE_TEST_POSTGRES_URL``, else a cluster started now."""
    url = os.environ.get(ENV, "").strip()
    return Cluster(url) if url else start_cluster()


def with_database(url: str, name: str) -> str:
    """``url`` naming database ``name`` instead (query string kept)."""
    head, _, query = url.partition("?")
    base = head.rsplit("/", 1)[0] if head.count("/") >= 3 else head
    return f"{base}/{name}" + (f"?{query}" if query else "")


def fresh_database(admin_url: str) -> tuple[str, object]:
    """Create an empty database; return its URL and a function dropping it."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE template0")

    def drop() -> None:
        for _ in range(3):
            try:
                with psycopg.connect(admin_url, autocommit=True) as conn:
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                return
            except psycopg.Error:
                time.sleep(0.2)

    return with_database(admin_url, name), drop
