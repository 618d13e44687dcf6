"""The demo's and ``triage score``'s first screens: per-retriever chain counts beside accuracy, silent
failures counted on the terminal, and the worst queries listed first."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from triage_plugins.cli import app
from triage_plugins.report.score_order import worst_first


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from triage_plugins.apps.demo import run_demo

    path = tmp_path_factory.mktemp("first") / "demo.sqlite"
    return run_demo(seed=0, store=path, feedback_rounds=0), path


def _silent(q) -> bool:
    hits = q.metrics.get("Hits@1")
    return q.signature == "supported" and hits is not None and hits.value == 0


def test_the_demo_usage_table_counts_supported_and_silent_per_retriever(demo) -> None:
    from triage_plugins.report.demo_view import render_demo

    result, _ = demo
    buf = io.StringIO()
    render_demo(result, Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    silent = sum(_silent(q) for q in result.usage.queries)
    flat = " ".join(text.split())
    assert silent > 0 and f"{silent} silent failures over all retrievers" in flat
    assert "Chain signatures over all retrievers" in flat  # the signature table's sum says what it sums
    for name in result.accuracy:
        qs = [q for q in result.usage.queries if q.retriever == name]
        share = sum(q.signature == "supported" for q in qs) / len(qs)
        row = next(line for line in text.splitlines() if re.match(rf"│ {re.escape(name)} +│ +\d+\.\d%", line))
        assert f"{share:.0%}" in row and f"│ {sum(_silent(q) for q in qs):>6} │" in row, row


def test_score_lists_the_worst_queries_first(demo, tmp_path) -> None:
    _, store = demo
    events = tmp_path / "events.jsonl"
    done = CliRunner().invoke(app, ["export", str(store), "--jsonl", str(events)])
    assert done.exit_code == 0, done.output
    out = CliRunner().invoke(app, ["score", str(events), "--max-queries", "8"], env={"COLUMNS": "160"})
    assert out.exit_code == 0, out.output
    per = out.output.split("Per query (worst first")[1]
    listed = re.findall(r"│ (q\d+) +│", per)
    assert len(listed) == 8 and "more queries" in per
    # the eight shown are failures (the demo has six broken-link queries), then silent failures
    sigs = re.findall(r"│ (out_of_scope|retrieval_gap|connectivity_gap|supported|\w+_gap|\w+) +│\n", per)
    assert sigs[:6] and all(s != "supported" for s in sigs[:6]), sigs
    assert "supported" not in per.split(listed[5])[0]


def test_worst_first_orders_by_chain_then_silent_then_supported() -> None:
    from triage_plugins.diagnosis.chain import diagnose
    from triage_plugins.metrics.result import MetricResult
    from triage_plugins.report.results import QueryScore

    def q(qid: str, values: dict[str, float], hits: float) -> QueryScore:
        metrics = {k: MetricResult(k, v) for k, v in values.items()} | {
            "Hits@1": MetricResult("Hits@1", hits)
        }
        return QueryScore(qid, "fw", "r", qid, metrics, diagnose(values))

    ok = {"QGR": 1.0, "ERC": 1.0, "RRS": 1.0, "ARF": 1.0, "AGR": 1.0}
    queries = [
        q("right", ok, 1.0),
        q("silent", ok, 0.0),
        q("rrs-low", {**ok, "RRS": 0.1}, 0.0),
        q("erc-mid", {**ok, "ERC": 0.4}, 0.0),
        q("erc-low", {**ok, "ERC": 0.1}, 1.0),
        q("qgr", {**ok, "QGR": 0.0}, 0.0),
    ]
    assert [x.query_id for x in worst_first(queries)] == [
        "qgr",
        "erc-low",
        "erc-mid",
        "rrs-low",
        "silent",
        "right",
    ]
    assert [x.query_id for x in queries][0] == "right"  # the input is not reordered
