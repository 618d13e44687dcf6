"""The manager's plugins register metrics through pluggy's relay, not by attribute lookup (issue 32 §4)."""

from __future__ import annotations

import pytest

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.metrics.registry import MetricSpec
from triage_plugins.metrics.result import MetricResult, ok
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.runtime.registrations import metric_registry


def _one(retrieval, generation=None, *, grounder=None, closed_book=None) -> MetricResult:
    return ok("R1", 1.0, n=1)


class Renamed:
    """Implements the hook under another name (pluggy's ``specname``): only the relay finds it."""

    @hookimpl(specname="triage_register_metrics")
    def add_mine(self, register):
        register(MetricSpec("R1", "R1", "usage", "generation", _one, "toy", value_range=None))


def test_a_specname_implementation_registers() -> None:
    with TriageManager(synchronous=True, entry_points=False) as manager:
        manager.register(Renamed(), name="renamed")
        [done] = [r for r in manager.registrations("triage_register_metrics") if r.plugin == "renamed"]
        assert [s.symbol for s in done.items] == ["R1"] and done.error is None
        assert metric_registry(manager).origin("R1") == "plugin 'renamed'"


def test_only_registration_hooks_are_collected() -> None:
    with TriageManager(synchronous=True, entry_points=False) as manager, pytest.raises(ConfigError):
        manager.registrations("triage_retrieval")
