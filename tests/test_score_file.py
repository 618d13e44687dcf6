"""``triage score`` on files: two streaming passes equal to the in-memory scorer, a streamed --json,
and no traceback or markup from whatever the file holds (fuzzed)."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from triage_plugins.apps.demo import run_demo
from triage_plugins.apps.score import read_events, render_score_report, score_events
from triage_plugins.apps.score_file import score_file, write_json_report
from triage_plugins.cli import app
from triage_plugins.contract.errors import EventError, TriageError
from triage_plugins.contract.events import GenerationEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.store import open_store

runner = CliRunner()


@pytest.fixture(scope="module")
def demo_lines(tmp_path_factory) -> list[str]:
    """Every event the demo recorded, one JSON line each, in recording order."""
    store = tmp_path_factory.mktemp("demo") / "demo.sqlite"
    run_demo(seed=0, store=store, feedback_rounds=0)
    with open_store(store, readonly=True) as s:
        return [e.to_json() for e in s.events()]


def _shuffled_far_apart(lines: list[str], seed: int = 0) -> list[str]:
    """Generations moved far from their retrievals (reversed, at the end), one retrieval repeated."""
    kinds = [json.loads(line)["event"] for line in lines]
    gens = [line for line, k in zip(lines, kinds, strict=True) if k == "generation"]
    rest = [line for line, k in zip(lines, kinds, strict=True) if k != "generation"]
    retrievals = [line for line in rest if json.loads(line)["event"] == "retrieval"]
    random.Random(seed).shuffle(rest)
    return [*rest, retrievals[0], *reversed(gens)]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _by_query(queries) -> dict:
    return {(q.framework, q.query_id): q.to_dict() for q in queries}


@pytest.mark.parametrize("order", ["recorded", "far apart"])
def test_two_streaming_passes_equal_the_in_memory_scorer(demo_lines, tmp_path, order) -> None:
    lines = demo_lines if order == "recorded" else _shuffled_far_apart(demo_lines)
    path = _write(tmp_path / "trace.jsonl", lines)
    streamed = score_file(path)
    held = score_events(read_events(path))
    assert streamed.total_queries == held.total_queries == len(held.queries) > 50
    assert _by_query(streamed.queries) == _by_query(held.queries)
    assert streamed.aggregate == held.aggregate
    assert streamed.rhd == held.rhd and streamed.signatures == held.signatures
    assert streamed.counts == held.counts
    assert {k: v.to_dict() for k, v in streamed.phases.items()} == {
        k: v.to_dict() for k, v in held.phases.items()
    }


def test_streamed_json_is_the_report_and_keep_bounds_what_is_held(demo_lines, tmp_path) -> None:
    path = _write(tmp_path / "trace.jsonl", _shuffled_far_apart(demo_lines, seed=3))
    out = tmp_path / "report.json"
    report = write_json_report(out, path, keep=3)
    assert len(report.queries) == 3 and report.total_queries > 3
    written = json.loads(out.read_text(encoding="utf-8"))
    expected = score_events(read_events(path)).to_dict()
    key = lambda q: (q["framework"], q["query_id"])  # noqa: E731
    assert sorted(written.pop("queries"), key=key) == sorted(expected.pop("queries"), key=key)
    written_notes, expected_notes = written.pop("notes"), expected.pop("notes")
    assert written == expected
    assert any("repeat a query id" in n for n in written_notes)
    assert any("retrieved twice" in n for n in expected_notes)


def test_a_bad_line_leaves_an_existing_json_report_as_it_was(demo_lines, tmp_path) -> None:
    path = _write(tmp_path / "trace.jsonl", [*demo_lines, '{"event": "retrieval", "query": 3}'])
    out = tmp_path / "report.json"
    out.write_text("the previous report", encoding="utf-8")
    with pytest.raises(EventError, match=rf"line {len(demo_lines) + 1}"):
        write_json_report(out, path)
    assert out.read_text(encoding="utf-8") == "the previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "trace.jsonl"]


def test_unreadable_files_are_triage_errors(tmp_path) -> None:
    with pytest.raises(TriageError, match="folder"):
        score_file(tmp_path)
    latin = tmp_path / "latin1.jsonl"
    latin.write_bytes(_VALID[0].encode() + b"\n\xff\xfe not utf-8\n")
    with pytest.raises(TriageError, match="line 2: not UTF-8"):
        score_file(latin)


HOSTILE = [
    "[link=https://evil.example]click me[/link]",
    "[/]",
    "[bold red]shout[/]",
    "\x1b[2J\x1b[Hcleared",
    "right\u202eto-left",
    "bell\x07 and nul\x00",
]


def _hostile_trace(path: Path) -> Path:
    lines = []
    for i, s in enumerate(HOSTILE):
        t = Triple(f"t{i}", f"A {s}", "rel", "B")
        lines.append(
            RetrievalEvent(f"fw{s}", f"q{i}{s}", f"who {s}?", subgraph=Subgraph((t,)), retriever=s).to_json()
        )
        lines.append(GenerationEvent(f"fw{s}", f"q{i}{s}", f"answer {s}").to_json())
    return _write(path, lines)


def test_event_strings_are_printed_as_text_with_control_characters_escaped(tmp_path) -> None:
    path = _hostile_trace(tmp_path / "h.jsonl")
    result = runner.invoke(app, ["score", str(path)])
    assert result.exit_code == 0, result.output  # no MarkupError on "[/]"
    buffer = io.StringIO()
    render_score_report(score_file(path), Console(file=buffer, width=500, color_system=None))
    out = buffer.getvalue()
    assert "[link=https://evil.example]" in out  # shown, not made a hyperlink
    assert "[bold red]" in out and "[/]" in out
    assert "\x1b" not in out and "\x07" not in out and "\x00" not in out and "\u202e" not in out
    assert "\\x1b[2J" in out and "\\u202e" in out


_VALID = (
    RetrievalEvent("f", "q1", "who?", subgraph=Subgraph((Triple("t", "A", "r", "B"),))).to_json(),
    GenerationEvent("f", "q1", "A").to_json(),
)
_line = st.one_of(
    st.sampled_from(_VALID),
    st.sampled_from(_VALID).map(lambda s: s[: len(s) // 2]),  # cut short
    st.sampled_from(_VALID).map(lambda s: s.replace('"q1"', "[]")),  # a list where a string goes
    st.sampled_from(["[]", "{}", "null", "1e999", "9" * 5000, "[" * 3000, '{"event": []}', '"text"']),
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=8,
    ).map(lambda v: json.dumps(v, allow_nan=True)),
    st.text(max_size=40),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_line, min_size=1, max_size=6), raw=st.binary(max_size=12))
def test_score_never_shows_a_traceback_whatever_the_file_holds(tmp_path, lines, raw) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + b"\n" + raw)
    result = runner.invoke(app, ["score", str(path), "--json", str(tmp_path / "out.json")])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    if result.exit_code != 0:
        assert result.output.startswith("error:"), result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
