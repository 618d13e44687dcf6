"""Self-contained HTML building blocks: one file, inline CSS and SVG, no external fetch; a page may
carry one inline script of its own (allowed by its hash in the Content-Security-Policy, so no other
script can run).

Escaping is structural: :func:`table`, :func:`section` and :func:`page` escape every ``str`` they are
given; only :class:`Safe` values (markup built here or by :mod:`triage_plugins.report.plots`, whose
own text is escaped) pass through unchanged. Entity names, query texts and triple ids come from
documents and are untrusted, so they are always handed over as plain ``str``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
from collections.abc import Iterable, Sequence

from triage_plugins.metrics.result import MetricResult

__all__ = [
    "HTML_MARKER",
    "Safe",
    "cell",
    "details",
    "esc",
    "figures",
    "metric_cell",
    "number",
    "page",
    "row",
    "script_hash",
    "section",
    "table",
    "wide",
]

HTML_MARKER = '<meta name="generator" content="triage-plugins">'
"""In the head of every HTML page triage writes (:func:`page`): what tells a previous report, which
``--html`` may replace, from any other file (:mod:`triage_plugins.apps.paths` looks for it)."""


class Safe(str):
    """Markup that is already escaped (built by this package); passed through as is."""

    __slots__ = ()


def esc(value: object) -> Safe:
    """Escape any value for HTML text or a quoted attribute; :class:`Safe` values are kept."""
    if isinstance(value, Safe):
        return value
    return Safe(html.escape("" if value is None else str(value), quote=True))


def number(value: float | None, digits: int = 3, *, na: str = "N/A") -> str:
    """A value for a table cell: fixed digits, ``∞`` for infinity, ``na`` for ``None``."""
    if value is None:
        return na
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if isinstance(value, int) or float(value).is_integer() and abs(value) >= 10:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


def cell(text: object, *, title: object | None = None, cls: str | None = None) -> Safe:
    """A ``<span>`` with an optional tooltip and class (both escaped)."""
    attrs = ""
    if cls:
        attrs += f' class="{esc(cls)}"'
    if title:
        attrs += f' title="{esc(title)}"'
    return Safe(f"<span{attrs}>{esc(text)}</span>")


def metric_cell(result: MetricResult | None, digits: int = 3) -> Safe:
    """A metric for a table: its value, or ``N/A`` with the reason as a tooltip (never 0)."""
    if result is None:
        return cell("–", cls="muted")
    if result.value is None:
        return cell("N/A", title=result.reason or "undefined", cls="na")
    return cell(number(result.value, digits), title=result.reason)


def table(
    headers: Sequence[object],
    rows: Iterable[Sequence[object]],
    *,
    numeric: Iterable[int] = (),
    caption: str | None = None,
    cls: str = "data",
) -> Safe:
    """An HTML table; every cell is escaped unless it is :class:`Safe`. ``numeric`` columns align right."""
    right = set(numeric)
    out = [f'<table class="{esc(cls)}">']
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append("<thead><tr>")
    out.extend(f"<th{' class=num' if i in right else ''}>{esc(h)}</th>" for i, h in enumerate(headers))
    out.append("</tr></thead><tbody>")
    n = 0
    for values in rows:
        n += 1
        out.append("<tr>")
        out.extend(f"<td{' class=num' if i in right else ''}>{esc(v)}</td>" for i, v in enumerate(values))
        out.append("</tr>")
    if n == 0:
        out.append(f'<tr><td colspan="{len(headers)}" class="muted">no rows</td></tr>')
    out.append("</tbody></table>")
    return Safe("".join(out))


def wide(content: object) -> Safe:
    """``content`` (escaped unless :class:`Safe`) in a box that scrolls sideways when wider than the page."""
    return Safe(f'<div class="wrap">{esc(content)}</div>')


def section(title: str, *parts: object, anchor: str | None = None, intro: str | None = None) -> Safe:
    """A titled section; ``parts`` are escaped unless :class:`Safe`."""
    ident = f' id="{esc(anchor)}"' if anchor else ""
    lead = f'<p class="intro">{esc(intro)}</p>' if intro else ""
    return Safe(f"<section{ident}><h2>{esc(title)}</h2>{lead}{''.join(esc(p) for p in parts)}</section>")


def details(summary: str, *parts: object, open_: bool = False) -> Safe:
    """A collapsible ``<details>`` block (native HTML, no script)."""
    flag = " open" if open_ else ""
    return Safe(f"<details{flag}><summary>{esc(summary)}</summary>{''.join(esc(p) for p in parts)}</details>")


def figures(*svgs: str) -> Safe:
    """Plots side by side, wrapping on narrow screens."""
    return Safe('<div class="figs">' + "".join(f"<figure>{s}</figure>" for s in svgs) + "</div>")


def row(*parts: object) -> Safe:
    """Blocks (tables, figures) side by side, wrapping on narrow screens."""
    return Safe('<div class="row">' + "".join(f"<div>{esc(p)}</div>" for p in parts) + "</div>")


_CSS = """
:root{--ink:#1f2328;--muted:#6e7781;--line:#d8dee4;--bg:#f6f8fa;--accent:#4269d0}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);background:#fff}
header{background:var(--bg);border-bottom:1px solid var(--line);padding:18px 32px}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:0;color:var(--muted)}
nav{margin-top:8px;font-size:13px;display:flex;flex-wrap:wrap;gap:4px 14px}
nav a{color:var(--accent);text-decoration:none}
main{padding:8px 32px 40px;max-width:1400px}
section{margin-top:26px}
h2{font-size:18px;border-bottom:1px solid var(--line);padding-bottom:4px;margin:0 0 10px}
h3{font-size:15px;margin:16px 0 6px}
p.intro{color:var(--muted);margin:0 0 10px;max-width:980px}
table.data{border-collapse:collapse;margin:6px 0 14px;font-size:13px}
table.data caption{text-align:left;font-weight:600;padding:4px 0}
table.data th,table.data td{border:1px solid var(--line);padding:4px 8px;vertical-align:top}
table.data th{background:var(--bg);text-align:left;font-weight:600;white-space:nowrap}
table.data td:first-child{min-width:9em;max-width:24em;overflow-wrap:break-word}
details.setup{max-width:36em;margin:0}details.setup summary{font-weight:400}
.row{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}
.row>div{max-width:100%;min-width:0}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.wrap{overflow-x:auto}
.na{color:#9a6700}
.muted{color:var(--muted)}
.bad{color:#cf222e;font-weight:600}
.good{color:#1a7f37;font-weight:600}
.tag{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;color:#fff}
.figs{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start;margin:6px 0 12px}
figure{margin:0;padding:8px;border:1px solid var(--line);border-radius:6px;background:#fff;max-width:100%}
figure>svg{max-width:100%;height:auto}
details{margin:6px 0}
summary{cursor:pointer;font-weight:600}
pre.trace{background:var(--bg);border:1px solid var(--line);padding:8px;font-size:12px;white-space:pre-wrap;margin:4px 0 10px}
ul.levers{margin:4px 0 10px 18px;padding:0}
.note{color:var(--muted);font-size:13px}
footer{color:var(--muted);font-size:12px;padding:16px 32px;border-top:1px solid var(--line)}
nav a.on{font-weight:700;border-bottom:2px solid var(--accent)}
html.js .tabpane[hidden]{display:none}
.qview{display:grid;grid-template-columns:minmax(0,1.15fr) minmax(0,1fr);gap:16px;align-items:start}
@media (max-width:1100px){.qview{grid-template-columns:minmax(0,1fr)}}
.qscroll{max-height:78vh;overflow:auto;border:1px solid var(--line)}
.qscroll table.data{margin:0}
.qscroll th{position:sticky;top:0;z-index:1;cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" ▲"}
th[aria-sort=descending]::after{content:" ▼"}
#qtable tbody tr{cursor:pointer}
#qtable tbody tr:hover{background:#f0f4ff}
#qtable tbody tr.sel{background:#dbe6ff}
#qtable td{white-space:nowrap}
#qtable td.q{white-space:normal;min-width:240px;max-width:360px}
.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:center;margin:6px 0 10px;font-size:13px}
.filters select,.filters input{font:inherit;padding:2px 4px}
#qpanel{position:sticky;top:8px;max-height:92vh;overflow:auto;border:1px solid var(--line);border-radius:6px;padding:10px 14px}
.v-silent{background:#cf222e}.v-wrong{background:#bc4c00}.v-nogold{background:#6e7781}.v-right{background:#1a7f37}
.svgbox{overflow:auto;max-height:70vh;border:1px solid var(--line);border-radius:6px;margin:6px 0}
.svgbox svg.subgraph:not([data-zoomed]){display:block;max-width:100%;max-height:68vh;height:auto}
.zoom button{font:inherit;margin-right:4px}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}
dl.kv dt{color:var(--muted)}dl.kv dd{margin:0}
"""


def script_hash(script: str) -> str:
    """The CSP source that allows exactly this inline script (``'sha256-…'``)."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def page(
    title: str,
    subtitle: str,
    sections: Sequence[object],
    *,
    nav: Sequence[tuple[str, str]] = (),
    script: str | None = None,
) -> str:
    """The whole document: inline CSS, no external resource (works offline). ``script`` (this package's
    own code, never built from data) is inlined and allowed by its hash; with none, no script runs.
    Nav links carry ``data-tab`` (their anchor) for a script that shows one tab at a time."""
    links = "".join(
        f'<a href="#{esc(anchor)}" data-tab="{esc(anchor)}">{esc(label)}</a>' for anchor, label in nav
    )
    body = "".join(esc(s) for s in sections)
    allow = f" script-src {script_hash(script)};" if script else ""
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8">{HTML_MARKER}'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\';{allow} '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p>"
        + (f"<nav>{links}</nav>" if links else "")
        + f"</header><main>{body}</main>"
        "<footer>Generated by triage-plugins. TRIAGE metrics (arXiv 2607.03447) and EvoRAG contribution "
        "scores (arXiv 2604.15676). N/A means undefined for the data, never zero: hover it for the reason."
        "</footer>" + (f"<script>{script}</script>" if script else "") + "</body></html>\n"
    )
