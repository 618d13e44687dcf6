"""Hostile command-line input gets a one-line error, never a traceback (issue #34, item 7).

Damaged metric rows in a store (``triage report`` and ``triage calibrate``), ``--since nan``, and
options that would multiply a run's work without bound (``--seeds``, ``--feedback-rounds``) or make
no sense (``--max-questions -1``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage_plugins.cli import MAX_ROUNDS, MAX_SEEDS, app
from triage_plugins.contract.events import GenerationEvent, Gold, GraphEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.runtime.manager import TriageManager

T1 = Triple("t1", "Inception", "directed_by", "Christopher Nolan")
T2 = Triple("t2", "Interstellar", "directed_by", "Christopher Nolan")
GOLD = Gold(answers=("Christopher Nolan",), entities=("Inception",))
QUERY_ROW = "scope = 'query' AND scope_id = 'q0' AND details LIKE '[[\"QGR%'"
GRAPH_ROW = "scope = 'graph' AND name = 'DNR'"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "s.sqlite"
    with TriageManager(str(path), synchronous=True, entry_points=False) as manager:
        manager.emit_graph(GraphEvent("toy", GraphView([T1, T2])))
        for i, answer in enumerate(("Christopher Nolan directed Inception.", "Nolan.")):
            mentions = {"Inception": "Inception"}
            manager.emit_retrieval(
                RetrievalEvent(
                    "toy", f"q{i}", "Who directed Inception?", tuple(mentions), mentions, Subgraph((T1,)),
                    expanded_nodes=3, retriever="local", gold=GOLD,
                )
            )  # fmt: skip
            manager.emit_generation(GenerationEvent("toy", f"q{i}", answer))
    return path


def _damaged(recorded: Path, tmp_path: Path, sql: str) -> Path:
    path = tmp_path / "damaged.sqlite"
    path.write_bytes(recorded.read_bytes())
    with sqlite3.connect(path) as db:
        assert db.execute(sql).rowcount == 1
    return path


def _one_line_error(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("error: ") and "Traceback" not in result.output, result.output
    return lines[-1]


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        (f"UPDATE metrics SET details = '{{bad' WHERE {GRAPH_ROW}", "details are not JSON"),
        (f"UPDATE metrics SET details = 7 WHERE {GRAPH_ROW}", "details"),
        (f"UPDATE metrics SET value = 'abc' WHERE {GRAPH_ROW}", "value must be a number"),
        (f"UPDATE metrics SET n = 'x' WHERE {GRAPH_ROW}", "n must be an int"),
        (f"UPDATE metrics SET details = '{{bad' WHERE {QUERY_ROW}", "damaged"),
        (f"UPDATE metrics SET details = '[[\"QGR\"]]' WHERE {QUERY_ROW}", "damaged"),
        (f'UPDATE metrics SET details = \'[["QGR", "x", null, 1, {{}}]]\' WHERE {QUERY_ROW}', "value"),
        (f"UPDATE metrics SET details = '[[\"QGR\", 1e999, null, 1, {{}}]]' WHERE {QUERY_ROW}", "finite"),
    ],
)
def test_a_damaged_metric_row_is_a_one_line_error_in_report(
    recorded: Path, tmp_path: Path, sql: str, said: str
):
    assert said in _one_line_error(["report", str(_damaged(recorded, tmp_path, sql))])


@pytest.mark.parametrize(
    "sql",
    [
        f"UPDATE metrics SET details = '{{bad' WHERE {QUERY_ROW}",
        f"UPDATE metrics SET details = '[[\"QGR\", [], null, 1, {{}}]]' WHERE {QUERY_ROW}",
        f"UPDATE metrics SET details = '[[[], 0.5, null, 1, {{}}]]' WHERE {QUERY_ROW}",
    ],
)
def test_a_damaged_metric_row_is_a_one_line_error_in_calibrate(recorded: Path, tmp_path: Path, sql: str):
    _one_line_error(["calibrate", str(_damaged(recorded, tmp_path, sql))])


@pytest.mark.parametrize("since", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_since_must_be_finite(recorded: Path, since: str):
    assert "finite" in _one_line_error(["report", str(recorded), "--since", since])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["compare", "--max-questions", "-1"], "--max-questions"),
        (["compare", "--max-questions", "0"], "--max-questions"),
        (["compare", "--seeds", "100000000"], f"--seeds must be between 1 and {MAX_SEEDS}"),
        (["compare", "--feedback-rounds", "-1"], f"--feedback-rounds must be between 0 and {MAX_ROUNDS}"),
        (["compare", "--feedback-rounds", str(MAX_ROUNDS + 1)], "--feedback-rounds"),
        (
            ["demo", "--feedback-rounds", "1000000000"],
            f"--feedback-rounds must be between 0 and {MAX_ROUNDS}",
        ),
        (["demo", "--seeds", str(MAX_SEEDS + 1)], f"--seeds must be between 1 and {MAX_SEEDS}"),
    ],
)
def test_unbounded_work_is_refused_before_any_is_done(
    tmp_path: Path, monkeypatch, args: list[str], said: str
):
    monkeypatch.chdir(tmp_path)
    assert said in _one_line_error(args)
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


@pytest.mark.parametrize(("command", "bound"), [("demo", "at most 100"), ("compare", "at most 100")])
def test_help_states_the_bounds(command: str, bound: str):
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.output.count(bound) >= 2  # --seeds and --feedback-rounds
