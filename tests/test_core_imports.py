"""The core knows no framework: it imports with every framework blocked, and no module names one.

The frameworks are read from the installed distribution, not listed here: each adapter's ``triage``
entry point is named after its framework, and the extras of that name (``lightrag``,
``lightrag-server`` ...) say which distributions it needs. A fourth adapter is covered with no edit.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import triage_plugins

# Heavy transitive dependencies of the framework extras, blocked as well (the core never needs them).
TRANSITIVE = ("graphrag_llm", "litellm")


def _adapter_entry_points() -> list[metadata.EntryPoint]:
    """This distribution's ``triage`` entry points outside the core: one per adapter."""
    return [
        ep
        for ep in metadata.entry_points(group="triage")
        if ep.dist is not None
        and _normalized(ep.dist.name) == "triage-plugins"
        and ep.value.split(".")[0] != "triage_plugins"
    ]


def _framework_distributions() -> set[str]:
    """Distributions the adapters' extras require directly (``lightrag-hku``, ``graphrag`` ...)."""
    frameworks = {ep.name for ep in _adapter_entry_points()}
    out = set()
    for line in metadata.requires("triage-plugins") or ():
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", line)
        if extra is None or not any(extra[1] == f or extra[1].startswith(f"{f}-") for f in frameworks):
            continue
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        if name and name[1] != "triage-plugins":
            out.add(name[1])
    return out


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _framework_modules() -> set[str]:
    """Top-level modules of the framework distributions (``lightrag``, ``graphrag``, ``llama_index``)."""
    wanted = {_normalized(d) for d in _framework_distributions()}
    return {
        module
        for module, dists in metadata.packages_distributions().items()
        if any(_normalized(d) in wanted for d in dists) and module.isidentifier()
    }


def test_the_frameworks_are_found_from_the_installed_adapters():
    modules = _framework_modules()
    assert len(_adapter_entry_points()) >= 3
    assert {"lightrag", "graphrag", "llama_index"} <= modules


def test_core_imports_without_any_framework():
    blocked = tuple(sorted(_framework_modules() | set(TRANSITIVE)))
    plugins = tuple(sorted(ep.value.split(":")[0] for ep in _adapter_entry_points()))
    frameworks = sorted(ep.name for ep in _adapter_entry_points())
    code = textwrap.dedent(
        f"""
        import importlib, pkgutil, sys

        BLOCKED = {blocked!r}

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{{name}} is blocked in this test")
                return None

        sys.meta_path.insert(0, Blocker())
        import triage_plugins
        for mod in pkgutil.walk_packages(triage_plugins.__path__, "triage_plugins."):
            importlib.import_module(mod.name)
        for name in {plugins!r}:
            importlib.import_module(name)
        from triage_plugins.runtime.manager import TriageManager
        m = TriageManager(synchronous=True)
        assert not m.load_errors, m.load_errors
        from triage_plugins.apps.compare import runner_registry
        registry = runner_registry()
        assert not registry.errors, registry.errors
        assert set({frameworks!r}) <= set(registry.runners), list(registry.runners)
        leaked = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED)
        assert not leaked, leaked
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


def test_no_core_module_names_a_framework():
    """Neither code nor docstrings of ``triage_plugins/`` name a framework, its package or its module."""
    names = (
        {ep.name for ep in _adapter_entry_points()}
        | _framework_modules()
        | {_normalized(d) for d in _framework_distributions()}
    )
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)), re.I)
    root = Path(triage_plugins.__file__).parent
    found = [
        f"{path.relative_to(root.parent)}:{number}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, "\n".join(found)
