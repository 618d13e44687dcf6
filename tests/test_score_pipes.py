"""``triage score`` reads pipes: ``/dev/stdin``, ``<(cmd)`` and named pipes (issue #34, item 7).

A pipe cannot be read twice, and the two-pass scorer needs two reads: the pipe is copied once into
a temporary file (removed afterwards) and messages still name the pipe. A named pipe no process
opens for writing is a one-line error after ``PIPE_OPEN_SECONDS``, not a wait forever.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage_plugins.apps import score_file as score_file_module
from triage_plugins.apps.score_file import readable, score_file
from triage_plugins.cli import app
from triage_plugins.contract.errors import EventError, TriageError
from triage_plugins.contract.events import GenerationEvent, Gold, GraphEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView

T1 = Triple("t1", "Inception", "directed_by", "Christopher Nolan")
GOLD = Gold(answers=("Christopher Nolan",), entities=("Inception",))
pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX pipes")


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    mentions = {"Inception": "Inception"}
    events = [GraphEvent("toy", GraphView([T1]))]
    for i, answer in enumerate(("Christopher Nolan directed Inception.", "Nolan.")):
        events.append(
            RetrievalEvent(
                "toy", f"q{i}", "Who directed Inception?", tuple(mentions), mentions, Subgraph((T1,)),
                retriever="local", gold=GOLD,
            )
        )  # fmt: skip
        events.append(GenerationEvent("toy", f"q{i}", answer))
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(e.to_json() + "\n" for e in events), encoding="utf-8")
    return path


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of its own, to see that the copy of a pipe is removed."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _queries(report) -> list[dict]:
    return [q.to_dict() for q in report.queries]


def _triage(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    code = "from triage_plugins.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, **kwargs
    )


def test_dev_stdin_scores_as_the_file_does(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    with open(trace, "rb") as stdin:  # a pipe, as in `cat trace | triage score /dev/stdin`
        cat = subprocess.Popen(["cat"], stdin=stdin, stdout=subprocess.PIPE)
        done = _triage(["score", "/dev/stdin", "--json", str(out)], stdin=cat.stdout)
        cat.wait(10)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["queries"] == _queries(score_file(trace))


@pytest.mark.skipif(shutil.which("bash") is None, reason="process substitution needs bash")
def test_process_substitution_scores_as_the_file_does(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code = "from triage_plugins.cli import main; main()"
    script = f'"{sys.executable}" -c "{code}" score <(cat "{trace}") --json "{out}"'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["queries"] == _queries(score_file(trace))


def test_a_named_pipe_with_a_late_writer_is_read_once_and_its_copy_removed(
    trace: Path, tmp_path: Path, own_tmp: Path
) -> None:
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)

    def writer() -> None:
        time.sleep(0.3)
        with open(fifo, "wb") as fh:
            fh.write(trace.read_bytes())

    thread = threading.Thread(target=writer)
    thread.start()
    report = score_file(fifo)
    thread.join(10)
    assert _queries(report) == _queries(score_file(trace))
    assert list(own_tmp.iterdir()) == []


def test_a_named_pipe_without_a_writer_is_an_error_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_tmp: Path
) -> None:
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(score_file_module, "PIPE_OPEN_SECONDS", 0.3)
    started = time.monotonic()
    with pytest.raises(TriageError, match="no process opened for writing within 0.3 s"):
        score_file(fifo)
    assert time.monotonic() - started < 5
    assert not any(t.name == "triage-pipe-open" for t in threading.enumerate())  # the open was undone
    result = CliRunner().invoke(app, ["score", str(fifo)])
    assert result.exit_code == 1 and result.output.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in result.output and list(own_tmp.iterdir()) == []


def test_a_bad_line_in_a_pipe_names_the_pipe(tmp_path: Path, own_tmp: Path) -> None:
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    thread = threading.Thread(target=lambda: Path(fifo).write_text('{"event": "graph"}\nnot json\n'))
    thread.start()
    with pytest.raises(EventError, match="events.fifo, line 1"):
        score_file(fifo)
    thread.join(10)
    assert list(own_tmp.iterdir()) == []


def test_a_regular_file_is_read_in_place(trace: Path) -> None:
    with readable(trace) as source:
        assert source == trace
