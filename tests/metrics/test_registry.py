"""The metric registry (metrics/registry.py): one list, read by every consumer, extended by plugins.

A toy usage metric is defined and registered here by a plugin through ``triage_register_metrics``,
and shown to be recorded by the usage plugin, computed by ``triage score`` (function and CLI), and
shown by both reports and the compare tables, with no edit to the core. The CLI and compare paths
read the ``triage`` entry-point plugins, so the toy plugin is installed as one: a distribution's
metadata in a temporary directory on ``sys.path`` whose entry point names the plugin defined here.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from triage_plugins import hookimpl
from triage_plugins.apps import compare
from triage_plugins.apps.compare import aggregate_events
from triage_plugins.apps.score import CHAIN_COLUMNS, render_score_report, score_events
from triage_plugins.cli import app
from triage_plugins.contract.config import CHAIN_THRESHOLDS, TriageConfig
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import (
    Chunk,
    ExtractedTriple,
    ExtractionEvent,
    GenerationEvent,
    Gold,
    GraphEvent,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.diagnosis.chain import CHAIN
from triage_plugins.metrics import extraction, validation
from triage_plugins.metrics.per_query import usage_metrics
from triage_plugins.metrics.registry import (
    BUILTIN_METRICS,
    LinkSpec,
    MetricRegistry,
    MetricSpec,
)
from triage_plugins.metrics.result import MetricResult, na, ok
from triage_plugins.report import build_store_report, compare_html, render_compare, store_html
from triage_plugins.report.data import SUMMARY_METRICS
from triage_plugins.report.results import CompareResult
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.runtime.registrations import metric_registry

# --------------------------------------------------------------------------- the toy metric: one function ...


def answer_words(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: object = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """WORDS: how many words the answer has (N/A before the reader runs)."""
    if generation is None:
        return na("WORDS", "no generation event for this query")
    return ok("WORDS", float(len(generation.answer.split())), n=1)


# ... plus its MetricSpec, registered by a plugin

WORDS = MetricSpec(
    "WORDS", "Answer length (words)", "usage", "generation", answer_words, "toy", value_range=None
)


class ToyMetrics:
    """A third-party plugin that adds one usage metric."""

    @hookimpl
    def triage_register_metrics(self, register):
        register(WORDS)


class Duplicate:
    @hookimpl
    def triage_register_metrics(self, register):
        register(MetricSpec("ERC", "my ERC", "usage", "retrieval", answer_words, "toy"))


# --------------------------------------------------------------------------- events


T1 = Triple("t1", "Inception", "directed_by", "Christopher Nolan")
T2 = Triple("t2", "Interstellar", "directed_by", "Christopher Nolan")
GRAPH = GraphView([T1, T2])
GOLD = Gold(answers=("Christopher Nolan",), entities=("Inception",))


def _events(framework: str = "toy") -> list:
    chunk = Chunk("c1", "d1", "Inception was directed by Christopher Nolan.")
    events: list = [
        ExtractionEvent(framework, "run1", chunk, (ExtractedTriple(T1, None, "directed by"),)),
        GraphEvent(framework, GRAPH),
    ]
    for i, answer in enumerate(("Christopher Nolan directed Inception.", "Nolan.")):
        qid = f"q{i}"
        mentions = {"Inception": "Inception"}
        events.append(
            RetrievalEvent(
                framework, qid, "Who directed Inception?", tuple(mentions), mentions, Subgraph((T1,)),
                expanded_nodes=3, retriever="local", gold=GOLD,
            )
        )  # fmt: skip
        events.append(GenerationEvent(framework, qid, answer))
    return events


def _run(manager: TriageManager, events: list) -> TriageManager:
    emit = {
        "extraction": manager.emit_extraction,
        "graph": manager.emit_graph,
        "retrieval": manager.emit_retrieval,
        "generation": manager.emit_generation,
    }
    for event in events:
        emit[event.kind](event)
    manager.flush()
    return manager


@pytest.fixture
def installed(install_plugin) -> Iterator[None]:
    """The toy plugin installed as a distribution with a ``triage`` entry point."""
    uninstall = install_plugin("toy_triage_metrics", "toy-metrics", ToyMetrics())
    metric_registry(refresh=True)
    try:
        yield
    finally:
        uninstall()
        metric_registry(refresh=True)


# --------------------------------------------------------------------------- registering


def test_a_plugin_adds_a_metric_after_the_builtins() -> None:
    registry = metric_registry(plugins=[ToyMetrics()])
    assert list(registry)[: len(BUILTIN_METRICS)] == list(BUILTIN_METRICS)
    assert registry["WORDS"] is WORDS and list(registry)[-1] is WORDS
    assert registry.origin("WORDS") == "plugin 'ToyMetrics'" and registry.origin("ERC") == "built-in"
    assert "WORDS" in registry.columns("usage") and "WORDS" not in BUILTIN_METRICS


def test_a_duplicate_symbol_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'ERC' is already registered"):
        metric_registry(plugins=[Duplicate()])
    with pytest.raises(ConfigError, match="'WORDS' is already registered"):
        metric_registry(plugins=[ToyMetrics(), ToyMetrics()])
    registry = BUILTIN_METRICS.copy()
    with pytest.raises(ConfigError):
        registry.register(BUILTIN_METRICS["QGR"])


def test_a_registered_metric_cannot_join_the_chain_or_be_malformed() -> None:
    link = LinkSpec(6, 0.5, "my_gap", "mine")
    with pytest.raises(ConfigError, match="cannot join the diagnostic chain"):
        BUILTIN_METRICS.copy().register(
            MetricSpec("X", "x", "usage", "generation", answer_words, "toy", link=link)
        )
    with pytest.raises(ConfigError, match="stage is one of"):
        MetricSpec("X", "x", "usage", "graph", answer_words, "toy")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="MetricSpec"):
        BUILTIN_METRICS.copy().register("X")  # type: ignore[arg-type]


def test_a_failing_plugin_metric_is_na_not_an_error() -> None:
    def broken(retrieval, generation=None, *, grounder=None, closed_book=None):
        raise ZeroDivisionError("boom")

    registry = MetricRegistry(
        [*BUILTIN_METRICS, MetricSpec("BAD", "bad", "usage", "retrieval", broken, "toy")]
    )
    event = _events()[2]
    out = usage_metrics(event, metrics=registry)
    assert out["BAD"].value is None and "ZeroDivisionError: boom" in out["BAD"].reason
    assert out["ERC"] == usage_metrics(event)["ERC"]


# --------------------------------------------------------------------------- (a) the usage plugin


def _recorded(manager: TriageManager) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for row in manager.store.metrics(scope="query"):  # type: ignore[union-attr]
        out.setdefault(row.scope_id, {})[row.name] = row.value
    return out


def test_the_usage_plugin_records_a_registered_metric() -> None:
    manager = TriageManager(":memory:", synchronous=True, entry_points=False)
    manager.register(ToyMetrics())
    rows = _recorded(_run(manager, _events()))
    assert rows["q0"]["WORDS"] == 4.0 and rows["q1"]["WORDS"] == 1.0
    assert rows["q0"]["ERC"] == 1.0  # the built-ins are still there
    words = [r for r in manager.store.metrics(scope="query", name="WORDS")]  # type: ignore[union-attr]
    assert len(words) == 2  # written once, with the answer (stage "generation"), not at retrieval
    manager.close()


def test_a_bad_registration_leaves_the_builtins_recorded(caplog: pytest.LogCaptureFixture) -> None:
    manager = TriageManager(":memory:", synchronous=True, entry_points=False)
    manager.register(Duplicate())
    _run(manager, _events()[2:])
    assert _recorded(manager)["q0"]["ERC"] == 1.0
    assert "already registered" in caplog.text
    manager.close()


def test_an_installed_plugin_reaches_every_manager(installed: None) -> None:
    manager = _run(TriageManager(":memory:", synchronous=True), _events())
    assert _recorded(manager)["q1"]["WORDS"] == 1.0
    manager.close()


# --------------------------------------------------------------------------- (b) triage score


def test_score_computes_and_shows_a_registered_metric() -> None:
    report = score_events(_events(), metrics=metric_registry(plugins=[ToyMetrics()]))
    assert [q.metrics["WORDS"].value for q in report.queries] == [4.0, 1.0]
    assert report.aggregate["WORDS"].value == pytest.approx(2.5)
    assert report.to_dict()["usage"]["aggregate"]["WORDS"]["value"] == pytest.approx(2.5)
    console = Console(file=io.StringIO(), width=200)
    render_score_report(report, console)
    assert "WORDS" in console.file.getvalue()  # type: ignore[attr-defined]
    assert "WORDS" not in score_events(_events()).aggregate


def test_the_score_command_shows_an_installed_metric(installed: None, tmp_path: Path) -> None:
    trace = tmp_path / "events.jsonl"
    trace.write_text("\n".join(e.to_json() for e in _events()) + "\n")
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["score", str(trace), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "WORDS" in result.output
    assert json.loads(out.read_text())["usage"]["aggregate"]["WORDS"]["value"] == pytest.approx(2.5)


# --------------------------------------------------------------------------- (c) reports and compare


def test_the_store_report_shows_a_recorded_plugin_metric() -> None:
    manager = TriageManager(":memory:", synchronous=True, entry_points=False)
    manager.register(ToyMetrics())
    _run(manager, _events())
    for registry in (None, metric_registry(plugins=[ToyMetrics()])):  # unknown to the reader, or known
        report = build_store_report(manager.store, metrics=registry)  # type: ignore[arg-type]
        group = report.groups[0]
        assert list(group.stats)[-1] == "WORDS" and group.stats["WORDS"].median == pytest.approx(2.5)
        assert "<td>WORDS</td>" in store_html(report)
    manager.close()


def test_compare_tables_show_an_installed_metric(installed: None) -> None:
    row = aggregate_events(_events(), "toy")
    assert row.usage["WORDS"].median == pytest.approx(2.5)
    assert row.distributions["WORDS"] == [4.0, 1.0]
    result = CompareResult([row], "toy corpus", 2, 0, 0)
    page = compare_html(result)
    assert "WORDS per query" in page and ">WORDS<" in page
    console = Console(file=io.StringIO(), width=250)
    render_compare(result, console)
    assert "WORDS" in console.file.getvalue()  # type: ignore[attr-defined]


def test_without_the_plugin_nothing_shows_it() -> None:
    row = aggregate_events(_events(), "toy")
    assert "WORDS" not in row.usage and "WORDS" not in compare_html(CompareResult([row], "toy", 2, 0, 0))


# --------------------------------------------------------------------------- one list: consumers agree


def test_every_consumer_shows_the_registry() -> None:
    registry = BUILTIN_METRICS
    per_query = [s.symbol for s in registry.per_query]
    event, answer = _events()[2:4]
    assert list(usage_metrics(event, answer)) == per_query
    assert registry.symbols(phase="usage", stage="population") == ("RFR", "HHR")
    assert [link.metric for link in CHAIN] == [s.symbol for s in registry.chain] == list(CHAIN_COLUMNS)
    assert dict(CHAIN_THRESHOLDS) == TriageConfig().thresholds == registry.thresholds()
    assert dict(CHAIN_THRESHOLDS) == {"QGR": 0.5, "ERC": 0.67, "RRS": 0.5, "ARF": 0.5, "AGR": 0.5}
    assert registry.columns("implementation") == compare.IMPLEMENTATION_METRICS
    assert registry.columns("validation") == compare.VALIDATION_METRICS
    assert (
        compare.USAGE_METRICS
        == registry.columns("usage")
        == ("QGR", "ERC", "ERP", "RRS", "RPC", "AGR", "AUR", "ARF")
    )
    assert compare.GOLD_METRICS == registry.columns("gold") == ("CC", "Hits@1", "F1")
    assert (*compare.USAGE_METRICS, *compare.GOLD_METRICS) == SUMMARY_METRICS
    assert registry["TCS"].function is extraction.triple_confidence_score
    assert set(validation.validation_metrics(GRAPH)) == set(registry.symbols(phase="validation"))


def test_every_metric_a_phase_computes_is_registered() -> None:
    report = score_events(_events())
    computed = {
        *report.phases["implementation"].metrics,
        *report.phases["validation"].metrics,
        *report.aggregate,
        *report.queries[0].metrics,
    }
    assert computed <= set(BUILTIN_METRICS.symbols())
    row = aggregate_events(_events(), "toy")
    shown = [*row.implementation, *row.validation, *row.usage, *(row.gold or {})]
    assert shown == [
        m for g in ("implementation", "validation", "usage", "gold") for m in BUILTIN_METRICS.columns(g)
    ]
