"""One plugin failing in ``triage_register_metrics`` does not drop the others' metrics (issue #34, item 7)."""

from __future__ import annotations

import pytest

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.metrics.registry import BUILTIN_METRICS, MetricSpec
from triage_plugins.metrics.result import MetricResult, ok
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.runtime.registrations import metric_registry


def _words(retrieval, generation=None, *, grounder=None, closed_book=None) -> MetricResult:
    return ok("A1", 1.0, n=1)


def _spec(symbol: str) -> MetricSpec:
    return MetricSpec(symbol, symbol, "usage", "generation", _words, "toy", value_range=None)


class First:
    @hookimpl
    def triage_register_metrics(self, register):
        register(_spec("A1"))


class Raising:
    """Registers one metric, then raises: the metric it did register must not stay either."""

    @hookimpl
    def triage_register_metrics(self, register):
        register(_spec("HALF"))
        raise RuntimeError("boom")


class Last:
    @hookimpl
    def triage_register_metrics(self, register):
        register(_spec("Z9"))


class Clashing:
    @hookimpl
    def triage_register_metrics(self, register):
        register(_spec("A1"))


def test_a_raising_plugin_is_reported_and_the_others_kept(caplog: pytest.LogCaptureFixture) -> None:
    manager = TriageManager(":memory:", synchronous=True, entry_points=False)
    for plugin, name in ((First(), "first"), (Raising(), "raising"), (Last(), "last"), (Clashing(), "clash")):
        manager.register(plugin, name=name)
    with caplog.at_level("ERROR", logger="triage.metrics.registry"):
        registry = metric_registry(manager)
    assert "A1" in registry and "Z9" in registry  # before and after the failing plugin
    assert "HALF" not in registry  # a failing plugin adds nothing, not half of what it meant to
    assert registry.origin("A1") == "plugin 'first'"  # the clash did not replace it
    assert set(registry.failed) == {"raising", "clash"}
    assert "RuntimeError: boom" in registry.failed["raising"]
    assert "already registered" in registry.failed["clash"]
    assert "raising" in caplog.text and "clash" in caplog.text
    assert all(s.symbol in registry for s in BUILTIN_METRICS)
    manager.close()


def test_plugins_passed_by_the_caller_stay_strict() -> None:
    with pytest.raises(
        ConfigError, match="plugin 'Raising': triage_register_metrics raised RuntimeError: boom"
    ):
        metric_registry(plugins=[First(), Raising()])
