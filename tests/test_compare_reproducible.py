"""`triage compare` reproduces under any PYTHONHASHSEED (#18): two processes, two hash seeds, the
same JSON but for timings. Real LightRAG and LlamaIndex, offline stand-ins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightrag")
pytest.importorskip("llama_index.core")

TIMINGS = {"latency", "seconds", "generated_at", "store"}


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _compare(tmp_path: Path, hash_seed: str) -> dict:
    out = tmp_path / f"compare-{hash_seed}.json"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    cmd = [
        sys.executable, "-m", "triage_plugins.cli", "compare", "--frameworks", "lightrag,llamaindex",
        "--modes", "local,mix,synonym", "--max-questions", "20", "--feedback-rounds", "1", "--quiet",
        "--json", str(out),
    ]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return _strip(json.loads(out.read_text()))


@pytest.mark.slow
def test_two_hash_seeds_give_the_same_rows(tmp_path):
    a, b = _compare(tmp_path, "1"), _compare(tmp_path, "2")
    assert [r["mode"] for r in a["rows"]] == ["local", "mix", "synonym"]
    assert a == b
