"""`triage explain` and docs/metrics.md, both read from the metric registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage_plugins.apps.explain import find_metric, glossary_markdown, metric_entry
from triage_plugins.cli import app
from triage_plugins.contract.errors import TriageError
from triage_plugins.diagnosis.chain import REMEDIATION
from triage_plugins.metrics.registry import BUILTIN_METRICS

runner = CliRunner()
DOC = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"


def test_committed_glossary_is_the_generated_one():
    assert DOC.read_text(encoding="utf-8") == glossary_markdown(), (
        "docs/metrics.md is stale: python -m triage_plugins.apps.explain > docs/metrics.md"
    )


def test_every_metric_has_every_field():
    for spec in BUILTIN_METRICS:
        entry = metric_entry(spec)
        for name in ("definition", "section", "range", "healthy", "lever"):
            assert getattr(entry, name) not in ("", "-"), (spec.symbol, name)
        assert f"### {spec.symbol}: {spec.name}" in DOC.read_text(encoding="utf-8")


def test_chain_links_reuse_the_remediation_levers_and_thresholds():
    for spec in BUILTIN_METRICS.chain:
        entry = metric_entry(spec)
        for lever in REMEDIATION[spec.link.signature].levers:
            assert lever in entry.lever
        assert f"θ = {spec.link.threshold:g}" in entry.healthy


def test_explain_prints_one_metric():
    result = runner.invoke(app, ["explain", "erc"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "ERC: Entity Retrieval Coverage" in result.output
    assert "§4.3.2, eq. 26" in result.output
    assert REMEDIATION["retrieval_gap"].levers[0] in result.output


def test_explain_list_names_every_metric():
    result = runner.invoke(app, ["explain", "--list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for spec in BUILTIN_METRICS:
        assert spec.symbol in result.output


def test_unknown_metric_is_one_line_with_close_matches():
    result = runner.invoke(app, ["explain", "ERX"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: unknown metric 'ERX'")
    assert "ERC" in lines[0]
    with pytest.raises(TriageError, match="unknown metric"):
        find_metric("zzzzzz")
