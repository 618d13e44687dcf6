"""The HTML reports opened in a real headless browser (Debian's ``chromium``).

Each page is loaded once with ``--dump-dom`` (the DOM after parsing), ``--screenshot`` (written under
the test's tmp folder) and console logging on stderr: the DOM must hold tables and SVG plots, hostile
entity names only as text, no script element but the store report's own, and the browser console must
stay silent (no JavaScript error, no blocked fetch). A control page with a throwing script proves the
console check can fail. The demo's store report is then driven through the DevTools protocol (a
websocket to ``--remote-debugging-port``): real mouse clicks and typing open the Queries tab, filter
the table, sort it, open a query and zoom its subgraph.
Skipped with a message when chromium is not installed (``apt-get install -y chromium``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

from triage_plugins.adapter_kit.runner import Setup
from triage_plugins.apps.compare import (
    embedded_corpus,
    query_id,
    register_runner,
    run_compare,
    unregister_runner,
)
from triage_plugins.contract.events import GenerationEvent, GraphEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.report import StoreReport, build_store_report, compare_html, store_html
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import Store

HOSTILE = "<script>alert(1)</script>"
HOSTILE_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
QUOTED = 'Tom "Tommy" & <b>Co</b>'
LONG_SETUP = "PGRetriever(sub_retrievers=[VectorContextRetriever(include_text=False, ...)]) " * 25


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
    # a set-up described at length, as LlamaIndex's is (~2,000 characters): it must not widen the tables
    result.rows[0].setup = Setup(LONG_SETUP, default=False)
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
    # compare carries no script, the store report only its own (allowed by hash); hostile names stay text
    assert dom.lower().count("<script") == 1  # the page's own (tabs), allowed by its hash
    assert HOSTILE not in dom
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


# --------------------------------------------------------------------------- clicking through the demo report


class _DevTools:
    """Headless chromium driven over the DevTools protocol (one page, flattened session)."""

    def __init__(self, profile: Path) -> None:
        from websockets.sync.client import connect

        cmd = [
            _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
            "--window-size=1400,1000", "about:blank",
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = None
        for line in self.proc.stderr:  # "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
            if "DevTools listening on " in line:
                url = line.split("DevTools listening on ", 1)[1].strip()
                break
        assert url, "chromium did not open its DevTools port"
        self.stack = contextlib.ExitStack()
        self.ws = self.stack.enter_context(connect(url, max_size=None, open_timeout=30))
        self.next_id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)

    def call(self, method: str, session: bool = False, **params: object) -> dict:
        self.next_id += 1
        msg: dict = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> None:
        if any(e.get("method") == method for e in self.events):
            return
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            self.events.append(reply)
            if reply.get("method") == method:
                return

    def go(self, url: str) -> None:
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")

    def js(self, expression: str) -> object:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def until(self, expression: str, seconds: float = 10.0) -> object:
        """Poll ``expression`` until it is truthy (clicks route through ``hashchange``, asynchronously)."""
        deadline = time.monotonic() + seconds
        while not (value := self.js(expression)):
            assert time.monotonic() < deadline, f"never true: {expression}"
            time.sleep(0.05)
        return value

    def click(self, selector: str) -> None:
        """A real left click at the centre of the first element matching ``selector`` (which must be
        the element the mouse lands on, not something covering it)."""
        x, y, hit = self.js(
            f"(function(){{var e=document.querySelector({json.dumps(selector)});e.scrollIntoView({{block:'center'}});"
            "var r=e.getBoundingClientRect(),x=r.left+Math.min(r.width/2,20),y=r.top+r.height/2;"
            "var at=document.elementFromPoint(x,y);return [x,y,!!at&&(at===e||e.contains(at))];})()"
        )
        assert hit, f"{selector} is not visible where it would be clicked"
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, button="left", clickCount=1
            )

    def type(self, selector: str, text: str) -> None:
        self.click(selector)
        self.call("Input.insertText", session=True, text=text)

    def errors(self) -> list[dict]:
        """Uncaught exceptions, console errors and browser log errors (a refused script or fetch)."""
        bad = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            error_call = method == "Runtime.consoleAPICalled" and params.get("type") == "error"
            if method == "Runtime.exceptionThrown" or error_call:
                bad.append(params)
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                bad.append(params["entry"])
        return bad

    def close(self) -> None:
        try:
            self.stack.close()
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=20)


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory) -> tuple[Path, StoreReport]:
    from triage_plugins.apps.demo import run_demo

    out = tmp_path_factory.mktemp("demo")
    run_demo(seed=0, store=out / "demo.sqlite", feedback_rounds=0)
    with Store.open(out / "demo.sqlite", readonly=True) as store:
        report = build_store_report(store)
    page = out / "report.html"
    page.write_text(store_html(report), encoding="utf-8")
    return page, report


@pytest.fixture
def browser(tmp_path: Path):
    pytest.importorskip("websockets", reason="the websockets client drives chromium's DevTools protocol")
    tools = _DevTools(tmp_path / "profile")
    try:
        yield tools
    finally:
        tools.close()


_VISIBLE_ROWS = (
    "[].slice.call(document.querySelectorAll('#qtable tbody tr')).filter(function(r){return !r.hidden;})"
)


def test_click_filter_open_a_query_and_see_its_subgraph(demo_page, browser: _DevTools) -> None:
    page, report = demo_page
    queries = report.details.queries
    silent = [d for d in queries if d.verdict == "silent failure"]
    assert silent, "the demo store has silent failures to find"
    browser.go(page.resolve().as_uri())
    # one tab at a time: the overview shows, the query table is hidden until its tab is clicked
    assert browser.js("document.getElementById('queries').hidden") is True
    assert browser.js("document.getElementById('overview').hidden") is False
    browser.click("nav a[data-tab=queries]")
    browser.until("!document.getElementById('queries').hidden")
    assert browser.js("document.getElementById('overview').hidden") is True
    assert browser.js(f"{_VISIBLE_ROWS}.length") == len(queries)
    assert browser.js("document.querySelector('#qtable tbody tr').dataset.verdict") == "silent failure"

    # filter: verdict "silent failure" and one retriever, then free text
    target = silent[-1]
    browser.js(
        "(function(){var s=document.getElementById('f-verdict');s.value='silent failure';"
        "s.dispatchEvent(new Event('change'));})()"
    )
    assert browser.js(f"{_VISIBLE_ROWS}.length") == len(silent)
    browser.js(
        f"(function(){{var s=document.getElementById('f-ret');s.value={json.dumps(target.retriever)};"
        "s.dispatchEvent(new Event('change'));})()"
    )
    expected = [d.key for d in silent if d.retriever == target.retriever]
    assert browser.js(f"{_VISIBLE_ROWS}.map(function(r){{return r.dataset.key;}})") == expected
    assert (
        browser.js("document.getElementById('f-count').textContent")
        == f"{len(expected)} of {len(queries)} queries"
    )
    browser.type("#f-text", target.trace.query)
    shown = browser.js(f"{_VISIBLE_ROWS}.map(function(r){{return r.dataset.key;}})")
    assert target.key in shown and len(shown) < len(expected) + 1

    # open the query with a real click on its row: the panel shows question, answer, gold, chain, subgraph
    browser.click(f'#qtable tbody tr[data-key="{target.key}"] td:nth-child(5)')
    browser.until("!!document.querySelector('#qpanel .panel')")
    assert browser.js("decodeURIComponent(location.hash)") == f"#q={target.key}"
    panel = browser.js("document.getElementById('qpanel').innerText")
    assert target.trace.query in panel and target.answer in panel
    assert all(g in panel for g in target.gold) and "silent failure" in panel
    assert all(step.metric in panel for step in target.trace.steps)
    seeds = browser.js(
        "[].slice.call(document.querySelectorAll('#qpanel svg.subgraph g.node.seed')).map(function(g){return g.dataset.node;})"
    )
    assert seeds and set(seeds) == set(target.seeds) & set(target.nodes)
    drawn = browser.js("document.querySelectorAll('#qpanel svg.subgraph g.node').length")
    assert drawn == len(target.nodes)
    gold_drawn = browser.js("document.querySelectorAll('#qpanel svg.subgraph g.node.gold').length")
    assert gold_drawn == len(set(target.gold or ()) & set(target.nodes) - set(target.seeds))
    assert browser.js("document.querySelector('#qpanel svg.subgraph').getBoundingClientRect().width") > 100

    # zoom the drawing
    width = browser.js("document.querySelector('#qpanel svg.subgraph').getBoundingClientRect().width")
    browser.click("#qpanel button[data-zoom='1.25']")
    assert browser.js("+document.querySelector('#qpanel svg.subgraph').getAttribute('width')") == round(
        width * 1.25
    )
    assert browser.js("document.querySelector('#qpanel svg.subgraph').getBoundingClientRect().width") > width

    # sort: clear the filters, click the triples header twice (ascending, then descending)
    browser.js(
        "['f-verdict','f-fw','f-ret','f-sig','f-text'].forEach(function(id){var e=document.getElementById(id);"
        "e.value='';e.dispatchEvent(new Event('input'));})"
    )
    assert browser.js(f"{_VISIBLE_ROWS}.length") == len(queries)
    browser.click("#qtable th[data-sort='10']")
    counts = browser.js(f"{_VISIBLE_ROWS}.map(function(r){{return +r.cells[10].dataset.v;}})")
    assert counts == sorted(counts) and counts[0] < counts[-1]
    browser.click("#qtable th[data-sort='10']")
    counts = browser.js(f"{_VISIBLE_ROWS}.map(function(r){{return +r.cells[10].dataset.v;}})")
    assert counts == sorted(counts, reverse=True)
    assert browser.errors() == []


def test_a_link_opens_a_query_panel_directly(demo_page, browser: _DevTools) -> None:
    page, report = demo_page
    wrong = next(d for d in report.details.queries if d.verdict == "wrong")
    browser.go(page.resolve().as_uri() + "#q=" + wrong.trace.query_id)
    browser.until("!!document.querySelector('#qpanel .panel')")  # unpacked on first use
    assert browser.js("document.getElementById('queries').hidden") is False
    assert browser.js("document.querySelector('#qtable tr.sel').dataset.key") == wrong.key
    assert browser.js("document.querySelector('#qpanel .panel').dataset.key") == wrong.key
    assert browser.js("document.querySelectorAll('#qpanel svg.subgraph').length") == 1
    # the Chains tab links a worst query to its panel: one click there opens it
    key = next(
        k
        for g in report.groups
        for w in g.worst.values()
        for q in w
        if (k := f"{g.framework}/{g.retriever}/{q.query_id}") in {d.key for d in report.details.queries}
    )
    browser.click("nav a[data-tab=chains]")
    browser.until("!document.getElementById('chains').hidden")
    browser.js(f"document.querySelector('a[href=\"#q={key}\"]').closest('details').open=true")
    browser.click(f'a[href="#q={key}"]')
    browser.until(
        f"(document.querySelector('#qpanel .panel')||{{dataset:{{}}}}).dataset.key==={json.dumps(key)}"
    )
    assert browser.js("document.querySelector('#qpanel .panel').dataset.key") == key
    assert browser.errors() == []


def test_devtools_errors_catch_a_script_error(tmp_path: Path, browser: _DevTools) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>throw new Error('boom')</script>", encoding="utf-8")
    browser.go(page.resolve().as_uri())
    assert any("boom" in json.dumps(e) for e in browser.errors())


# --------------------------------------------------------------------------- layout at 1400 px and 400 px

_WIDEST = (
    "Math.max.apply(null,[].slice.call(document.querySelectorAll({sel})).filter(function(e){{"
    "return e.offsetParent!==null;}}).map(function(e){{return e.getBoundingClientRect().right;}}))"
)


def _overflowing(browser: _DevTools, width: int) -> list[str]:
    """The first elements reaching past ``width`` px, to name in a failure."""
    return browser.js(
        "[].slice.call(document.querySelectorAll('body *')).filter(function(e){var r=e.getBoundingClientRect();"
        f"return r.width>0&&r.right>{width};}}).slice(0,8).map(function(e){{return e.tagName+'.'+e.className+' '"
        "+Math.round(e.getBoundingClientRect().right);})"
    )


def _viewport(browser: _DevTools, width: int) -> None:
    browser.call(
        "Emulation.setDeviceMetricsOverride", session=True, width=width, height=1000, deviceScaleFactor=1,
        mobile=width < 600,
    )  # fmt: skip


def test_compare_opens_on_accuracy_with_every_metric_column_visible_at_1400_px(pages, browser) -> None:
    _viewport(browser, 1400)
    browser.go(pages["compare"].resolve().as_uri())
    assert len(LONG_SETUP) > 1500 and "non-default" in browser.js("document.getElementById('gold').innerText")
    # one tab at a time, accuracy first
    assert browser.js("document.querySelector('nav a').dataset.tab") == "gold"
    assert browser.js("document.getElementById('gold').hidden") is False
    assert browser.js("document.getElementById('frameworks').hidden") is True
    view = browser.js("document.documentElement.clientWidth")
    assert view == 1400
    headers = browser.js(
        "[].slice.call(document.querySelectorAll('#gold th')).map(function(t){return t.textContent;})"
    )
    assert {"CC", "Hits@1", "F1"} <= set(headers)
    for name in ("CC", "Hits@1", "F1"):  # each metric header sits inside the viewport, unscrolled
        right = browser.js(
            "[].slice.call(document.querySelectorAll('#gold th')).filter(function(t){return t.textContent==="
            f"{json.dumps(name)};}})[0].getBoundingClientRect().right"
        )
        assert 0 < right <= view, (name, right)
    # the set-up text is one click away in Frameworks, and that table fits too
    browser.click("nav a[data-tab=frameworks]")
    browser.until("!document.getElementById('frameworks').hidden")
    assert browser.js(_WIDEST.format(sel=json.dumps("#frameworks table"))) <= view
    assert browser.js("document.getElementById('gold').hidden") is True
    browser.click("nav a[data-tab=all]")
    browser.until("!document.getElementById('gold').hidden && !document.getElementById('frameworks').hidden")
    assert browser.errors() == []


@pytest.mark.parametrize("name", ["compare", "report"])
def test_no_page_scrolls_sideways_at_a_phone_width(pages, browser, name: str) -> None:
    _viewport(browser, 400)
    browser.go(pages[name].resolve().as_uri())
    tabs = browser.js(
        "[].slice.call(document.querySelectorAll('nav a[data-tab]')).map(function(a){return a.dataset.tab;})"
    )
    assert len(tabs) >= 4
    for tab in tabs:  # wide tables scroll inside their own box; the page itself never does
        browser.js(f"location.hash={json.dumps(tab)}")
        browser.until(
            f"document.querySelector('nav a.on') && document.querySelector('nav a.on').dataset.tab==={json.dumps(tab)}"
        )
        assert browser.js("document.documentElement.scrollWidth") <= 400, (tab, _overflowing(browser, 400))
    assert browser.errors() == []


def test_every_part_of_a_disconnected_subgraph_is_drawn_inside_its_frame(demo_page, browser) -> None:
    page, report = demo_page
    split = [d for d in report.details.queries if d.trace.signature == "connectivity_gap"]
    assert split, "the demo has connectivity_gap queries"
    _viewport(browser, 1400)
    browser.go(page.resolve().as_uri())
    for d in split:
        browser.js(f"location.hash={json.dumps('#q=' + d.key)}")  # same document: no load event
        browser.until(
            f"(document.querySelector('#qpanel .panel')||{{dataset:{{}}}}).dataset.key==={json.dumps(d.key)}"
        )
        outside = browser.js(
            "(function(){var box=document.querySelector('#qpanel .svgbox').getBoundingClientRect();"
            "return [].slice.call(document.querySelectorAll('#qpanel svg.subgraph circle, #qpanel svg.subgraph text'))"
            ".filter(function(e){var r=e.getBoundingClientRect();return r.left<box.left-1||r.right>box.right+1||"
            "r.top<box.top-1||r.bottom>box.bottom+1;}).map(function(e){return e.textContent||e.tagName;});})()"
        )
        assert outside == [], (d.key, outside)  # every node, label and the legend visible without scrolling
        assert browser.js("document.querySelectorAll('#qpanel svg.subgraph g.part').length") >= 2
    assert browser.errors() == []
