"""A manager start imports nothing it does not use (#32 point 5).

``scipy.optimize`` (the Soft-F1 matching) cost ~47 MiB and 0.3–0.45 s CPU on every start when
``metrics/extraction.py`` imported it at module top; it is now imported by the one function that
calls it. Checked in a fresh interpreter, where ``sys.modules`` holds only what the start loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

START = (
    "import json, sys\n"
    "from triage_plugins.runtime.manager import TriageManager\n"
    "manager = TriageManager(None, synchronous=True)\n"
    "print(json.dumps(sorted(sys.modules)))\n"
)

# Loaded only by the function that needs them, never by a manager start.
NOT_AT_START = ("scipy.optimize",)


def _modules_after_start() -> set[str]:
    done = subprocess.run([sys.executable, "-c", START], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def loaded() -> set[str]:
    return _modules_after_start()


@pytest.mark.parametrize("module", NOT_AT_START)
def test_a_manager_start_does_not_import(loaded: set[str], module: str) -> None:
    assert module not in loaded


def test_the_scorer_imports_no_scipy_before_it_scores() -> None:
    """``scipy.special`` is ``triage calibrate``'s (BCa intervals), not every ``triage score``'s."""
    code = "import sys; import triage_plugins.apps.score_file; print(sorted(m for m in sys.modules if 'scipy' in m))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_soft_f1_still_imports_what_it_needs() -> None:
    import numpy as np

    from triage_plugins.contract.events import Triple
    from triage_plugins.metrics.extraction import soft_f1

    triple = Triple.of("a", "r", "b")
    result = soft_f1([triple], [triple], embedder=lambda texts: np.ones((len(texts), 2)))
    assert result.value == pytest.approx(1.0)
