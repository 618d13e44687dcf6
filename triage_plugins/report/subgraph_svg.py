"""A drawing of one query's retrieved subgraph K_S as inline SVG, laid out in Python (no script).

Each connected part is drawn on its own, in radial layers: the query entities (the nodes the
mentions grounded to, TRIAGE §4.3.1) in the middle, their neighbours one hop out, and so on, so the
hop distance of an answer from the query (RHD, eq. 33) reads off the rings. A part that holds no
query entity is rooted at its highest-degree node and framed as "not connected to a query entity".
The layout is deterministic (same subgraph, same picture). Every name is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from triage_plugins.contract.events import Triple
from triage_plugins.report.html import Safe, esc

__all__ = ["Layout", "layout", "subgraph_svg"]

RING = 100.0  # px between layers
SPACING = 40.0  # px of arc per node on a ring
NODE_R = 7.0
MARGIN = 58.0  # room for labels around a part
WIDTH = 900.0
LABEL_CHARS = 18

_FILL = {"seed": "#e8590c", "gold": "#1a7f37", "answer": "#4269d0", "other": "#adb5bd"}


@dataclass(frozen=True, slots=True)
class Layout:
    """Node positions, the parts (node lists, seeded parts first), their frames and the canvas size."""

    pos: dict[str, tuple[float, float]]
    parts: list[list[str]]
    frames: list[tuple[float, float, float]]  # centre x, centre y, half side
    width: float
    height: float


def _adjacency(nodes: Sequence[str], triples: Iterable[Triple]) -> dict[str, list[str]]:
    adj: dict[str, list[str]] = {n: [] for n in nodes}
    for t in triples:
        adj.setdefault(t.subject, [])
        adj.setdefault(t.object, [])
        if t.object not in adj[t.subject] and t.subject != t.object:
            adj[t.subject].append(t.object)
            adj[t.object].append(t.subject)
    return adj


def _parts(adj: dict[str, list[str]], seeds: Sequence[str]) -> list[list[str]]:
    """Connected parts: those holding a query entity first, then larger before smaller, then by name."""
    seen: set[str] = set()
    parts: list[list[str]] = []
    for start in [*(s for s in seeds if s in adj), *sorted(adj)]:
        if start in seen:
            continue
        seen.add(start)
        part, queue = [start], [start]
        while queue:
            for nxt in sorted(adj[queue.pop(0)]):
                if nxt not in seen:
                    seen.add(nxt)
                    part.append(nxt)
                    queue.append(nxt)
        parts.append(part)
    seeded = set(seeds)
    parts.sort(key=lambda p: (not seeded.intersection(p), -len(p), min(p)))
    return parts


def _rings(part: list[str], adj: dict[str, list[str]], seeds: Sequence[str]) -> list[list[str]]:
    """BFS layers from the part's query entities (or its highest-degree node)."""
    roots = [s for s in dict.fromkeys(seeds) if s in part] or [min(part, key=lambda n: (-len(adj[n]), n))]
    layer, seen, rings = roots, set(roots), []
    while layer:
        rings.append(layer)
        nxt = sorted({m for n in layer for m in adj[n] if m not in seen})
        seen.update(nxt)
        layer = nxt
    return rings


def _place(rings: list[list[str]], adj: dict[str, list[str]]) -> tuple[dict[str, tuple[float, float]], float]:
    """Positions around (0, 0) and the part's radius; within a ring, nodes follow their parents' angle."""
    pos: dict[str, tuple[float, float]] = {}
    angle: dict[str, float] = {}
    radius = 0.0
    for k, ring in enumerate(rings):
        if k == 0 and len(ring) == 1:
            pos[ring[0]], angle[ring[0]] = (0.0, 0.0), 0.0
            continue
        radius = max(radius + RING if k else RING / 2, len(ring) * SPACING / (2 * math.pi))

        def parent_angle(n: str) -> tuple[float, str]:
            parents = [angle[m] for m in adj[n] if m in angle]
            return (sum(parents) / len(parents) if parents else 0.0, n)

        ordered = sorted(ring, key=parent_angle) if k else ring
        for i, n in enumerate(ordered):
            a = 2 * math.pi * i / len(ordered) - math.pi / 2
            angle[n] = (a + math.pi / 2) % (2 * math.pi)
            pos[n] = (radius * math.cos(a), radius * math.sin(a))
    return pos, radius


def layout(nodes: Sequence[str], triples: Sequence[Triple], seeds: Sequence[str] = ()) -> Layout:
    """Place every node: parts packed left to right in rows of at most :data:`WIDTH` px."""
    adj = _adjacency(nodes, triples)
    parts = _parts(adj, seeds)
    pos: dict[str, tuple[float, float]] = {}
    frames: list[tuple[float, float, float]] = []
    x = y = row_h = width = 0.0
    for part in parts:
        local, radius = _place(_rings(part, adj, seeds), adj)
        half = radius + MARGIN
        if x > 0 and x + 2 * half > WIDTH:
            x, y, row_h = 0.0, y + row_h, 0.0
        cx, cy = x + half, y + half + 16
        pos.update({n: (round(cx + px, 1), round(cy + py, 1)) for n, (px, py) in local.items()})
        frames.append((cx, cy, half))
        x += 2 * half
        row_h = max(row_h, 2 * half + 16)
        width = max(width, x)
    return Layout(pos, parts, frames, max(width, 320.0), y + row_h + 28)


def _short(name: str) -> str:
    return name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"


def _edges(
    triples: Sequence[Triple], pos: dict[str, tuple[float, float]], labels: bool, uid: str
) -> list[str]:
    out = []
    for t in triples:
        (x1, y1), (x2, y2) = pos[t.subject], pos[t.object]
        tip = f"{t.subject} —{t.predicate}→ {t.object}"
        if t.subject == t.object:
            line = f'<circle cx="{x1}" cy="{y1 - NODE_R - 6}" r="7" fill="none" stroke="#8c959f"/>'
        else:
            d = math.hypot(x2 - x1, y2 - y1) or 1.0
            ex, ey = x2 - (x2 - x1) * (NODE_R + 2) / d, y2 - (y2 - y1) * (NODE_R + 2) / d
            line = (
                f'<line x1="{x1}" y1="{y1}" x2="{ex:.1f}" y2="{ey:.1f}" stroke="#8c959f" '
                f'marker-end="url(#arr-{esc(uid)})"/>'
            )
        text = ""
        if labels and t.subject != t.object:
            text = (
                f'<text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2 - 3:.1f}" font-size="9" fill="#6e7781" '
                f'text-anchor="middle">{esc(_short(t.predicate))}</text>'
            )
        out.append(f'<g class="edge" data-triple="{esc(t.id)}"><title>{esc(tip)}</title>{line}{text}</g>')
    return out


def _role(node: str, seeds: set[str], gold: set[str], answers: set[str]) -> str:
    if node in seeds:
        return "seed"
    if node in gold:
        return "gold"
    return "answer" if node in answers else "other"


def _nodes(lay: Layout, seeds: set[str], gold: set[str], answers: set[str]) -> list[str]:
    out = []
    for node, (x, y) in lay.pos.items():
        role = _role(node, seeds, gold, answers)
        ring = ' stroke="#1a7f37" stroke-width="3"' if node in gold and role != "gold" else ' stroke="#fff"'
        tags = [t for t, on in (("query entity", node in seeds), ("gold answer", node in gold),
                                ("answer", node in answers)) if on]  # fmt: skip
        tip = node + (f" ({', '.join(tags)})" if tags else "")
        out.append(
            f'<g class="node {role}" data-node="{esc(node)}"><title>{esc(tip)}</title>'
            f'<circle cx="{x}" cy="{y}" r="{NODE_R + (2 if role == "seed" else 0)}" fill="{_FILL[role]}"{ring}/>'
            f'<text x="{x}" y="{y + NODE_R + 11:.1f}" font-size="10" text-anchor="middle">{esc(_short(node))}</text></g>'
        )
    return out


def _frames(lay: Layout, seeds: set[str]) -> list[str]:
    if len(lay.parts) < 2:
        return []
    out = []
    for i, (part, (cx, cy, half)) in enumerate(zip(lay.parts, lay.frames, strict=True), 1):
        # the "not connected" note goes on a second line: one line is wider than a small part's frame
        alone = (
            ""
            if seeds.intersection(part)
            else f'<tspan x="{cx - half + 10:.1f}" dy="12">not connected to a query entity</tspan>'
        )
        out.append(
            f'<g class="part"><rect x="{cx - half + 3:.1f}" y="{cy - half - 12:.1f}" width="{2 * half - 6:.1f}" '
            f'height="{2 * half + 8:.1f}" rx="8" fill="none" stroke="#d8dee4" stroke-dasharray="4 3"/>'
            f'<text x="{cx - half + 10:.1f}" y="{cy - half + 1:.1f}" font-size="10" fill="#6e7781">'
            f"part {i} · {len(part)} nodes{alone}</text></g>"
        )
    return out


_LEGEND = (
    ("seed", "query entity"),
    ("gold", "gold answer"),
    ("answer", "answer (not gold)"),
    ("other", "other"),
)
LEGEND_WIDTH = 8 + sum(24 + 7 * len(label) for _, label in _LEGEND)  # px the legend needs


def _legend(y: float) -> str:
    parts, x = [], 8.0
    for role, label in _LEGEND:
        parts.append(
            f'<circle cx="{x + 6}" cy="{y}" r="6" fill="{_FILL[role]}"/>'
            f'<text x="{x + 16}" y="{y + 4}" font-size="11">{esc(label)}</text>'
        )
        x += 24 + 7 * len(label)
    return '<g class="legend">' + "".join(parts) + "</g>"


def subgraph_svg(
    nodes: Sequence[str],
    triples: Sequence[Triple],
    *,
    seeds: Iterable[str] = (),
    gold: Iterable[str] = (),
    answers: Iterable[str] = (),
    uid: str = "g",
) -> Safe:
    """The subgraph drawn: query entities (``seeds``) orange and larger, gold answers green, other
    answer nodes blue; one dashed frame per connected part when there are several; edge labels when
    there are at most 40 triples (always as tooltips). ``uid`` keeps the arrow marker id unique."""
    seed_list = list(dict.fromkeys(seeds))
    seed_set, gold_set, answer_set = set(seed_list), set(gold), set(answers)
    present = list(dict.fromkeys([*nodes, *(n for t in triples for n in (t.subject, t.object))]))
    if not present:
        return Safe('<p class="note">No node retrieved: the subgraph is empty.</p>')
    lay = layout(present, triples, [s for s in seed_list if s in set(present)])
    w, h = math.ceil(max(lay.width, LEGEND_WIDTH)), math.ceil(lay.height)
    marker = (
        f'<defs><marker id="arr-{esc(uid)}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" fill="#8c959f"/></marker></defs>'
    )
    body = [
        *_frames(lay, seed_set),
        *_edges(triples, lay.pos, len(triples) <= 40, uid),
        *_nodes(lay, seed_set, gold_set, answer_set),
    ]
    return Safe(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="subgraph" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" font-family="system-ui,sans-serif" role="img" '
        f'aria-label="retrieved subgraph: {len(present)} nodes, {len(triples)} triples, {len(lay.parts)} parts">'
        f"{marker}{''.join(body)}{_legend(h - 12)}</svg>"
    )
