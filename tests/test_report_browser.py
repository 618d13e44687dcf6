"""The HTML reports opened in a real headless browser (Debian's ``chromium``).

Each page is loaded once with ``--dump-dom`` (the DOM after parsing), ``--screenshot`` (written under
the test's tmp folder) and console logging on stderr: the DOM must hold tables and SVG plots, hostile
entity names only as text, no script element, and the browser console must stay silent (no JavaScript
error, no blocked fetch). A control page with a throwing script proves the console check can fail.
Skipped with a message when chromium is not installed (``apt-get install -y chromium``).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from triage_plugins.apps.compare import (
    embedded_corpus,
    query_id,
    register_runner,
    run_compare,
    unregister_runner,
)
from triage_plugins.contract.events import GenerationEvent, GraphEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.report import build_store_report, compare_html, store_html
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import Store

HOSTILE = "<script>alert(1)</script>"
HOSTILE_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
QUOTED = 'Tom "Tommy" & <b>Co</b>'


def _chromium() -> str | None:
    return os.environ.get("TRIAGE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


pytestmark = pytest.mark.skipif(
    _chromium() is None, reason="chromium not installed (apt-get install -y chromium); browser test skipped"
)


def _open(page: Path, out: Path) -> tuple[str, str, Path]:
    """(DOM, browser stderr, screenshot path) of ``page`` opened in headless chromium."""
    shot = out / f"{page.stem}.png"
    cmd = [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={out / ('profile-' + page.stem)}", "--enable-logging=stderr", "--v=0",
        "--window-size=1280,2000", "--dump-dom", f"--screenshot={shot}", page.resolve().as_uri(),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr, shot


def _console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


class _HostileRunner:
    """A framework whose entity names are hostile and which raises mid-run with a hostile message."""

    name = "hostile"
    modes = ("path",)

    def available(self) -> tuple[bool, str]:
        return True, ""

    def run(self, corpus, questions, mode, manager, *, feedback_rounds, seed, progress) -> None:
        manager.emit_graph(GraphEvent(self.name, GraphView([Triple.of(HOSTILE, "knows", QUOTED)])))
        raise RuntimeError(f"failed on entity {HOSTILE}")


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("pages")
    store_path = out / "run.sqlite"
    register_runner(_HostileRunner(), replace=True)
    try:
        result = run_compare(
            embedded_corpus(0, n_questions=6),
            frameworks=["reference", "hostile", "lightrag"],
            modes=["path", "krag"],
            feedback_rounds=1,
            store=store_path,
        )
    finally:
        unregister_runner("hostile")
    compare_page = out / "compare.html"
    compare_page.write_text(compare_html(result), encoding="utf-8")

    with Store.open(store_path) as store:
        manager = TriageManager(store, entry_points=False, synchronous=True)
        evil = Triple.of(HOSTILE, "knows", QUOTED)
        manager.emit_graph(GraphEvent("live", GraphView([evil])))
        for i in range(3):
            qid = query_id(f"h{i}", "local")
            manager.emit_retrieval(
                RetrievalEvent(
                    "live",
                    qid,
                    f"Who does {HOSTILE} know?",
                    (HOSTILE,),
                    {HOSTILE: HOSTILE},
                    Subgraph(),
                    retriever="local",
                )
            )
            manager.emit_generation(GenerationEvent("live", qid, QUOTED, (QUOTED,), {QUOTED: QUOTED}))
        manager.close()
        store.add_scores("triple", {evil.id: -15.0})
        report = build_store_report(store, window=4)
    store_page = out / "report.html"
    store_page.write_text(store_html(report), encoding="utf-8")
    return {"compare": compare_page, "report": store_page}


@pytest.mark.parametrize("name", ["compare", "report"])
def test_report_renders_in_chromium(pages: dict[str, Path], name: str, tmp_path: Path) -> None:
    dom, stderr, shot = _open(pages[name], tmp_path)
    assert dom.count("<table") >= 2
    assert dom.count("<svg") >= 3
    assert "<script" not in dom.lower()  # our pages carry no script, and hostile names stay text
    assert HOSTILE_ESCAPED in dom
    assert _console_lines(stderr) == []  # no JavaScript error, no refused fetch
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1280, 2000)
    assert len(png) > 20_000  # a blank page compresses to a few kilobytes


def test_console_check_catches_a_script_error(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>throw new Error('boom')</script>", encoding="utf-8")
    _, stderr, _ = _open(page, tmp_path)
    assert any("Uncaught Error: boom" in line for line in _console_lines(stderr))
