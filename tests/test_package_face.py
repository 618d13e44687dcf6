"""The package face: what users and plugin authors import from ``triage_plugins`` itself (issue #32)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import triage_plugins


def test_every_public_name_resolves_to_the_object_it_names() -> None:
    from triage_plugins.contract.events import RetrievalEvent
    from triage_plugins.contract.hookspecs import hookimpl
    from triage_plugins.contract.records import QueryRecord
    from triage_plugins.metrics.registry import MetricSpec
    from triage_plugins.runtime.manager import TriageManager

    for name in triage_plugins.__all__:
        assert getattr(triage_plugins, name) is not None, name
    assert triage_plugins.hookimpl is hookimpl
    assert triage_plugins.TriageManager is TriageManager
    assert triage_plugins.RetrievalEvent is RetrievalEvent
    assert triage_plugins.QueryRecord is QueryRecord
    assert triage_plugins.MetricSpec is MetricSpec


def test_the_events_and_the_manager_are_on_the_face() -> None:
    wanted = {
        "hookimpl",
        "TriageManager",
        "RetrievalEvent",
        "GenerationEvent",
        "GraphEvent",
        "Triple",
        "Subgraph",
    }
    assert wanted <= set(triage_plugins.__all__)


def test_importing_the_package_imports_neither_the_manager_nor_the_metrics() -> None:
    code = (
        "import sys, triage_plugins; "
        "print(sorted(m for m in ('triage_plugins.runtime.manager', 'triage_plugins.metrics.registry') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_plugin_authors_type_against_the_plugin_context() -> None:
    from triage_plugins.contract.context import PluginContext

    assert triage_plugins.PluginContext is PluginContext and "PluginContext" in triage_plugins.__all__


@pytest.mark.parametrize(
    "old", ["events", "hookspecs", "manager", "graph", "grounding", "ontology", "errors", "config"]
)
def test_the_module_paths_before_the_layout_are_gone(old: str) -> None:
    """The compatibility layer is deleted (issue 32): the package face or the folders, nothing else."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"triage_plugins.{old}")
