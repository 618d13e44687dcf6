"""Scale benchmark of the graph metrics against straightforward networkx versions of the same metric.

Measured side by side in one run, on the MetaQA KB (128k triples, read from ../shared/data; that
part is skipped with a message when absent) and on a generated graph (1M triples by default):

- DNR (TRIAGE eq. 21) and connectivity (number of connected components), GraphView numpy/scipy
  versus networkx (target: >= 10x faster, <= 2 s on 1M triples);
- SRR (eq. 22) with subject blocking, exact and embedder similarity (target: <= 60 s on 1M
  triples), with the candidate-pair count, versus a per-subject Python/networkx loop;
- usage metrics: median per-query time of ``usage_metrics(retrieval_event)`` on 200-triple
  subgraphs (target: <= 0.2 ms) versus a networkx version of the chain-head metrics.

Run from the repository root::

    python benchmarks/bench_metrics.py                      # everything, 1M generated triples
    python benchmarks/bench_metrics.py --triples 200000 --skip-networkx-srr
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from triage_plugins.contract.events import RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.metrics.validation import SIMILARITY_TOLERANCE, dead_node_ratio, semantic_redundancy_rate

DEFAULT_METAQA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "metaqa" / "derived"


# --------------------------------------------------------------------------- helpers


def timed(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Median wall time of ``fn()`` over ``repeat`` runs, and its last result."""
    times = []
    result = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def row(*cells: object) -> None:
    print(" | ".join(str(c) for c in cells), flush=True)


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


def hashing_embedder(texts: list[str], dim: int = 64) -> np.ndarray:
    """Character-trigram hashing vectors (deterministic, offline): a stand-in encoder f."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        padded = f"  {normalize_label(text)} "
        for k in range(len(padded) - 2):
            out[i, zlib.crc32(padded[k : k + 3].encode()) % dim] += 1.0
    return out


# --------------------------------------------------------------------------- data


def load_metaqa(folder: Path) -> list[Triple] | None:
    parts = [folder / "kb_reconstructed.part1.txt", folder / "kb_reconstructed.part2.txt"]
    if not all(p.is_file() for p in parts):
        return None
    triples = []
    for part in parts:
        for line in part.read_text(encoding="utf-8").splitlines():
            bits = line.split("|")
            if len(bits) == 3 and all(b.strip() for b in bits):
                triples.append(Triple.of(*bits))
    return triples


def generate(n_triples: int, seed: int) -> tuple[list[Triple], list[str]]:
    """A random KG: ~5 triples per subject, 25 predicates, 2% duplicates whose object differs only
    in case/punctuation (what SRR should catch), and 1% extra isolated nodes."""
    rng = np.random.default_rng(seed)
    n_entities = max(10, int(n_triples * 0.3))
    n_subjects = max(2, n_triples // 5)
    subjects = rng.integers(0, n_subjects, n_triples)
    objects = rng.integers(0, n_entities, n_triples)
    predicates = rng.integers(0, 25, n_triples)
    dup = rng.random(n_triples) < 0.02
    triples: list[Triple] = []
    for s, p, o, d in zip(
        subjects.tolist(), predicates.tolist(), objects.tolist(), dup.tolist(), strict=True
    ):
        subject, predicate, obj = f"Entity {s}", f"relation_{p}", f"Entity {o}"
        triples.append(Triple.of(subject, predicate, obj))
        if d:
            triples.append(Triple.of(subject, predicate, f"entity_{o}."))
    del triples[n_triples:]
    isolated = [f"Lonely {i}" for i in range(n_triples // 100)]
    return triples, isolated


# --------------------------------------------------------------------------- networkx baselines


def nx_dead_node_ratio(g: nx.MultiDiGraph) -> float:
    """DNR with networkx: distinct incident triples per node (a self-loop counts once)."""
    degree = dict(g.degree())
    for u, _ in nx.selfloop_edges(g):
        degree[u] -= 1
    return sum(1 for d in degree.values() if d <= 1) / g.number_of_nodes()


def nx_components(g: nx.MultiDiGraph) -> int:
    return nx.number_weakly_connected_components(g)


def nx_semantic_redundancy(
    g: nx.MultiDiGraph, order: dict[str, int], delta: float, embed: Callable[[list[str]], np.ndarray] | None
) -> tuple[float, int]:
    """SRR the straightforward way: group nodes by normalized label, compare every pair of their
    out-edges in Python (same subject blocking, same similarity, same 'later triple' rule)."""
    blocks: dict[str, list[str]] = defaultdict(list)
    for node in g.nodes:
        blocks[normalize_label(node)].append(node)
    cache: dict[str, np.ndarray] = {}

    def vec(text: str) -> np.ndarray:
        if text not in cache:
            v = embed([text])[0].astype(np.float64)
            n = np.linalg.norm(v)
            cache[text] = v / n if n else v
        return cache[text]

    def sim(x: str, y: str) -> float:
        if embed is None:
            return 1.0 if normalize_label(x) == normalize_label(y) else 0.0
        return 1.0 if x == y else float(vec(x) @ vec(y))

    cut = delta - SIMILARITY_TOLERANCE
    redundant: set[int] = set()
    pairs = 0
    for nodes in blocks.values():
        edges = [(s, o, k, p) for n in nodes for s, o, k, p in g.out_edges(n, keys=True, data="predicate")]
        for i in range(len(edges)):
            for j in range(i + 1, len(edges)):
                pairs += 1
                a, b = edges[i], edges[j]
                if min(sim(a[3], b[3]), sim(a[1], b[1]), sim(a[0], b[0])) >= cut:
                    redundant.add(max(order[a[2]], order[b[2]]))
    return len(redundant) / g.number_of_edges(), pairs


def nx_usage(event: RetrievalEvent) -> dict[str, float | None]:
    """QGR, ERC, ERP, RRS, RPC, RHD of one retrieval event, computed with a networkx graph."""
    g = nx.Graph()
    g.add_nodes_from(event.subgraph.nodes)
    g.add_edges_from((t.subject, t.object) for t in event.subgraph.triples)
    grounded = {n for n in event.grounding.values() if n is not None}
    unresolved = {normalize_label(m) for m, n in event.grounding.items() if n is None}
    total = len(grounded) + len(unresolved)
    present = [n for n in grounded if n in g]
    pairs = [(a, b) for i, a in enumerate(present) for b in present[i + 1 :]]
    connected = sum(1 for a, b in pairs if nx.has_path(g, a, b))
    lengths = [nx.shortest_path_length(g, a, b) for a, b in pairs if nx.has_path(g, a, b)]
    n_pairs = total * (total - 1) / 2
    rhd = None  # DESIGN §4: 0 for one retrieved entity; ∞ (None here) when disconnected or missing
    if present and len(present) == len(grounded) and connected == len(pairs):
        rhd = max(lengths, default=0)
    return {
        "QGR": len(grounded) / total if total else None,
        "ERC": len(present) / total if total else None,
        "ERP": len(present) / g.number_of_nodes() if g.number_of_nodes() else None,
        "RRS": connected / n_pairs if n_pairs else (float(bool(present)) if total else None),
        "RPC": event.expanded_nodes,
        "RHD": rhd,
    }


# --------------------------------------------------------------------------- sections


def bench_structure(name: str, triples: list[Triple], nodes: list[str], repeat: int) -> tuple[GraphView, Any]:
    t_build, graph = timed(lambda: GraphView(triples, nodes=nodes), repeat=1)
    t_nx_build, g = timed(graph.to_networkx, repeat=1)
    print(f"\n## {name}: {len(graph):,} triples, {len(graph.nodes):,} nodes")
    row("step", "ours", "networkx", "speed-up", "same value")
    row("build (GraphView vs to_networkx)", fmt(t_build), fmt(t_nx_build), "-", "-")

    t_dnr, dnr = timed(lambda: dead_node_ratio(graph), repeat)
    t_nx_dnr, nx_dnr = timed(lambda: nx_dead_node_ratio(g), repeat)
    row(
        f"DNR = {dnr.value:.4f}",
        fmt(t_dnr),
        fmt(t_nx_dnr),
        f"{t_nx_dnr / t_dnr:,.0f}x",
        abs(dnr.value - nx_dnr) < 1e-12,
    )

    t_cc, labels = timed(lambda: int(np.unique(graph.component_labels()).size), repeat)
    t_nx_cc, nx_cc = timed(lambda: nx_components(g), repeat)
    row(f"components = {labels:,}", fmt(t_cc), fmt(t_nx_cc), f"{t_nx_cc / t_cc:,.1f}x", labels == nx_cc)
    both = t_dnr + t_cc
    nx_both = t_nx_dnr + t_nx_cc
    row("DNR + components", fmt(both), fmt(nx_both), f"{nx_both / both:,.1f}x", "-")
    return graph, g


def bench_srr(graph: GraphView, g: Any, skip_nx: bool, delta: float) -> None:
    order = {t.id: i for i, t in enumerate(graph.triples)}
    for label, embed in (
        ("exact (normalized labels)", None),
        ("embedder (trigram hashing, d=64)", hashing_embedder),
    ):
        t_ours, srr = timed(
            lambda e=embed: semantic_redundancy_rate(graph, delta=delta, embedder=e), repeat=1
        )
        d = srr.details
        print(
            f"SRR {label}: {srr.display(4)} in {fmt(t_ours)}; candidate pairs {d['candidate_pairs']:,} "
            f"(subject blocks {d['subject_block_pairs']:,}), redundant {d['redundant']:,}"
        )
        if skip_nx or g is None:
            continue
        t_nx, (nx_srr, nx_pairs) = timed(lambda e=embed: nx_semantic_redundancy(g, order, delta, e), repeat=1)
        row(
            f"  networkx loop: {nx_srr:.4f} over {nx_pairs:,} pairs",
            fmt(t_ours),
            fmt(t_nx),
            f"{t_nx / t_ours:,.1f}x",
            abs(nx_srr - srr.value) < 1e-12,
        )


def usage_events(graph: GraphView, n_queries: int, size: int, seed: int) -> list[RetrievalEvent]:
    """Retrieval events with ~``size``-triple subgraphs: BFS around a random seed entity, two
    grounded mentions inside the subgraph plus one unresolved mention."""
    rng = np.random.default_rng(seed)
    degrees = graph.degrees()
    seeds = np.flatnonzero(degrees >= 3)
    events = []
    while len(events) < n_queries:
        start = graph.nodes[int(rng.choice(seeds))]
        picked: dict[str, Triple] = {}
        frontier = [start]
        seen = {start}
        while frontier and len(picked) < size:
            nxt = []
            for node in frontier:
                for t in graph.incident_triples(node):
                    if len(picked) >= size:
                        break
                    picked.setdefault(t.id, t)
                    for end in (t.subject, t.object):
                        if end not in seen:
                            seen.add(end)
                            nxt.append(end)
            frontier = nxt
        if len(picked) < size:
            continue
        triples = tuple(picked.values())
        far = triples[-1].object
        grounding = {start: start, far: far, "Unknown Thing": None}
        events.append(
            RetrievalEvent(
                "bench",
                f"q{len(events)}",
                f"How is {start} related to {far}?",
                mentions=tuple(grounding),
                grounding=grounding,
                subgraph=Subgraph(triples),
                expanded_nodes=len(seen),
            )
        )
    return events


def bench_usage(graph: GraphView, n_queries: int, size: int, seed: int) -> None:
    print(f"\n## usage metrics: {n_queries} queries, {size}-triple subgraphs")
    try:
        from triage_plugins.metrics.per_query import usage_metrics
    except ImportError as exc:
        print(f"usage metrics not available ({exc})")
        return
    events = usage_events(graph, n_queries, size, seed)
    ours, theirs = [], []
    agree = 0
    for event in events:
        start = time.perf_counter()
        out = usage_metrics(event)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        ref = nx_usage(event)
        theirs.append(time.perf_counter() - start)
        agree += all(out[k].value == ref[k] for k in ("QGR", "ERC", "ERP", "RRS", "RHD"))
    m_ours, m_nx = statistics.median(ours), statistics.median(theirs)
    row("per query (median)", "ours", "networkx", "speed-up", "same QGR/ERC/ERP/RRS/RHD")
    row(
        "usage_metrics(retrieval_event)",
        f"{m_ours * 1000:.3f} ms",
        f"{m_nx * 1000:.3f} ms",
        f"{m_nx / m_ours:,.1f}x",
        f"{agree}/{len(events)}",
    )
    row(
        "p90",
        f"{np.percentile(ours, 90) * 1000:.3f} ms",
        f"{np.percentile(theirs, 90) * 1000:.3f} ms",
        "-",
        "-",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--metaqa", type=Path, default=DEFAULT_METAQA, help="folder of kb_reconstructed.part{1,2}.txt"
    )
    parser.add_argument("--triples", type=int, default=1_000_000, help="size of the generated graph")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--delta", type=float, default=0.9, help="SRR threshold δ")
    parser.add_argument("--repeat", type=int, default=3, help="runs per DNR/components timing (median)")
    parser.add_argument("--usage-queries", type=int, default=500)
    parser.add_argument("--usage-size", type=int, default=200, help="triples per retrieved subgraph")
    parser.add_argument("--skip-networkx-srr", action="store_true", help="skip the slow Python SRR baseline")
    args = parser.parse_args(argv)

    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, networkx {nx.__version__}")
    metaqa_graph = None
    t_load, kb = timed(lambda: load_metaqa(args.metaqa), repeat=1)
    if kb is None:
        print(f"\n## MetaQA KB: skipped (no kb_reconstructed.part1/2.txt under {args.metaqa})")
    else:
        print(f"\nloaded MetaQA KB in {fmt(t_load)}")
        metaqa_graph, g = bench_structure("MetaQA KB", kb, [], args.repeat)
        bench_srr(metaqa_graph, g, args.skip_networkx_srr, args.delta)
        del g

    t_gen, (triples, isolated) = timed(lambda: generate(args.triples, args.seed), repeat=1)
    print(f"\ngenerated {len(triples):,} triples in {fmt(t_gen)}")
    graph, g = bench_structure("generated graph", triples, isolated, args.repeat)
    bench_srr(graph, g, args.skip_networkx_srr, args.delta)
    del g

    bench_usage(
        metaqa_graph if metaqa_graph is not None else graph, args.usage_queries, args.usage_size, args.seed
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
