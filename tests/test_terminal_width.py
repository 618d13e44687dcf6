"""Terminal output reads at 80 columns: tables wrap or pivot, never cut a header or an id to ``…``;
long commands print one-line progress when stderr is not a terminal.

Every console here has a fixed width, so the tests pass in any shell (a TTY, CI, ``COLUMNS=200``).
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from triage_plugins.apps.compare import CompareResult, CompareRow, embedded_corpus, run_compare
from triage_plugins.apps.score import render_score_report, score_events
from triage_plugins.cli import app
from triage_plugins.diagnosis.chain import SIGNATURES
from triage_plugins.report import build_store_report, render_compare, render_store_report
from triage_plugins.report.compare_html import compare_columns
from triage_plugins.report.data import CHAIN_METRICS
from triage_plugins.store import Store

WIDTH = 80


def _console() -> Console:
    return Console(file=io.StringIO(), width=WIDTH, color_system=None)


def _text(console: Console) -> str:
    return console.file.getvalue()  # type: ignore[attr-defined]


def _assert_readable(text: str, whole_words: set[str]) -> None:
    """No line is wider than the console, nothing ends in ``…``, and every word shows up unbroken."""
    lines = text.splitlines()
    assert lines, "nothing was printed"
    too_wide = [line for line in lines if len(line) > WIDTH]
    assert not too_wide, too_wide[:3]
    cut = re.findall(r"\S+…", text)  # rich's truncation: 'retrieva…' (a leading '… n more' is prose)
    assert not cut, cut[:5]
    tokens = set(re.split(r"[\s│┃]+", text))
    missing = sorted(w for w in whole_words if w not in tokens)
    assert not missing, f"cut or folded: {missing}"


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """A real comparison of three reference retrievers (4 questions, 1 round) and its store."""
    path = tmp_path_factory.mktemp("width") / "cmp.sqlite"
    result = run_compare(
        embedded_corpus(0, n_questions=4),
        frameworks=["reference"],
        modes=["krag", "extracted-entity", "light-relation"],
        feedback_rounds=1,
        store=path,
    )
    return result, path


def test_compare_report_reads_at_80_columns(compared) -> None:
    result, _ = compared
    console = _console()
    render_compare(result, console)
    columns = compare_columns()
    shown = {m for m in (*columns["implementation"], *columns["validation"], *columns["usage"])}
    _assert_readable(_text(console), shown | {"extracted-entity", "light-relation", "queries"})


def test_every_chain_signature_header_is_whole_at_80_columns() -> None:
    """The case the issue saw: 'retrieval_gap' cut to 'retrieva…' in the signatures table."""
    signatures = {s: i + 1 for i, s in enumerate((*SIGNATURES, "undetermined"))}
    rows = [
        CompareRow(fw, mode, "ok", queries=sum(signatures.values()), signatures=signatures)
        for fw, mode in (("lightrag", "hybrid"), ("graphrag", "local"), ("reference", "extracted-entity"))
    ]
    console = _console()
    render_compare(CompareResult(rows, "embedded", 4, 0, 0), console)
    text = _text(console)
    _assert_readable(text, {*signatures, *CHAIN_METRICS, "extracted-entity", "lightrag", "graphrag"})
    assert "retrieval_gap" in text and "connectivity_gap" in text


def test_store_report_reads_at_80_columns(compared) -> None:
    _, path = compared
    with Store.open(path) as store:
        report = build_store_report(store, window=4)
    console = _console()
    render_store_report(report, console)
    ids = {word for u in report.scores for m in (*u.promoted, *u.suppressed) for word in m.id.split()}
    labels = {word for g in report.groups for word in g.label.split()}
    graph = {n for metrics in report.graph.values() for n in metrics}
    assert ids and graph
    _assert_readable(_text(console), ids | labels | graph | set(CHAIN_METRICS))


def test_score_report_reads_at_80_columns(compared) -> None:
    _, path = compared
    with Store.open(path) as store:
        events = list(store.events())
    report = score_events(events)
    console = _console()
    render_score_report(report, console, max_queries=5)
    query_ids = {q.query_id for q in report.queries[:5]}
    _assert_readable(_text(console), query_ids | set(report.aggregate) | set(report.signatures))


# --------------------------------------------------------------------------- progress without a TTY


def test_demo_prints_one_line_progress_when_stderr_is_not_a_terminal(tmp_path) -> None:
    store = tmp_path / "demo.sqlite"
    res = CliRunner().invoke(app, ["demo", "--store", str(store), "--feedback-rounds", "1"])
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    # each stage ends with one line "label: total/total"; the run has 60 questions x 6 retrievers
    assert "answering (static): 360/360" in lines, lines
    assert any(re.fullmatch(r"extracting chunks: (\d+)/\1", line) for line in lines), lines
    assert any(re.fullmatch(r"feedback rounds: (\d+)/\1", line) for line in lines), lines
    assert not any("━" in line for line in lines)  # no progress bar drawn into a log
    # ... and no stage floods the log: at most one line per 5 s of a stage, plus its end
    assert len([line for line in lines if line.startswith("answering (static)")]) <= 3
    quiet = CliRunner().invoke(app, ["demo", "--store", str(store), "--feedback-rounds", "0", "-q"])
    assert quiet.exit_code == 0 and "answering" not in quiet.stderr
