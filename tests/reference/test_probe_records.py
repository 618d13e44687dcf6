"""``triage probe`` reads each observation from the scorer's record of its query (issue 32).

The probe computes no metric itself: its predictors and outcomes are those of the scorer on its own
manager, so they agree with ``triage score`` replaying the same store, with or without a store, and
with the default scorer blocked (the probe then registers its own).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from triage_plugins.apps.probe import run_probe
from triage_plugins.apps.score import score_events
from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.report.results import Observation
from triage_plugins.store import open_store

FIELDS = {"ERC": "ERC", "RRS": "RRS", "QGR": "QGR", "RPC": "RPC"}
GOLD_FIELDS = {"CC": "CC", "hits1": "Hits@1"}


@pytest.fixture(scope="module")
def graph() -> GraphView:
    triples = []
    for c in range(2):  # two components, so disconnected questions exist
        for i in range(30):
            triples.append(Triple.of(f"e{c}_{i}", f"r{i % 3}", f"e{c}_{i + 1}"))
            triples.append(Triple.of(f"e{c}_{i}", "side", f"x{c}_{i}"))
    return GraphView(triples)


def _probe(graph: GraphView, store: Path | None = None) -> list[Observation]:
    return run_probe(graph, per_category=2, seed=3, resamples=100, store=store).observations


def test_observations_agree_with_a_replay_of_the_probe_store(graph: GraphView, tmp_path: Path) -> None:
    path = tmp_path / "probe.db"
    observations = _probe(graph, path)
    store = open_store(path)
    try:
        replayed = {q.query_id: q.metrics for q in score_events(store.events()).queries}
    finally:
        store.close()
    assert len(replayed) == len(observations) > 0
    gold_checked = 0
    for o in observations:
        metrics = replayed[f"{o.question_id}:{o.retriever}"]
        fields = {**FIELDS, **(GOLD_FIELDS if o.category != "off-topic" else {})}
        assert {f: getattr(o, f) for f in fields} == {f: metrics[m].value for f, m in fields.items()}, o
        gold_checked += o.CC is not None
    assert gold_checked > 0


def test_observations_are_the_same_with_or_without_a_store(graph: GraphView, tmp_path: Path) -> None:
    assert _probe(graph, tmp_path / "probe.db") == _probe(graph)


def test_with_the_default_scorer_blocked_the_probe_scores_with_its_own(
    graph: GraphView, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _probe(graph)
    monkeypatch.setenv("TRIAGE_DISABLE_PLUGINS", "triage.usage")
    assert _probe(graph, tmp_path / "probe.db") == expected


def test_a_blocked_record_collector_is_reported(graph: GraphView, monkeypatch: pytest.MonkeyPatch) -> None:
    from triage_plugins.contract.errors import TriageError

    monkeypatch.setenv("TRIAGE_DISABLE_PLUGINS", "triage.probe.records")
    with pytest.raises(TriageError, match="no scorer record"):
        _probe(graph)
