"""The core reaches its own plugins by role (type or hook), never by name (issue 32).

The manager's accessors (``learner``, ``recorder``, ``scorer``, ``implementers``) find the default
plugins by type; the scan below fails when any module of the core or of an adapter asks for a plugin
by a ``"triage."`` name, or calls ``usage_metrics`` outside ``metrics/`` and the one scorer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import triage_plugins
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.plugins.feedback import FeedbackLearner
from triage_plugins.plugins.recorder import StoreRecorder
from triage_plugins.plugins.usage import UsageRecorder
from triage_plugins.runtime.manager import TriageManager

ROOT = Path(triage_plugins.__file__).parent
ADAPTERS = ROOT.parent / "adapters"


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """Calls of a function or method called ``name`` (``f(...)`` or ``x.f(...)``)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called == name:
                out.append(node)
    return out


def plugins_by_name(root: Path) -> list[str]:
    """``path:line`` of every ``get_plugin("triage.…")`` under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for call in _calls(ast.parse(path.read_text(encoding="utf-8")), "get_plugin"):
            arg = call.args[0] if call.args else None
            if (
                isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and arg.value.startswith("triage.")
            ):
                found.append(f"{path.relative_to(root.parent)}:{call.lineno}")
    return found


def usage_metrics_callers(root: Path) -> set[str]:
    """Modules under ``root`` (outside ``metrics/``) that call ``usage_metrics``."""
    return {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "metrics" not in path.relative_to(root).parts[:1]
        and _calls(ast.parse(path.read_text(encoding="utf-8")), "usage_metrics")
    }


def test_no_core_module_reaches_a_plugin_by_name() -> None:
    roots = [ROOT, *([ADAPTERS] if ADAPTERS.is_dir() else [])]
    assert [hit for root in roots for hit in plugins_by_name(root)] == []


def test_the_scan_finds_a_plugin_asked_for_by_name(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "app.py").write_text(
        'learner = manager.get_plugin(\n    "triage.feedback"\n)\nother = m.get_plugin("mine")\n'
    )
    assert plugins_by_name(pkg) == ["pkg/app.py:1"]


def test_usage_metrics_is_called_by_the_scorer_alone() -> None:
    assert usage_metrics_callers(ROOT) == {"plugins/usage.py"}


def test_learner_recorder_and_scorer_are_found_by_type() -> None:
    with TriageManager(entry_points=False, synchronous=True) as manager:
        assert isinstance(manager.learner, FeedbackLearner)
        assert isinstance(manager.recorder, StoreRecorder)
        assert isinstance(manager.scorer, UsageRecorder)
    with TriageManager(entry_points=False, defaults=False, synchronous=True) as bare:
        assert (bare.learner, bare.recorder, bare.scorer) == (None, None, None)


def test_a_blocked_learner_is_absent_and_a_replacement_under_another_name_is_found(monkeypatch) -> None:
    monkeypatch.setenv("TRIAGE_DISABLE_PLUGINS", "triage.feedback")
    with TriageManager(entry_points=False, synchronous=True) as manager:
        assert manager.learner is None

        class MyLearner(FeedbackLearner):
            pass

        mine = MyLearner(manager)
        manager.register(mine, "my.learner")
        assert manager.learner is mine


def test_implementers_lists_the_plugins_of_one_hook_in_registration_order() -> None:
    class Runners:
        @hookimpl
        def triage_register_runners(self, register) -> None:
            pass

    first, second = Runners(), Runners()
    with TriageManager(entry_points=False, synchronous=True) as manager:
        manager.register(first, "b.first")
        manager.register(second, "a.second")
        runners = manager.implementers("triage_register_runners")
        assert [name for name, _ in runners] == ["triage.reference", "b.first", "a.second"]  # a default first
        assert runners[1:] == [("b.first", first), ("a.second", second)]
        assert [name for name, _ in manager.implementers("triage_feedback")] == [
            "triage.recorder",
            "triage.feedback",
        ]


def test_implementers_of_an_unknown_hook_is_empty() -> None:
    with TriageManager(entry_points=False, defaults=False, synchronous=True) as manager:
        assert manager.implementers("triage_no_such_hook") == []
