"""``python -m triage_graphrag``: a project without settings is one ``error:`` line, exit 2, and no
store is created (the check runs before GraphRAG is imported). The observed ``index`` and ``query``
on an offline project run in docs/graphrag.md's command-line block (tests/test_readme.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("command", ["index", "update", "query"])
def test_no_settings_is_one_line(tmp_path: Path, command: str) -> None:
    args = [sys.executable, "-m", "triage_graphrag", command] + (
        ["Who directed Inception?"] if command == "query" else []
    )
    out = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: no settings.yaml") and len(out.stderr.strip().splitlines()) == 1
    assert "graphrag init" in out.stderr and "Traceback" not in out.stderr
    assert list(tmp_path.iterdir()) == []  # no triage.sqlite left behind


def test_a_missing_root_is_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "triage_graphrag", "index", "--root", str(tmp_path / "nowhere")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2 and out.stderr.startswith("error: no GraphRAG project at")
    assert len(out.stderr.strip().splitlines()) == 1
