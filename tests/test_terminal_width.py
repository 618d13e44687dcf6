"""Terminal output reads at 60, 80 and 120 columns: tables wrap at word boundaries, pivot or split
into several tables, never cut a header or an id to ``…`` nor break a word that fits; long commands
print one-line progress when stderr is not a terminal.

Every console here has a fixed width, so the tests pass in any shell (a TTY, CI, ``COLUMNS=200``).
"""

from __future__ import annotations

import dataclasses
import io
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from triage_plugins.apps.compare import embedded_corpus, run_compare
from triage_plugins.apps.score import render_score_report, score_events
from triage_plugins.cli import app
from triage_plugins.diagnosis.chain import SIGNATURES
from triage_plugins.report import build_store_report, render_compare, render_store_report
from triage_plugins.report.compare_html import compare_columns
from triage_plugins.report.data import CHAIN_METRICS
from triage_plugins.report.results import CompareResult, CompareRow
from triage_plugins.report.score_order import worst_first
from triage_plugins.store import Store

WIDTH = 80
WIDTHS = (60, 80, 120)


def _console(width: int = WIDTH) -> Console:
    return Console(file=io.StringIO(), width=width, color_system=None)


def _text(console: Console) -> str:
    return console.file.getvalue()  # type: ignore[attr-defined]


def _assert_readable(text: str, whole_words: set[str], width: int = WIDTH) -> None:
    """No line is wider than the console, nothing ends in ``…``, and every word shows up unbroken."""
    lines = text.splitlines()
    assert lines, "nothing was printed"
    too_wide = [line for line in lines if len(line) > width]
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


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_report_reads_at_fixed_widths(compared, width: int) -> None:
    result, _ = compared
    console = _console(width)
    render_compare(result, console)
    columns = compare_columns()
    shown = {m for m in (*columns["implementation"], *columns["validation"], *columns["usage"])}
    _assert_readable(_text(console), shown | {"extracted-entity", "light-relation", "queries"}, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_chain_signature_header_is_whole(width: int) -> None:
    """The case the issue saw: 'retrieval_gap' cut to 'retrieva…' in the signatures table."""
    signatures = {s: i + 1 for i, s in enumerate((*SIGNATURES, "undetermined"))}
    rows = [
        CompareRow(fw, mode, "ok", queries=sum(signatures.values()), signatures=signatures)
        for fw, mode in (("lightrag", "hybrid"), ("graphrag", "local"), ("reference", "extracted-entity"))
    ]
    console = _console(width)
    render_compare(CompareResult(rows, "embedded", 4, 0, 0), console)
    text = _text(console)
    _assert_readable(text, {*signatures, *CHAIN_METRICS, "extracted-entity", "lightrag", "graphrag"}, width)
    assert "retrieval_gap" in text and "connectivity_gap" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_store_report_reads_at_fixed_widths(compared, width: int) -> None:
    _, path = compared
    with Store.open(path) as store:
        report = build_store_report(store, window=4)
    console = _console(width)
    render_store_report(report, console)
    ids = {word for u in report.scores for m in (*u.promoted, *u.suppressed) for word in m.id.split()}
    labels = {word for g in report.groups for word in g.label.split()}
    graph = {n for metrics in report.graph.values() for n in metrics}
    assert ids and graph
    _assert_readable(_text(console), ids | labels | graph | set(CHAIN_METRICS), width)


@pytest.mark.parametrize("width", WIDTHS)
def test_score_report_reads_at_fixed_widths(compared, width: int) -> None:
    _, path = compared
    with Store.open(path) as store:
        events = list(store.events())
    report = score_events(events)
    console = _console(width)
    render_score_report(report, console, max_queries=5)
    query_ids = {q.query_id for q in worst_first(report.queries)[:5]}  # the worst are listed
    _assert_readable(_text(console), query_ids | set(report.aggregate) | set(report.signatures), width)


# --------------------------------------------------------------------------- a full comparison's tables

_LONG_SETUP = (
    "PGRetriever with only LLMSynonymRetriever, include_text=False (LlamaIndex default: "
    "LLMSynonymRetriever + VectorContextRetriever, include_text=True)"
)
_FRAMEWORK_MODES = (
    ("lightrag", ("naive", "local", "global", "hybrid", "mix")),
    ("graphrag", ("local", "global", "community/global")),  # a mode name with '/' inside
    ("llamaindex", ("synonym", "vector")),
)


def _many_rows(result: CompareResult) -> CompareResult:
    """The fixture's real rows plus copies under the framework × mode labels of a default compare
    (16 rows, two with a long non-default set-up), and one failed and one unavailable row."""
    from triage_plugins.adapter_kit.runner import Setup

    base = result.rows[0]
    rows = [
        dataclasses.replace(
            base,
            framework=fw,
            mode=mode,
            setup=Setup(_LONG_SETUP, default=False) if fw == "llamaindex" else Setup(),
        )
        for fw, modes in _FRAMEWORK_MODES
        for mode in modes
    ]
    rows += [
        CompareRow(
            "brokenrag", "deep", "failed", reason="ValueError: the index_directory_for_tests is missing"
        ),
        CompareRow("otherrag", "local", "unavailable", reason="otherrag-core is not installed"),
    ]
    return dataclasses.replace(result, rows=[*rows, *result.rows])


@pytest.mark.parametrize("width", WIDTHS)
def test_a_default_sized_comparison_reads_at_fixed_widths(compared, width: int) -> None:
    """16+ rows: the frameworks table and every metric table wrap labels at spaces (never inside
    'extracted-entity' or 'community/global'), keep set-ups and reasons readable, and split or
    pivot instead of folding a word that fits."""
    result = _many_rows(compared[0])
    console = _console(width)
    render_compare(result, console)
    text = _text(console)
    columns = compare_columns()
    metrics = {m for m in (*columns["implementation"], *columns["validation"], *columns["usage"])}
    modes = {mode for _, ms in _FRAMEWORK_MODES for mode in ms} | {r.mode for r in compared[0].rows}
    words = set(_LONG_SETUP.split()) | {"(non-default)", "index_directory_for_tests", "Holm–Bonferroni"}
    _assert_readable(text, metrics | modes | words | {"llamaindex", "queries", "status"}, width)
    assert "set-up of llamaindex / synonym: PGRetriever" in " ".join(text.split())
    assert "brokenrag / deep failed: ValueError" in " ".join(text.split())


def test_a_table_that_fits_is_never_split_and_one_that_does_not_is_split_whole(compared) -> None:
    """At 120 columns the KG table of 16 rows is one table; at 60 it is split into parts that each
    repeat every row label, and together hold every metric column once."""
    result = _many_rows(compared[0])
    columns = compare_columns()
    kg = (*columns["implementation"], *columns["validation"])
    for width in (60, 120):
        console = _console(width)
        render_compare(result, console)
        text = " ".join(_text(console).split())
        parts = re.findall(
            r"KG Implementation \(§4\.1\) and Validation \(§4\.2\)(?: \((\d+) of (\d+)\))?", text
        )
        if width == 120:
            assert parts == [("", "")], parts
        else:
            assert len(parts) > 1 and all(p[1] == str(len(parts)) for p in parts), parts
        out = _text(console)
        tokens = re.split(r"[\s│┃]+", out[out.index("KG Implementation") : out.index("KG Usage")])
        assert all(tokens.count(m) >= 1 for m in kg)


def test_demo_reads_at_fixed_widths(tmp_path) -> None:
    from triage_plugins.apps.demo import run_demo
    from triage_plugins.report.demo_view import render_demo

    result = run_demo(seed=0, store=tmp_path / "demo.sqlite", feedback_rounds=1)
    for width in WIDTHS:
        console = _console(width)
        render_demo(result, console)
        text = _text(console)
        retrievers = {q.retriever for q in result.usage.queries}
        _assert_readable(text, retrievers | set(result.implementation) | set(result.validation), width)
        assert result.traced is None or " ".join(result.traced.query.split()) in " ".join(text.split())


# --------------------------------------------------------------------------- progress without a TTY


def test_demo_prints_one_line_progress_when_stderr_is_not_a_terminal(tmp_path) -> None:
    store = tmp_path / "demo.sqlite"
    res = CliRunner().invoke(app, ["demo", "--store", str(store), "--feedback-rounds", "1", "--seeds", "1"])
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    # each stage ends with one line "label: total/total"; the run has 60 questions x 6 retrievers
    assert "answering (static): 360/360" in lines, lines
    assert any(re.fullmatch(r"extracting chunks: (\d+)/\1", line) for line in lines), lines
    assert any(re.fullmatch(r"feedback rounds: (\d+)/\1", line) for line in lines), lines
    assert not any("━" in line for line in lines)  # no progress bar drawn into a log
    # ... and no stage floods the log: at most one line per 5 s of a stage, plus its end
    assert len([line for line in lines if line.startswith("answering (static)")]) <= 3
    quiet = CliRunner().invoke(
        app, ["demo", "--store", str(store), "--feedback-rounds", "0", "-q", "--seeds", "1"]
    )
    # over seeds (the default: five worlds) each stage's line names its seed
    seeds = CliRunner().invoke(app, ["demo", "--store", str(store), "--feedback-rounds", "1", "--seeds", "2"])
    assert seeds.exit_code == 0 and "seed 1: answering (static): 360/360" in seeds.stderr.splitlines()
    assert quiet.exit_code == 0 and "answering" not in quiet.stderr
