"""Registration hooks go through the manager's pluggy relay; the built-in metrics and the reference
runner are registered by default plugins, as a third-party plugin's are (issue 32 §4)."""

from __future__ import annotations

import inspect

import pytest

from triage_plugins.adapter_kit.runner import Runner
from triage_plugins.apps.compare import RUNNERS, runner_registry
from triage_plugins.contract.context import PluginContext
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.metrics.registry import BUILTIN_METRICS
from triage_plugins.plugins import DEFAULT_PLUGINS
from triage_plugins.reference.runner import ReferenceRunner
from triage_plugins.runtime.manager import TriageManager


class _Mine(Runner):
    name = framework = "mine"
    modes = ("m",)

    def _run(self, job) -> None:  # noqa: ANN001 - never run here
        raise AssertionError("not run")


class RenamedRunners:
    """Implements the hook under another name (pluggy's ``specname``): only the relay finds it."""

    @hookimpl(specname="triage_register_runners")
    def add_mine(self, register) -> None:  # noqa: ANN001
        register(_Mine())


def test_the_builtin_metrics_come_from_the_default_plugin() -> None:
    with TriageManager(synchronous=True, entry_points=False) as manager:
        [done] = [r for r in manager.registrations("triage_register_metrics") if r.plugin == "triage.metrics"]
        assert done.source == "default" and done.items == tuple(BUILTIN_METRICS)
        registry = manager.metrics
        assert list(registry) == list(BUILTIN_METRICS) and registry.origin("ERC") == "built-in"
        assert [s.symbol for s in registry.chain] == ["QGR", "ERC", "RRS", "ARF", "AGR"]


def test_blocking_the_builtin_metrics_plugin_leaves_them_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIAGE_DISABLE_PLUGINS", "triage.metrics")
    with TriageManager(synchronous=True, entry_points=False) as manager:
        assert len(manager.metrics) == 0


def test_a_manager_without_defaults_still_reads_the_builtin_metrics() -> None:
    with TriageManager(synchronous=True, entry_points=False, defaults=False) as manager:
        assert list(manager.metrics) == list(BUILTIN_METRICS)


def test_defaults_can_name_the_default_plugins_to_load() -> None:
    with TriageManager(synchronous=True, entry_points=False, defaults=("triage.reference",)) as manager:
        assert [p.name for p in manager.plugins()] == ["triage.reference"]
    with pytest.raises(ConfigError, match="no default plugin named triage.nope"):
        TriageManager(synchronous=True, entry_points=False, defaults=("triage.nope",))


def test_the_reference_runner_comes_from_the_default_plugin() -> None:
    assert "reference" not in RUNNERS  # no seeded table entry
    registry = runner_registry([])
    assert list(registry.runners) == ["reference"]
    assert isinstance(registry.runners["reference"], ReferenceRunner)
    assert ("triage.reference", "triage_plugins.reference.plugin:ReferencePlugin") in DEFAULT_PLUGINS


def test_runners_are_read_through_the_relay() -> None:
    registry = runner_registry([RenamedRunners()])
    assert list(registry.runners) == ["reference", "mine"] and registry.errors == []


def test_the_manager_is_a_plugin_context() -> None:
    """Every member of the protocol is the manager's, and the default plugins are typed against it."""
    members = {n for n, _ in inspect.getmembers(PluginContext) if not n.startswith("_")}
    members |= set(PluginContext.__annotations__)
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    try:
        assert all(hasattr(manager, name) for name in members), members - set(dir(manager))
    finally:
        manager.close()
    from triage_plugins.plugins.gate import DefaultGate
    from triage_plugins.plugins.recorder import StoreRecorder
    from triage_plugins.plugins.usage import UsageRecorder

    for plugin in (DefaultGate, StoreRecorder, UsageRecorder):
        assert inspect.signature(plugin).parameters["manager"].annotation == "PluginContext", plugin
