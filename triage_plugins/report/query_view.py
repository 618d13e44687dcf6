"""The store report's "Queries" tab: a sortable, filterable table of the embedded queries (silent
failures first) and, per query, a panel with what it asked, retrieved and answered.

The rows and panels are rendered here, escaped like everything else (:mod:`triage_plugins.report.html`);
the panels are packed (gzip, base64) in one inert ``<template>`` and unpacked when a row is first clicked,
which keeps a 500-query page near 2 MB instead of 12 MB. :data:`SCRIPT`, the page's only
script, shows one tab at a time, sorts and filters the table and opens panels (``#q=<query id>`` or
``#q=<framework>/<retriever>/<query id>`` in the address opens one directly); without it every tab
shows and the table still reads.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import TYPE_CHECKING
from urllib.parse import quote

from triage_plugins.report.data import CHAIN_METRICS, VERDICTS
from triage_plugins.report.html import Safe, cell, esc, metric_cell, number, table
from triage_plugins.report.subgraph_svg import subgraph_svg

if TYPE_CHECKING:
    from triage_plugins.report.data import QueryDetail, QueryDetails

__all__ = ["PANELS_ID", "SCRIPT", "embedded_panels", "panel_href", "queries_tab"]

PANELS_ID = "panels"

_VERDICT_CLS = {"silent failure": "v-silent", "wrong": "v-wrong", "no gold": "v-nogold", "right": "v-right"}
_STATUS_CLS = {"pass": "good", "fail": "bad", "n/a": "na", "not reached": "muted"}
_COLUMNS = ["verdict", "signature", "framework", "retriever", "query id", "question", "failing link",
            "Hits@1", "answer", "gold answers", "triples"]  # fmt: skip
_NUMERIC = {7, 10}


def panel_href(key: str) -> str:
    """The address fragment that opens a query's panel."""
    return "#q=" + quote(key, safe="/")


def _verdict_tag(v: str) -> Safe:
    return cell(v, cls=f"tag {_VERDICT_CLS[v]}")


def _short(text: str | None, n: int = 90) -> str:
    if text is None:
        return "–"
    return text if len(text) <= n else text[: n - 1] + "…"


def _row(i: int, d: QueryDetail) -> Safe:
    t = d.trace
    failed = t.failed
    hits = d.hits1
    values: list[tuple[object, str | None]] = [
        (_verdict_tag(d.verdict), str(VERDICTS.index(d.verdict))),
        (t.signature or "undetermined", None),
        (d.framework, None),
        (d.retriever, None),
        (t.query_id, None),
        (cell(_short(t.query), title=t.query), None),
        (f"{failed.metric} = {number(failed.value)}" if failed is not None else "–", None),
        (metric_cell(hits, 0), "" if hits is None or hits.value is None else f"{hits.value:g}"),
        (cell(_short(d.answer, 40), title=d.answer), None),
        ("–" if d.gold is None else ", ".join(d.gold), None),
        (len(d.triples), str(d.triples_total)),
    ]
    tds = "".join(
        f"<td{' class=num' if j in _NUMERIC else ' class=q' if j == 5 else ''}"
        + (f' data-v="{esc(v)}"' if v is not None else "")
        + f">{esc(text)}</td>"
        for j, (text, v) in enumerate(values)
    )
    attrs = {"p": str(i), "key": d.key, "qid": t.query_id, "fw": d.framework, "ret": d.retriever,
             "sig": t.signature or "undetermined", "verdict": d.verdict}  # fmt: skip
    data = "".join(f' data-{k}="{esc(v)}"' for k, v in attrs.items())
    return Safe(f"<tr{data}>{tds}</tr>")


def _select(ident: str, label: str, values: list[str]) -> Safe:
    opts = '<option value="">all</option>' + "".join(
        f'<option value="{esc(v)}">{esc(v)}</option>' for v in values
    )
    return Safe(f'<label>{esc(label)} <select id="{esc(ident)}">{opts}</select></label>')


def _filters(details: QueryDetails) -> Safe:
    qs = details.queries
    verdicts = [v for v in VERDICTS if any(d.verdict == v for d in qs)]
    return Safe(
        '<div class="filters">'
        + _select("f-verdict", "verdict", verdicts)
        + _select("f-fw", "framework", sorted({d.framework for d in qs}))
        + _select("f-ret", "retriever", sorted({d.retriever for d in qs}))
        + _select("f-sig", "signature", sorted({d.trace.signature or "undetermined" for d in qs}))
        + '<label>text <input id="f-text" type="search" placeholder="question, answer, id…"></label>'
        + f'<span id="f-count" class="note">{len(qs)} of {len(qs)} queries</span></div>'
    )


def _kv(pairs: list[tuple[str, object]]) -> Safe:
    return Safe(
        '<dl class="kv">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>"
    )


def _chain_table(d: QueryDetail) -> Safe:
    return table(
        ["link", "value", "θ", "status", "meaning / reason"],
        [
            [s.metric, number(s.value), f"{s.threshold:.2f}", cell(s.status, cls=_STATUS_CLS[s.status]),
             s.meaning if s.status == "fail" else (s.reason or "")]
            for s in d.trace.steps
        ],
        numeric=(1, 2),
    )  # fmt: skip


def _other_metrics(d: QueryDetail) -> Safe:
    names = [n for n in d.trace.metrics if n not in CHAIN_METRICS]
    if not names:
        return Safe("")
    return table(names, [[metric_cell(d.trace.metrics[n]) for n in names]], numeric=range(len(names)))


def _triples_table(d: QueryDetail) -> Safe:
    gold, seeds = set(d.gold or ()), set(d.seeds)

    def mark(node: str) -> Safe:
        cls = "good" if node in gold else "bad" if node in seeds else None
        return cell(
            node, cls=cls, title="gold answer" if node in gold else "query entity" if node in seeds else None
        )

    rows = [[mark(t.subject), t.predicate, mark(t.object)] for t in d.triples]
    cut = f" (first {len(d.triples)} of {d.triples_total})" if d.triples_total > len(d.triples) else ""
    return table(["subject", "predicate", "object"], rows, caption=f"Retrieved triples{cut}")


def _chunks(d: QueryDetail) -> Safe:
    if not d.chunks:
        return Safe('<p class="note">No chunk retrieved.</p>')
    cut = f" (first {len(d.chunks)} of {d.chunks_total})" if d.chunks_total > len(d.chunks) else ""
    items = "".join(
        f'<p class="note">{esc(cid)}</p><pre class="trace">{esc(text)}</pre>' for cid, text in d.chunks
    )
    return Safe(f"<h4>Retrieved chunks{esc(cut)}</h4>{items}")


def _graph(d: QueryDetail, i: int) -> Safe:
    gold = set(d.gold or ())
    drawn = set(d.nodes)
    missing_gold = [g for g in d.gold or () if g not in drawn]
    missing_seed = [s for s in d.seeds if s not in drawn]
    notes = [f"{len(d.nodes)} nodes, {len(d.triples)} triples drawn"]
    if d.triples_total > len(d.triples):
        notes.append(f"{d.triples_total - len(d.triples)} more triples not drawn (cut at {len(d.triples)})")
    if missing_gold:
        notes.append("gold answers not in the subgraph: " + ", ".join(missing_gold))
    if missing_seed:
        notes.append("query entities not in the subgraph: " + ", ".join(missing_seed))
    svg = subgraph_svg(d.nodes, d.triples, seeds=d.seeds, gold=gold, answers=d.answer_nodes, uid=f"p{i}")
    zoom = ('<div class="zoom"><button type="button" data-zoom="1.25">zoom +</button>'
            '<button type="button" data-zoom="0.8">zoom −</button>'
            '<button type="button" data-zoom="0">fit</button></div>')  # fmt: skip
    return Safe(
        f"<h4>Retrieved subgraph</h4>{zoom}<div class=svgbox>{svg}</div><p class=note>{esc('; '.join(notes))}.</p>"
    )


def _panel(i: int, d: QueryDetail) -> Safe:
    t = d.trace
    head = (
        f'<h3>{_verdict_tag(d.verdict)} {cell(t.query_id)} <span class="muted">{cell(d.framework)} / '
        f"{cell(d.retriever)} · {cell(t.signature or 'undetermined')}</span></h3>"
    )
    grounding = ", ".join(f"{m} → {n or '∅ (not grounded)'}" for m, n in d.grounding.items()) or "–"
    facts = _kv([
        ("question", t.query or "(query text not recorded)"),
        ("answer", d.answer if d.answer is not None else "(no generation event)"),
        ("gold answers", ", ".join(d.gold) if d.gold else "(no gold)"),
        ("Hits@1", metric_cell(d.hits1, 0)),
        ("mentions → nodes", grounding),
    ])  # fmt: skip
    parts = [head, facts, Safe("<h4>Chain</h4>"), _chain_table(d), _other_metrics(d), _graph(d, i),
             _triples_table(d), _chunks(d)]  # fmt: skip
    return Safe(f'<div class="panel" data-key="{esc(d.key)}">{"".join(parts)}</div>')


def _packed_panels(qs: list[QueryDetail]) -> Safe:
    """Every panel's markup as a JSON list, gzipped and base64-encoded in one inert ``<template>``: the
    panels are ~95 % of the page and compress about tenfold; the script unpacks them on first use."""
    data = json.dumps([_panel(i, d) for i, d in enumerate(qs)], ensure_ascii=False, separators=(",", ":"))
    packed = base64.b64encode(gzip.compress(data.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")
    return Safe(f'<template id="{PANELS_ID}" data-encoding="gzip+base64 JSON">{packed}</template>')


def embedded_panels(page: str) -> list[str]:
    """The panels packed in a store report page (``[]`` when it has none), in table order (``data-p``)."""
    start = page.find(f'<template id="{PANELS_ID}"')
    if start < 0:
        return []
    body = page[page.index(">", start) + 1 : page.index("</template>", start)]
    return json.loads(gzip.decompress(base64.b64decode(body)).decode("utf-8"))


def queries_tab(details: QueryDetails | None) -> list[object]:
    """The filters, the table and the hidden panels (``[]`` parts and a note when nothing was loaded)."""
    if details is None or not details.queries:
        return [
            Safe('<p class="note">No query to show (no per-query metric rows, or details not loaded).</p>')
        ]
    qs = details.queries
    head = "".join(
        f'<th data-sort="{j}" data-type="{"num" if j in _NUMERIC or j == 0 else "text"}"'
        f"{' class=num' if j in _NUMERIC else ''}>{esc(h)}</th>"
        for j, h in enumerate(_COLUMNS)
    )
    rows = "".join(_row(i, d) for i, d in enumerate(qs))
    grid = (
        f'<div class="qview"><div class="qscroll"><table class="data" id="qtable"><thead><tr>{head}</tr></thead>'
        f'<tbody>{rows}</tbody></table></div><div id="qpanel"><p class="note">Click a query to see what it '
        "retrieved and answered.</p></div></div>"
    )
    notes = [Safe(f'<p class="note">{cell(n)}</p>') for n in details.notes]
    return [_filters(details), *notes, Safe(grid), _packed_panels(list(qs))]


SCRIPT = r"""(function(){
"use strict";
var doc=document;doc.documentElement.classList.add("js");
var panes=[].slice.call(doc.querySelectorAll(".tabpane"));
var links=[].slice.call(doc.querySelectorAll("nav a[data-tab]"));
function showTab(name){panes.forEach(function(p){p.hidden=p.dataset.tab!==name;});
 links.forEach(function(a){a.classList.toggle("on",a.dataset.tab===name);});}
var table=doc.getElementById("qtable"),panel=doc.getElementById("qpanel");
var body=table?table.tBodies[0]:null;
var rows=body?[].slice.call(body.rows).filter(function(r){return r.dataset.key;}):[];
function find(key){for(var i=0;i<rows.length;i++){if(rows[i].dataset.key===key)return rows[i];}
 for(i=0;i<rows.length;i++){if(rows[i].dataset.qid===key)return rows[i];}return null;}
var packed=doc.getElementById("panels"),unpacked=null;
function unpack(){if(!unpacked){var bin=atob(packed.content.textContent.trim()),u=new Uint8Array(bin.length);
 for(var i=0;i<bin.length;i++)u[i]=bin.charCodeAt(i);
 unpacked=new Response(new Blob([u]).stream().pipeThrough(new DecompressionStream("gzip"))).text().then(JSON.parse);}
 return unpacked;}
function openRow(r){if(!packed||!panel)return;
 rows.forEach(function(x){x.classList.toggle("sel",x===r);});
 r.scrollIntoView({block:"nearest"});
 unpack().then(function(list){if(!r.classList.contains("sel"))return;var t=doc.createElement("template");
  t.innerHTML=list[+r.dataset.p];panel.replaceChildren(t.content);});}
function route(){var h="";try{h=decodeURIComponent(location.hash.slice(1));}catch(e){h="";}
 if(h.indexOf("q=")===0){showTab("queries");var r=find(h.slice(2));if(r)openRow(r);return;}
 var el=h?doc.getElementById(h):null;var pane=el?el.closest(".tabpane"):null;
 if(pane){showTab(pane.dataset.tab);if(!el.classList.contains("tabpane"))el.scrollIntoView();return;}
 showTab(panes.length?panes[0].dataset.tab:"");}
window.addEventListener("hashchange",route);
if(body){body.addEventListener("click",function(ev){var r=ev.target.closest("tr");
 if(!r||!r.dataset.key)return;var h="#q="+encodeURIComponent(r.dataset.key);
 if(location.hash===h)openRow(r);else location.hash=h;});}
var f={verdict:"f-verdict",fw:"f-fw",ret:"f-ret",sig:"f-sig"};
function apply(){var text=(doc.getElementById("f-text")||{}).value||"";text=text.toLowerCase();var n=0;
 rows.forEach(function(r){var ok=true;for(var k in f){var s=doc.getElementById(f[k]);
  if(s&&s.value&&r.dataset[k]!==s.value)ok=false;}
  if(ok&&text&&r.textContent.toLowerCase().indexOf(text)<0)ok=false;r.hidden=!ok;if(ok)n++;});
 var c=doc.getElementById("f-count");if(c)c.textContent=n+" of "+rows.length+" queries";}
["f-verdict","f-fw","f-ret","f-sig","f-text"].forEach(function(id){var el=doc.getElementById(id);
 if(el){el.addEventListener("input",apply);el.addEventListener("change",apply);}});
if(table){[].slice.call(table.tHead.rows[0].cells).forEach(function(th){th.addEventListener("click",function(){
 var j=+th.dataset.sort,num=th.dataset.type==="num",dir=th.getAttribute("aria-sort")==="ascending"?-1:1;
 [].slice.call(th.parentNode.cells).forEach(function(x){x.removeAttribute("aria-sort");});
 th.setAttribute("aria-sort",dir>0?"ascending":"descending");
 function val(r){var c=r.cells[j];var v=c.dataset.v!==undefined?c.dataset.v:c.textContent;
  if(!num)return v.toLowerCase();return v===""?Infinity:parseFloat(v);}
 rows.slice().sort(function(a,b){var x=val(a),y=val(b);return (x<y?-1:x>y?1:(+a.dataset.p)-(+b.dataset.p))*dir;})
  .forEach(function(r){body.appendChild(r);});});});}
if(panel){panel.addEventListener("click",function(ev){var b=ev.target.closest("button[data-zoom]");if(!b)return;
 var svg=panel.querySelector("svg.subgraph");if(!svg)return;
 var w0=+svg.getAttribute("viewBox").split(" ")[2],h0=+svg.getAttribute("viewBox").split(" ")[3];
 var z=+b.dataset.zoom,cur=svg.getBoundingClientRect().width/w0;var k=z?cur*z:Math.min(1,(svg.parentNode.clientWidth-4)/w0);
 if(z)svg.setAttribute("data-zoomed","");else svg.removeAttribute("data-zoomed");
 svg.setAttribute("width",Math.round(w0*k));svg.setAttribute("height",Math.round(h0*k));});}
route();
})();"""
