"""A run ended in an ``atexit`` handler keeps its connection (the SIGTERM flush of #34).

During interpreter shutdown the main thread is marked stopped while it still runs ``atexit``; a
store that closed "dead threads'" connections whenever another thread opened one closed the main
thread's too, and the run was never marked ended ("Cannot operate on a closed database")."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from triage_plugins.store import open_store


def test_a_run_ended_at_exit_after_another_thread_connected(tmp_path: Path) -> None:
    path = tmp_path / "exit.sqlite"
    script = textwrap.dedent(f"""
        import atexit, threading
        from triage_plugins.store import open_store
        store = open_store({str(path)!r})
        run = store.start_run("serve")
        def end():
            worker = threading.Thread(target=lambda: store.get_param("x"))  # a new thread connects
            worker.start(); worker.join()
            store.end_run(run, undelivered=3)
        atexit.register(end)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    with open_store(path, readonly=True) as store:
        (row,) = store.runs()
    assert row.ended_at is not None and row.undelivered == 3
