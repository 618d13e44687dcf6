"""Test-wide settings: stay offline whatever the machine has configured."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
for var in ("TRIAGE_DISABLE_PLUGINS", "TRIAGE_TRACE_PLUGINS", "TRIAGE_SYNC", "TRIAGE_STORE"):
    os.environ.pop(var, None)

#: Real KGQA data shipped beside the repository (never copied into it).
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data``, or skip with a clear message when this clone has none."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real KGQA data not found at {SHARED_DATA} (a fresh clone has no ../shared)")
    return SHARED_DATA
