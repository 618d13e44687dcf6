"""Reports: SVG plots, HTML escaping of untrusted text, the store report (windows, triggers, worst
queries, score movement), ``triage report`` on a store filled by a reference run."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console
from typer.testing import CliRunner

from triage_plugins.apps.compare import embedded_corpus, run_compare
from triage_plugins.cli import app
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import (
    Chunk,
    ExtractedTriple,
    ExtractionEvent,
    GenerationEvent,
    GraphEvent,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.diagnosis.chain import REMEDIATION
from triage_plugins.report import (
    build_store_report,
    chain_funnel,
    compare_html,
    parse_since,
    plots,
    render_compare,
    render_store_report,
    store_html,
)
from triage_plugins.report.compare_html import TAB_SCRIPT
from triage_plugins.report.data import load_query_details
from triage_plugins.report.html import Safe, script_hash, table
from triage_plugins.report.query_view import SCRIPT, embedded_panels
from triage_plugins.report.results import CompareResult, CompareRow
from triage_plugins.report.subgraph_svg import layout, subgraph_svg
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import MetricRow, Store

HOSTILE = "<script>alert(1)</script>"
HOSTILE_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
QUOTED = 'Tom "Tommy" O\'Neil & <b>Co</b>'
QUOTED_ESCAPED = "Tom &quot;Tommy&quot; O&#x27;Neil &amp; &lt;b&gt;Co&lt;/b&gt;"
ATTR = 'x" onmouseover="alert(2)'


def _svg_ok(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


# --------------------------------------------------------------------------- plots and blocks


def test_every_plot_is_well_formed_svg_with_escaped_labels() -> None:
    svgs = [
        plots.bar_chart([(HOSTILE, 0.5), (QUOTED, 1.0)], title=ATTR),
        plots.column_chart([(HOSTILE, 0.25), ("∞", 0.75)], title=QUOTED),
        plots.stacked_bars(
            [(HOSTILE, {"supported": 3, "retrieval_gap": 1})], ["supported", "retrieval_gap"], title="s"
        ),
        plots.funnel([("QGR", 1.0), (HOSTILE, 0.5)], title=HOSTILE),
        plots.diverging_bars([(HOSTILE, 12.0), (QUOTED, -4.0)], title="d"),
        plots.box_plot([(HOSTILE, [0.1, 0.5, 0.9]), ("empty", [])], title="b"),
        plots.line_chart(
            {HOSTILE: [(0.0, 0.2), (1.0, None), (2.0, 0.6)]}, title="l", markers=[(1.0, HOSTILE)]
        ),
    ]
    for svg in svgs:
        _svg_ok(svg)
        assert HOSTILE not in svg and "<b>" not in svg
        assert 'onmouseover="alert' not in svg
    assert HOSTILE_ESCAPED in svgs[0] and QUOTED_ESCAPED in svgs[0]
    assert "x&quot; onmouseover=&quot;alert(2)" in svgs[0]


def test_bar_lengths_are_proportional() -> None:
    root = _svg_ok(plots.bar_chart([("a", 1.0), ("b", 0.25)], title="t", width=460, label_width=160))
    widths = [float(r.get("width")) for r in root.iter("{http://www.w3.org/2000/svg}rect")]
    # span = width - label_width - 60 = 240: 1.0 -> 240 px, 0.25 -> 60 px
    assert widths == [240.0, 60.0]


def test_long_labels_are_cut_but_keep_the_full_text_as_tooltip() -> None:
    label = "The Very Long Entity Name That Goes On & On|born_in|Somewhere"
    svg = plots.bar_chart([(label, 1.0)], title="t")
    assert "The Very Long Entity Name That Goes On &amp; On|born_in|Somewhere</title>" in svg
    assert "…" in svg


def test_table_escapes_str_and_keeps_safe_markup() -> None:
    html = table(["h", QUOTED], [[HOSTILE, Safe("<em>ok</em>")]])
    assert HOSTILE_ESCAPED in html and QUOTED_ESCAPED in html
    assert "<em>ok</em>" in html and HOSTILE not in html


def test_chain_funnel_reads_signatures() -> None:
    counts = {"out_of_scope": 1, "retrieval_gap": 2, "connectivity_gap": 1, "supported": 4, "undetermined": 2}
    # 10 queries: 2 undetermined and 1 out_of_scope leave 7 past QGR, then -2, -1, -0, -0
    assert chain_funnel(counts) == [("QGR", 0.7), ("ERC", 0.5), ("RRS", 0.4), ("ARF", 0.4), ("AGR", 0.4)]
    assert chain_funnel({}) == []


def test_parse_since() -> None:
    assert parse_since("2h", now=10_000.0) == 10_000.0 - 7200
    assert parse_since("30m", now=10_000.0) == 10_000.0 - 1800
    assert parse_since("2026-01-01T00:00") == 1767225600.0
    assert parse_since("1767225600") == 1767225600.0
    assert parse_since(None) is None
    with pytest.raises(ConfigError, match="--since"):
        parse_since("last tuesday")


# --------------------------------------------------------------------------- the store report


def _metric_store(tmp_path) -> Store:
    """Six queries of one retriever: ERC 1, 1, 0.2, 0.1, 0.2, 0.1 (QGR 1), one second apart."""
    store = Store.open(tmp_path / "m.sqlite")
    rows = []
    for i, erc in enumerate((1.0, 1.0, 0.2, 0.1, 0.2, 0.1), 1):
        qid, ts = f"q{i}", 1000.0 + i
        sig = "supported" if erc >= 0.67 else "retrieval_gap"
        fields = {"framework": "live", "retriever": "local", "ts": ts}
        rows += [
            MetricRow("query", qid, "QGR", 1.0, **fields),
            MetricRow("query", qid, "ERC", erc, **fields),
            MetricRow("query", qid, "signature", None, sig, details={"signature": sig}, **fields),
        ]
    store.record_metrics(rows)
    store.add_scores("triple", {"a|r|b": 30.0, "b|r|c": -20.0, "c|r|d": 0.0})
    return store


def test_store_report_triggers_worst_queries_and_scores(tmp_path) -> None:
    with _metric_store(tmp_path) as store:
        report = build_store_report(store, window=4)
    (group,) = report.groups
    assert group.label == "live / local" and [q.query_id for q in group.queries] == [
        f"q{i}" for i in range(1, 7)
    ]
    # ERC rolling mean (min_count 2): q3 (1+1+.2)/3 = .733 >= .67; q4 (1+1+.2+.1)/4 = .575 < .67 -> fires once
    (trigger,) = group.triggers
    assert (trigger.metric, trigger.position, trigger.query_id) == ("ERC", 4, "q4")
    assert trigger.value == pytest.approx(0.575)
    assert trigger.stage == "retrieval" and trigger.levers == REMEDIATION["retrieval_gap"].levers
    assert group.signatures == {"retrieval_gap": 4, "supported": 2}
    # worst first: ERC 0.1 (q4, q6) then 0.2 (q3, q5); each traced to its failing link
    assert [q.query_id for q in group.worst["retrieval_gap"]] == ["q4", "q6", "q3", "q5"]
    assert group.worst["retrieval_gap"][0].failed.metric == "ERC"
    assert group.stats["ERC"].median == pytest.approx(0.2)
    assert group.stats["ERC"].last_window == pytest.approx((0.2 + 0.1 + 0.2 + 0.1) / 4)
    (scores,) = report.scores
    assert (scores.unit, scores.total, scores.moved) == ("triple", 3, 2)
    assert [(m.id, m.raw, m.delta, m.n_updates) for m in scores.promoted] == [("a|r|b", 130.0, 30.0, 1)]
    assert [(m.id, m.raw, m.delta) for m in scores.suppressed] == [("b|r|c", 80.0, -20.0)]


def test_store_report_since(tmp_path) -> None:
    with _metric_store(tmp_path) as store:
        report = build_store_report(store, window=4, since=1004.0)
    assert [q.query_id for q in report.groups[0].queries] == ["q4", "q5", "q6"]


def _hostile_store(tmp_path) -> Store:
    """A store filled through the manager with untrusted names in the documents and the graph."""
    store = Store.open(tmp_path / "h.sqlite")
    manager = TriageManager(store, entry_points=False, synchronous=True)
    manager.start_run("serve")
    evil = Triple.of(HOSTILE, "knows", QUOTED)
    chunk = Chunk("doc#p0", "doc", f"{HOSTILE} knows {QUOTED}.", {"paragraph": 0})
    manager.emit_extraction(
        ExtractionEvent("live", "run-1", chunk, (ExtractedTriple(evil, None, chunk.text),), "m", 0.0)
    )
    manager.emit_graph(GraphEvent("live", GraphView([evil, Triple.of(ATTR, "knows", "Bob")])))
    for i, (mention, sub) in enumerate(((HOSTILE, (evil,)), (ATTR, ()), (HOSTILE, (evil,)))):
        qid = f"q{i}"
        manager.emit_retrieval(
            RetrievalEvent(
                "live",
                qid,
                f"Who does {mention} know?",
                (mention,),
                {mention: mention},
                Subgraph(sub),
                retriever=ATTR,
            )
        )
        manager.emit_generation(GenerationEvent("live", qid, QUOTED, (QUOTED,), {QUOTED: QUOTED}))
    manager.close()
    store.add_scores("triple", {evil.id: 10.0, f"{ATTR}|knows|Bob": -10.0})
    return store


def _only_our_script(html: str) -> None:
    """The page's one script is the package's own, allowed by its hash; nothing else can run."""
    assert html.lower().count("<script") == 1
    assert f"<script>{SCRIPT}</script>" in html
    assert f"script-src {script_hash(SCRIPT)};" in html and "unsafe-inline'; img" in html
    assert "'unsafe-inline'" not in html.split("script-src", 1)[1].split(";", 1)[0]


def test_store_html_escapes_untrusted_text(tmp_path) -> None:
    with _hostile_store(tmp_path) as store:
        report = build_store_report(store, window=2)
    html = store_html(report)
    _only_our_script(html)
    assert HOSTILE_ESCAPED in html  # the query text and the triple id are shown, escaped
    assert "onmouseover=" not in html.replace("onmouseover=&quot;", "")
    assert "<b>Co</b>" not in html
    for svg in re.findall(r"<svg.*?</svg>", html, flags=re.S):
        _svg_ok(svg)
    assert report.groups[0].worst["retrieval_gap"][0].query == f"Who does {ATTR} know?"


def test_compare_html_escapes_untrusted_text() -> None:
    row = CompareRow(HOSTILE, QUOTED, "failed", f"RuntimeError: {HOSTILE}")
    ok = CompareRow(
        "ok",
        ATTR,
        "ok",
        queries=2,
        signatures={"supported": 1, "retrieval_gap": 1},
        rhd={"0": 0.5, "inf": 0.5},
    )
    html = compare_html(CompareResult([row, ok], HOSTILE, 2, 0, 0, notes=[HOSTILE]))
    assert html.lower().count("<script") == 1 and f"<script>{TAB_SCRIPT}</script>" in html  # tabs only
    assert f"script-src {script_hash(TAB_SCRIPT)};" in html
    assert HOSTILE_ESCAPED in html and QUOTED_ESCAPED in html
    assert "onmouseover=" not in html.replace("onmouseover=&quot;", "")


def test_terminal_prints_untrusted_text_literally(tmp_path) -> None:
    with _hostile_store(tmp_path) as store:
        report = build_store_report(store, window=2)
    console = Console(file=io.StringIO(), width=240, record=True)
    render_store_report(report, console)
    text = console.export_text()
    assert HOSTILE in text  # a terminal shows the raw text (the score table lists the triple id)
    row = CompareRow("[bold]x[/bold]", "m", "failed", "[red]boom[/red]")
    console = Console(file=io.StringIO(), width=240, record=True)
    render_compare(CompareResult([row], "c", 0, 0, 0), console)
    out = console.export_text()
    assert "[bold]x[/bold]" in out and "[red]boom[/red]" in out


# --------------------------------------------------------------------------- a short reference run


@pytest.fixture(scope="module")
def reference_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("ref") / "ref.sqlite"
    run_compare(
        embedded_corpus(0, n_questions=4),
        frameworks=["reference"],
        modes=["krag"],
        feedback_rounds=1,
        store=path,
    )
    return path


def test_report_on_a_reference_run(reference_store) -> None:
    with Store.open(reference_store) as store:
        report = build_store_report(store, window=4)
    (group,) = report.groups
    assert group.label == "reference / krag"
    assert len(group.queries) == 8  # 4 questions x (round 0 + 1 feedback round)
    assert sum(group.signatures.values()) == 8
    assert report.graph["reference"]["EC"].value == 1.0
    units = [u.unit for u in report.scores]
    assert len(units) == 1 and units[0].startswith("reference/krag@") and units[0].endswith(":triple")


def test_cli_report(reference_store, tmp_path) -> None:
    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", str(reference_store), "--html", str(out), "--window", "4"])
    assert res.exit_code == 0, res.output
    assert "reference / krag" in res.output
    html = out.read_text(encoding="utf-8")
    assert html.count("<svg") >= 3 and "<table" in html
    _only_our_script(html)
    missing = CliRunner().invoke(app, ["report", str(tmp_path / "nope.sqlite")])
    assert missing.exit_code == 1


# --------------------------------------------------------------------------- the query drill-down


def test_store_html_panels_escape_untrusted_text(tmp_path) -> None:
    with _hostile_store(tmp_path) as store:
        report = build_store_report(store, window=2)
    html = store_html(report)
    panels = embedded_panels(html)
    assert len(panels) == 3  # one per query, packed in an inert template until opened
    assert html.count("<template") == 1
    assert all(HOSTILE not in p and "<b>Co</b>" not in p for p in panels)
    assert any(HOSTILE_ESCAPED in p for p in panels)  # question, grounding and triples shown as text
    assert f'data-ret="{ATTR.replace(chr(34), "&quot;")}"' in html  # the retriever only as an attribute value
    for svg in re.findall(r"<svg.*?</svg>", "".join(panels), flags=re.S):
        _svg_ok(svg)


def test_subgraph_svg_highlights_seeds_and_frames_disconnected_parts() -> None:
    triples = [Triple.of(HOSTILE, "knows", "B"), Triple.of("B", "likes", "C"), Triple.of("X", "near", "Y")]
    svg = subgraph_svg(["Lonely"], triples, seeds=[HOSTILE], gold=["C"], answers=["Y"], uid="t")
    root = _svg_ok(svg)
    ns = "{http://www.w3.org/2000/svg}"
    classes = {g.get("data-node"): g.get("class") for g in root.iter(f"{ns}g") if g.get("data-node")}
    assert classes == {HOSTILE: "node seed", "B": "node other", "C": "node gold", "X": "node other",
                       "Y": "node answer", "Lonely": "node other"}  # fmt: skip
    parts = [g for g in root.iter(f"{ns}g") if g.get("class") == "part"]
    assert len(parts) == 3  # {seed, B, C}, {X, Y}, {Lonely}
    labels = ["".join(t.itertext()) for p in parts for t in p.iter(f"{ns}text")]
    assert labels[0] == "part 1 · 3 nodes" and labels[1].endswith("not connected to a query entity")
    assert HOSTILE not in svg and HOSTILE_ESCAPED in svg
    # radial layers: the seed in the middle of its part, B one ring out, C two rings out
    lay = layout([], triples, [HOSTILE])
    cx, cy, _ = lay.frames[0]
    dist = {n: ((lay.pos[n][0] - cx) ** 2 + (lay.pos[n][1] - cy) ** 2) ** 0.5 for n in (HOSTILE, "B", "C")}
    assert dist[HOSTILE] < dist["B"] < dist["C"]
    assert subgraph_svg(["Lonely"], triples, seeds=[HOSTILE], gold=["C"], answers=["Y"], uid="t") == svg
    one = subgraph_svg([], triples[:2], seeds=[HOSTILE])
    assert 'class="part"' not in one  # a single part gets no frame
    assert "empty" in subgraph_svg([], [])


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory):
    from triage_plugins.apps.demo import run_demo

    path = tmp_path_factory.mktemp("demo") / "demo.sqlite"
    run_demo(seed=0, store=path, feedback_rounds=0)
    return path


def test_query_details_put_silent_failures_first_and_match_the_events(demo_store) -> None:
    with Store.open(demo_store, readonly=True) as store:
        report = build_store_report(store)
        details = report.details
        assert details is not None and details.total == sum(len(g.queries) for g in report.groups)
        verdicts = [d.verdict for d in details.queries]
        ranks = [("silent failure", "wrong", "no gold", "right").index(v) for v in verdicts]
        assert ranks == sorted(ranks) and verdicts[0] == "silent failure"
        for d in details.queries:  # the verdict follows the recorded signature and Hits@1
            hits = d.hits1.value if d.hits1 is not None else None
            if d.verdict == "silent failure":
                assert d.trace.signature == "supported" and hits == 0
            elif d.verdict == "right":
                assert hits is not None and hits > 0
        d = details.queries[0]
        event = store.last_event("retrieval", framework=d.framework, query_id=d.trace.query_id)
        answer = store.last_event("generation", framework=d.framework, query_id=d.trace.query_id)
        assert d.trace.query == event.query and d.triples == event.subgraph.triples
        assert d.gold == event.gold.answers and d.answer == answer.answer
        assert d.answer not in d.gold  # a silent failure: the answer is not gold
        small = load_query_details(store, report.groups, max_queries=5, max_triples=3)
    assert len(small.queries) == 5 and small.queries == small.queries[:5]
    assert [q.key for q in small.queries] == [q.key for q in details.queries[:5]]
    assert all(len(q.triples) <= 3 for q in small.queries)
    assert any("5 of" in n for n in small.notes) and any("more than 3 triples" in n for n in small.notes)
    assert build_store_report(Store.open(demo_store, readonly=True), detail_queries=0).details is None


def test_store_html_of_the_demo_has_tabs_table_and_panels(demo_store) -> None:
    with Store.open(demo_store, readonly=True) as store:
        report = build_store_report(store, detail_queries=180, detail_triples=30)
    html = store_html(report)
    _only_our_script(html)
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    for tab in ("overview", "queries", "chains", "graph", "scores"):
        assert f'class="tabpane" id="{tab}"' in html
    panels = embedded_panels(html)
    assert len(panels) == 180 and html.count('<tr data-p="') == 180
    assert [re.search(r'data-key="([^"]+)"', p).group(1) for p in panels] == [
        d.key for d in report.details.queries
    ]
    assert re.search(r'<tr data-p="0"[^>]*data-verdict="silent failure"', html)
    embedded = {d.key for d in report.details.queries}
    worst = {
        f"{g.framework}/{g.retriever}/{q.query_id}"
        for g in report.groups
        for w in g.worst.values()
        for q in w
    }
    linked = worst & embedded
    assert linked  # the chains tab links its worst queries to their panels
    assert all(f'href="#q={key}"' in html for key in linked)
    assert "180 of 376 queries embedded" in html


def test_the_demo_report_with_every_query_panel_stays_under_3_mb(demo_store) -> None:
    """All queries embedded (at most 500), each with its subgraph drawing: the page is packed, not cut."""
    with Store.open(demo_store, readonly=True) as store:
        report = build_store_report(store)
    html = store_html(report)
    queries = report.details.queries
    assert len(queries) == report.details.total > 300  # nothing left out to make the bound
    panels = embedded_panels(html)
    assert len(panels) == len(queries) and sum(p.count("<svg") for p in panels) >= len(queries) - 10
    unpacked = len(html) + sum(len(p) for p in panels)
    assert unpacked > 6_000_000  # what the page would weigh with the panels inline
    assert len(html.encode("utf-8")) <= 3_000_000


def test_every_node_label_and_the_legend_lie_inside_the_svg_view_box() -> None:
    ns = "{http://www.w3.org/2000/svg}"
    for triples in ([Triple.of("A", "r", "B")], [Triple.of("A", "r", "B"), Triple.of("X", "near", "Y")]):
        root = _svg_ok(subgraph_svg([], triples, seeds=["A"]))
        _, _, w, h = (float(v) for v in root.get("viewBox").split())
        for c in root.iter(f"{ns}circle"):
            x, y, r = float(c.get("cx")), float(c.get("cy")), float(c.get("r"))
            assert x - r >= 0 and x + r <= w and y - r >= 0 and y + r <= h, (x, y, w, h)
        for t in root.iter(f"{ns}text"):  # left-aligned labels (legend, part frames): ~0.6 em a character
            if t.get("text-anchor") is None:
                em = 0.6 * float(t.get("font-size"))
                for line in (t.text or "", *(s.text or "" for s in t)):
                    assert float(t.get("x")) + em * len(line) <= w, (line, w)
