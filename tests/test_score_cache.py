"""``triage score``'s pass-1 events kept for pass 2 (#32 point 5): every line parsed once when the
cache holds it, parsed again when not, and the report the same whatever the cache holds."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from triage_plugins.apps import score_file as score_file_module
from triage_plugins.apps.score_file import score_file
from triage_plugins.contract.events import GenerationEvent, GraphEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView


def _trace(path: Path, queries: int = 40) -> Path:
    """A graph, retrievals and answers, one retrieval repeated and one answer far from its query."""
    rng = random.Random(0)
    triples = [Triple.of(f"E{i}", "r", f"E{(i * 7) % 30}") for i in range(30)]
    lines = [GraphEvent("t", GraphView(triples)).to_json()]
    for q in range(queries):
        picked = tuple(rng.sample(triples, 4))
        head = picked[0].subject
        retrieval = RetrievalEvent(
            "t", f"q{q}", f"Where is {head}?", mentions=(head,), subgraph=Subgraph(picked)
        )
        lines += [retrieval.to_json(), GenerationEvent("t", f"q{q}", picked[0].object).to_json()]
    lines.insert(3, RetrievalEvent("t", "q1", "Where is E1?", mentions=("E1",)).to_json())  # superseded later
    lines.append(lines.pop(2))  # q0's answer last
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _report(path: Path) -> dict:
    out = io.StringIO()
    score_file(path, json_to=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("budget", [0, 2_000, 1 << 30])
def test_the_report_is_the_same_whatever_the_cache_holds(tmp_path, monkeypatch, budget: int) -> None:
    path = _trace(tmp_path / "trace.jsonl")
    monkeypatch.setattr(score_file_module, "CACHE_BYTES", 0)
    parsed_twice = _report(path)
    monkeypatch.setattr(score_file_module, "CACHE_BYTES", budget)
    assert _report(path) == parsed_twice
    assert len(parsed_twice["queries"]) == 40


def test_a_cached_trace_is_read_once(tmp_path, monkeypatch) -> None:
    path = _trace(tmp_path / "trace.jsonl")
    reads: list[str] = []
    real = score_file_module.read_lines

    def counting(*args, **kwargs):
        reads.append(str(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(score_file_module, "read_lines", counting)
    score_file(path)
    assert reads == [str(path)]


def test_the_collector_thresholds_are_restored(tmp_path) -> None:
    import gc

    before = gc.get_threshold()
    score_file(_trace(tmp_path / "trace.jsonl", queries=3))
    assert gc.get_threshold() == before
