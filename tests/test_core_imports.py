"""The core imports with no framework installed (frameworks are blocked at import time)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_core_imports_without_any_framework():
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys

        BLOCKED = ("lightrag", "graphrag", "graphrag_llm", "llama_index", "litellm")

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{name} is blocked in this test")
                return None

        sys.meta_path.insert(0, Blocker())
        import triage_plugins
        for mod in pkgutil.walk_packages(triage_plugins.__path__, "triage_plugins."):
            importlib.import_module(mod.name)
        for name in ("triage_lightrag.plugin", "triage_graphrag.plugin", "triage_llamaindex.plugin"):
            importlib.import_module(name)
        from triage_plugins.runtime.manager import TriageManager
        m = TriageManager(synchronous=True)
        assert not m.load_errors, m.load_errors
        leaked = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED)
        assert not leaked, leaked
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
