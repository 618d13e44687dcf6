"""The examples run offline, as a user would run them (each in a fresh interpreter)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NEEDS = {
    "lightrag_quickstart.py": "lightrag",
    "llamaindex_quickstart.py": "llama_index",
    "graphrag_quickstart.py": "graphrag",
}


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py") if p.name != "graphrag_quickstart.py"))
def test_example_runs_offline(script, tmp_path):
    module = NEEDS.get(script)
    if module and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip(), "an example should show what it measured"
