"""``triage feedback pull`` against a hostile Phoenix (issue #34, "Hostile feedback sources").

A fake Phoenix on 127.0.0.1 (``http.server`` in a thread) answers the two routes phoenix-client
reads — ``/v1/projects/<p>/spans`` and ``/v1/projects/<p>/span_annotations`` — with TRIAGE spans
and annotations whose text is Rich markup, terminal escape sequences and malformed fields. The
command runs as a subprocess with a terminal forced on (``FORCE_COLOR``), so markup would render
if it were read. Expected: no traceback, no markup rendered, no control character printed, each
malformed annotation skipped and counted, each annotation applied once across two pulls, and one
source's feedback on one query capped at ``feedback.max_per_query``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

pytest.importorskip("phoenix.client", reason="needs triage-plugins[phoenix] (arize-phoenix-client)")

from triage_plugins.apps.feedback_pull import APPLIED_PARAM, printable, pull_feedback  # noqa: E402
from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.contract.events import (  # noqa: E402
    FeedbackEvent,
    GenerationEvent,
    Gold,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.plugins.feedback import PER_QUERY, unattributed_param  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402
from triage_plugins.store import Store  # noqa: E402

T1 = Triple("t1", "Inception", "directed_by", "Christopher Nolan")
T2 = Triple("t2", "Interstellar", "directed_by", "Christopher Nolan")
GOLD = Gold(answers=("Christopher Nolan",), entities=("Inception",))
CAP = 3  # feedback.max_per_query's default
FLOOD = 60  # annotations one source sends on one query
OSC_TITLE = "\x1b]0;pwned\x07"  # would set the terminal's title
LINK = "[link=https://evil.example/]click me[/link]"


def _span(span_id: str, trace_id: str, query_id: str | None) -> dict[str, Any]:
    attrs = {"triage.framework": "toy", "triage.query_id": query_id} if query_id is not None else {}
    return {"name": "retrieval", "context": {"span_id": span_id, "trace_id": trace_id}, "attributes": attrs}


SPANS = [
    _span("s0", "tr0", "q0"),
    _span("s1", "tr1", "q1"),
    _span("sblank", "tr2", " "),  # a TRIAGE span whose query id is blank
    {"name": "broken", "context": ["not", "an", "object"], "attributes": "nope"},
    "not a span",
]


def _note(note_id: Any, span_id: Any = "s1", name: Any = "correctness", **result: Any) -> dict[str, Any]:
    return {
        "id": note_id, "span_id": span_id, "name": name, "annotator_kind": "HUMAN",
        "result": result, "created_at": f"2026-01-01T00:00:{len(str(note_id)) % 60:02d}",
    }  # fmt: skip


GOOD = [
    _note("markup-close", name="[/]", score=1.0),
    _note("markup-link", name=LINK, score=1.0),
    _note("escapes", name=f"ok{OSC_TITLE}\x1b[31mred\u202eevil", score=0.75),
    _note("label[/]", label="[/]"),  # unknown label: skipped, its text shown as data
]
MALFORMED = [
    _note({"id": 1}, score=1.0),
    _note(None, score=1.0),
    _note("x" * 10_000, score=1.0),
    _note("span-list", span_id=["s1"], score=1.0),
    _note("name-number", name=7, score=1.0),
    _note("score-text", score="0.5"),
    _note("score-nan", score=float("nan")),
    _note("label-number", label=3),
    {**_note("result-list"), "result": [1, 2]},
    {**_note("kind-dict", score=1.0), "annotator_kind": {"x": 1}},
    {**_note("created-int", score=1.0), "created_at": 12, "span_id": 5},
    _note("blank-query", span_id="sblank", score=1.0),
    "not an annotation",
    42,
]
FLOODED = [_note(f"flood-{i}", span_id="s0", score=0.0) for i in range(FLOOD)]
ANNOTATIONS = [*GOOD, *MALFORMED, *FLOODED, GOOD[0]]  # the last one twice in one answer


class _FakePhoenix(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = urlparse(self.path).path
        if path.endswith("/spans"):
            self._send({"data": SPANS, "next_cursor": None})
        elif path.endswith("/span_annotations"):
            self._send({"data": ANNOTATIONS, "next_cursor": None})
        else:
            self.send_error(404)

    def _send(self, payload: object) -> None:
        body = json.dumps(payload).encode()  # NaN as NaN, as a careless server would
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def phoenix() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakePhoenix)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _recorded_store(path: Path) -> Path:
    """A store holding the retrieval and answer of q0 and q1 (what the answering process recorded)."""
    with TriageManager(str(path), synchronous=True, entry_points=False) as manager:
        for qid in ("q0", "q1"):
            manager.emit_retrieval(
                RetrievalEvent(
                    "toy", qid, "Who directed Inception?", ("Inception",), {"Inception": "Inception"},
                    Subgraph((T1, T2)), retriever="local", gold=GOLD,
                )
            )  # fmt: skip
            manager.emit_generation(GenerationEvent("toy", qid, "Christopher Nolan directed Inception."))
    return path


def _pull(store: Path, url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": "200", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    args = ["feedback", "pull", "--store", str(store), "--endpoint", url]
    cmd = [sys.executable, "-m", "triage_plugins.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def _state(store: Path) -> tuple[int, dict[str, tuple[float, int]]]:
    with Store.open(str(store)) as s:
        scores = {k: (row.raw, row.n_updates) for k, row in s.get_scores("triple").items()}
        return len(list(s.events("feedback"))), scores


def test_hostile_annotations_are_data_applied_once_and_capped(phoenix: str, tmp_path: Path) -> None:
    store = _recorded_store(tmp_path / "s.sqlite")
    first = _pull(store, phoenix)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out
    assert "Traceback" not in out
    assert "\x1b]8;" not in out and LINK in out  # the link markup is shown, not made a link
    assert "[/]" in out  # printed as text, not read as a closing tag
    assert OSC_TITLE not in out and "\x07" not in out and "\u202e" not in out and "\x1b]0;" not in out
    assert "\\x1b]0;pwned\\x07" in out and "\\u202e" in out  # shown escaped instead
    applied = 3 + FLOOD  # the three good scores and the flood (the cap is the learner's)
    skipped = 1 + len(MALFORMED)  # the unknown label and every malformed annotation
    bad = len(MALFORMED)
    assert f"{applied} annotation(s) applied, 1 already applied, {skipped} skipped ({bad} malformed)" in out
    assert f"{FLOOD - CAP} over feedback.max_per_query" in out
    events, scores = _state(store)
    assert events == applied and scores  # every applied annotation recorded, scores learned

    with Store.open(str(store)) as s:
        assert s.get_param(f"{PER_QUERY}human.toy/q0") == CAP + 1  # counted up to the cap, no further
        assert s.get_param(unattributed_param("over the cap per query")) == FLOOD - CAP
        assert len(s.get_param(APPLIED_PARAM)) == applied

    second = _pull(store, phoenix)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"0 annotation(s) applied, {applied + 1} already applied" in second.stdout
    assert _state(store) == (events, scores)  # nothing applied twice


def test_one_sources_flood_moves_a_query_no_more_than_the_cap(tmp_path: Path) -> None:
    def learned(n: int, cap: int | None) -> dict[str, tuple[float, int]]:
        config = TriageConfig(options={"feedback.max_per_query": cap})
        store = _recorded_store(tmp_path / f"{n}-{cap}.sqlite")
        with TriageManager(str(store), synchronous=True, entry_points=False, config=config) as m:
            for _ in range(n):
                m.emit_feedback(FeedbackEvent("toy", "q0", 0.0, "human"))
            m.emit_feedback(FeedbackEvent("toy", "q0", 0.0, "llm"))  # another source has its own cap
        return _state(store)[1]

    capped = learned(200, CAP)
    assert capped == learned(CAP, CAP)  # 200 ratings move the query as far as 10 do
    assert capped == learned(CAP, None)  # (the cap counts nothing else)
    assert learned(200, None)["t1"][0] < capped["t1"][0]  # uncapped, the flood drives the score lower
    assert capped["t1"][1] == CAP + 1  # the human steps up to the cap, and the llm's one


def test_a_pull_records_its_annotations_before_applying_them(phoenix: str, tmp_path: Path) -> None:
    store = _recorded_store(tmp_path / "s.sqlite")
    with TriageManager(str(store), synchronous=True, entry_points=False) as manager:
        sent: list[FeedbackEvent] = []

        def dies_on_the_second(event: FeedbackEvent, **_: Any) -> None:
            if sent:
                raise RuntimeError("killed mid-pull")
            with Store.open(str(store)) as s:  # what was recorded by the time the first is applied
                sent.append(event)
                assert len(s.get_param(APPLIED_PARAM)) == 3 + FLOOD

        manager.emit_feedback = dies_on_the_second  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="killed mid-pull"):
            pull_feedback(manager, endpoint=phoenix)
    with TriageManager(str(store), synchronous=True, entry_points=False) as manager:
        again = pull_feedback(manager, endpoint=phoenix)
    assert again.applied == [] and again.already == 3 + FLOOD + 1  # at most once, never twice


def test_printable_escapes_what_a_terminal_would_act_on() -> None:
    assert printable("a\x1b[2Jb\nc\u202ed\u200b") == "a\\x1b[2Jb\\nc\\u202ed\\u200b"
    assert printable("[bold]x[/]") == "[bold]x[/]"  # markup is left as text; the caller prints Text
    assert printable("y" * 500, 20) == "y" * 19 + "…"
    assert printable({"k": 1}) == "{'k': 1}"
