"""The examples run offline, as a user would run them (each in a fresh interpreter)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NEEDS = {
    "lightrag_quickstart.py": "lightrag",
    "llamaindex_quickstart.py": "llama_index",
    "graphrag_quickstart.py": "graphrag",
}
#: Examples run by another test (which also checks what they print), and where.
ELSEWHERE = {"graphrag_quickstart.py": "tests/adapters/test_graphrag.py"}
ENV = {
    **os.environ,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def _run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    module = NEEDS.get(script)
    if module and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py") if p.name not in ELSEWHERE))
def test_example_runs_offline(script, tmp_path):
    out = _run(script, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip(), "an example should show what it measured"


@pytest.mark.parametrize("script", sorted(ELSEWHERE))
def test_example_run_elsewhere_is_run_there(script):
    test = (ROOT / ELSEWHERE[script]).read_text(encoding="utf-8")
    assert f'"examples" / "{script}"' in test, f"{ELSEWHERE[script]} no longer runs examples/{script}"


def test_llamaindex_example_keeps_the_store_it_is_given(tmp_path):
    """README (See it in Phoenix): ``python examples/llamaindex_quickstart.py --store triage.sqlite``."""
    out = _run("llamaindex_quickstart.py", "--store", "triage.sqlite", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "triage.sqlite").stat().st_size > 0
    assert "triage.sqlite" in out.stdout


def test_llamaindex_example_says_a_temporary_store_is_gone(tmp_path):
    out = _run("llamaindex_quickstart.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "deleted" in out.stdout and "--store" in out.stdout
