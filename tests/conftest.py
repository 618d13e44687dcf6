"""Test-wide settings: stay offline whatever the machine has configured."""

from __future__ import annotations

import os
from pathlib import Path

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
