"""`triage probe`: Table 5's shape on PathQuestion (when ../shared/data is present) and the CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from triage_plugins.apps.probe import run_probe, strata
from triage_plugins.cli import app
from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.report.results import Observation


def _by_name(rows):
    return {s.name: s for s in rows}


@pytest.mark.parametrize("kb", ["3H-kb.txt", "2H-kb.txt"])
def test_probe_reproduces_table5_shape_on_pathquestion(shared_data, kb):
    from triage_plugins.datasets import load_kb

    graph = GraphView(load_kb(shared_data / "pathquestion" / kb))
    result = run_probe(graph, kb_name=kb, seed=0, resamples=200)
    assert len(result.questions) == 108
    assert sum(1 for o in result.observations if o.category != "off-topic") == 480
    s = _by_name(result.pooled)
    full = s["ERC = 1"].cc
    for lower in ("ERC < 0.5", "0.5 <= ERC < 1"):
        if s[lower].n:
            assert full - s[lower].cc >= 40, (lower, s[lower].cc, full)
    assert s["RRS > 0"].cc - s["RRS = 0"].cc >= 30
    assert 0.5 <= result.theta_erc <= 0.8
    # each retriever's strata are reported too
    assert set(result.per_retriever) == {"gold-entity", "extracted-entity", "light-entity", "light-relation", "path"}


def test_strata_are_computed_from_the_observations():
    def obs(q, erc, rrs, cc, hits):
        return Observation(q, "pair-1", "r", erc, rrs, 1.0, 3.0, cc, hits, "")

    rows = [obs("a", 1.0, 1.0, 1.0, 1.0), obs("b", 1.0, 0.0, 0.0, 1.0), obs("c", 0.5, 0.0, 0.0, 0.0), obs("d", 0.2, None, 1.0, 0.0)]
    s = _by_name(strata(rows, resamples=100))
    assert (s["ERC = 1"].n, s["ERC = 1"].cc, s["ERC = 1"].hits1) == (2, 50.0, 100.0)
    assert (s["0.5 <= ERC < 1"].n, s["0.5 <= ERC < 1"].cc) == (1, 0.0)
    assert (s["ERC < 0.5"].n, s["ERC < 0.5"].cc) == (1, 100.0)
    assert (s["RRS = 0"].n, s["RRS = 0"].cc) == (2, 0.0)
    assert (s["RRS > 0"].n, s["RRS > 0"].cc) == (1, 100.0)


def test_probe_command_on_a_small_kb(tmp_path):
    lines = []
    for c in range(2):  # two components, so disc questions exist
        for i in range(40):
            lines.append(f"e{c}_{i}\tr{i % 3}\te{c}_{i + 1}")
            lines.append(f"e{c}_{i}\tside\tx{c}_{i}")
    kb = tmp_path / "kb.txt"
    kb.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "probe.json"
    result = CliRunner().invoke(
        app, ["probe", "--kb", str(kb), "--per-category", "3", "--resamples", "100", "--quiet", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "Table 5" in result.output and "θ_ERC" in result.output
    data = json.loads(out.read_text())
    assert data["categories"]["disc"] == 3
    assert len(data["observations"]) == 27 * 5


def test_probe_rejects_unknown_reader(tmp_path):
    kb = tmp_path / "kb.txt"
    kb.write_text("a\tr\tb\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["probe", "--kb", str(kb), "--reader", "gpt"])
    assert result.exit_code == 1
    assert "unknown reader" in result.output


def test_semi_questions_are_never_covered():
    graph = GraphView([Triple.of(f"n{i}", "r", f"n{i + 1}") for i in range(20)])
    result = run_probe(graph, per_category=2, seed=1, resamples=100, retrievers=("gold-entity",))
    semi = [o for o in result.observations if o.category == "semi"]
    assert semi and all(o.CC == 0.0 for o in semi)
    assert all(o.CC is None for o in result.observations if o.category == "off-topic")
