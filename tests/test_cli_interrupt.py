"""Ctrl-C: ``triage`` stops with one line on stderr and exit status 130 (issue #33), no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from triage_plugins.cli import INTERRUPTED

TRIAGE = Path(sys.executable).parent / "triage"


def test_ctrl_c_prints_one_line_and_exits_130(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [str(TRIAGE), "demo", "--seeds", "30", "--store", str(tmp_path / "d.sqlite")],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    first = proc.stderr.readline()  # the first progress line: the command is running
    assert first, "triage demo printed no progress before ending"
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130, rest[-2000:]
    assert "Traceback" not in rest, rest[-3000:]
    assert rest.strip().splitlines()[-1] == INTERRUPTED
    assert rest.count("interrupted") == 1
