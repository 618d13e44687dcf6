"""Every graph-validation metric and the grounder's build on a 10M-triple generated graph (issue 20, item 5).

Run from the repository root::

    python benchmarks/bench_scale.py                      # 10,000,000 triples, abort above 10 GB RSS
    python benchmarks/bench_scale.py --triples 1000000 --legacy   # 1M, with the replaced code side by side

The graph is generated in memory (never written): ``bench_speed.typed_graph``'s schema (12 classes in
3 levels, 3 disjoint top classes, 40 predicates with domain and range, 8 functional; 70 % of ends
typed, 0.5 % wrongly, 0.5 % of triples misusing their predicate; 1 % isolated nodes), built in chunks
with one string per entity, 20 % of entities with a display label, and 1 % of triples repeated under
a spelling variant of their predicate (``P7`` for ``p7``) so SRR has redundancy to find. The
reference KG K* for COR/CMP is a 10 % sample of the triples plus 1 % absent from the graph.

Each step runs once, in the order of the metric registry's validation phase (LC, OC, DNR, SRR, COR,
CMP), then SRR with the offline :class:`HashingEmbedder`, then the grounder's build; each reports wall
time and the peak RSS while it ran (sampled every 20 ms) above the RSS it started from. Baselines on
the same edges: connected components by ``scipy.sparse.csgraph`` called directly on a prebuilt CSR,
and networkx on integer nodes (degree ≤ 1 count and components; only up to ``--networkx-max``
triples, as networkx needs ~1 KB per edge). python-igraph is not installed, so it is not compared.
A watchdog ends the process (exit 3) as soon as RSS exceeds ``--max-gb``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import random
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView

ROOT = Path(__file__).resolve().parent.parent
_CHUNK = 1 << 20


# --------------------------------------------------------------------------- memory


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Watch:
    """Samples RSS in a thread: the peak of the current step, and an abort above ``limit`` bytes."""

    def __init__(self, limit: int, every: float = 0.02) -> None:
        self.limit, self.every = limit, every
        self.peak = rss_bytes()
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            now = rss_bytes()
            self.peak = max(self.peak, now)
            if now > self.limit:
                print(f"\nABORT: RSS {now / 1e9:.2f} GB exceeds --max-gb {self.limit / 1e9:.1f}", flush=True)
                os._exit(3)

    def step(self, name: str, fn: Callable[[], Any]) -> tuple[Any, float, int, int]:
        """Run ``fn`` once: (result, seconds, RSS before, peak RSS during)."""
        gc.collect()
        before = rss_bytes()
        self.peak = before
        start = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - start
        self.peak = max(self.peak, rss_bytes())
        return out, seconds, before, self.peak


def gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


def row(*cells: object) -> None:
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


# --------------------------------------------------------------------------- the graph


def ontology() -> Any:
    """``bench_speed.typed_graph``'s ontology (same seed, same predicates)."""
    from triage_plugins.kg.ontology import Ontology, PredicateSpec

    parents = {"Agent": "Thing", "Work": "Thing", "Place": "Thing", "Person": "Agent", "Organisation": "Agent",
               "Film": "Work", "Book": "Work", "City": "Place", "Country": "Place", "Director": "Person",
               "Actor": "Person"}  # fmt: skip
    pr = random.Random(0)
    inner = ["Agent", "Work", "Place", "Person", "Organisation", "Film", "Book", "City", "Country", "Director",
             "Actor"]  # fmt: skip
    preds = {f"p{k}": PredicateSpec(f"p{k}", pr.choice(inner), pr.choice(inner), k < 8) for k in range(40)}
    return Ontology(
        ("Thing", *parents), parents, (("Agent", "Work"), ("Agent", "Place"), ("Work", "Place")), preds
    )


LEAVES = ["Organisation", "Film", "Book", "City", "Country", "Director", "Actor"]


def generate(n_triples: int, seed: int, onto: Any) -> tuple[list[str], list[str], dict[str, str], Any]:
    """(entity names, isolated names, labels, chunks of (subject, predicate, object, types) arrays)."""
    groups = max(2, n_triples // 35)  # entity e = 7 * group + leaf: ~5 triples per subject
    names = [f"E{e}" for e in range(7 * groups)]
    rng = np.random.default_rng(seed)
    labelled = np.flatnonzero(rng.random(len(names)) < 0.2).tolist()
    labels = {names[e]: f"Entity {e}" for e in labelled}
    admits = np.zeros((40, 2, 7), dtype=bool)  # predicate, side -> leaves its domain/range admit
    for k in range(40):
        spec = onto.predicates[f"p{k}"]
        for side, cls in enumerate((spec.domain, spec.range)):
            admits[k, side] = [onto.is_a(leaf, cls) for leaf in LEAVES]

    def chunks() -> Any:
        for start in range(0, n_triples, _CHUNK):
            n = min(_CHUNK, n_triples - start)
            pred = rng.integers(0, 40, n)
            misused = rng.random(n) < 0.005
            ends, types = [], []
            for side in range(2):
                allowed = admits[pred, side] | misused[:, None]
                pick = rng.integers(0, 7, n)
                cum = np.cumsum(allowed, axis=1)
                want = pick % cum[:, -1]
                leaf = np.argmax(cum > want[:, None], axis=1)  # the (pick mod count)-th admitted leaf
                ends.append(7 * rng.integers(0, groups, n) + leaf)
                shown = np.where(rng.random(n) < 0.005, rng.integers(0, 7, n), leaf)
                types.append(np.where(rng.random(n) < 0.7, shown, -1))
            yield start, pred, ends[0], ends[1], types[0], types[1]

    return names, [f"Lonely {i}" for i in range(n_triples // 100)], labels, chunks()


def triples_of(names: list[str], chunks: Any, sample: list[Triple], seed: int) -> Any:
    """Triples of the generated chunks (1 % repeated under a predicate variant); every 10th goes
    to ``sample`` (the reference KG's share)."""
    preds = [f"p{k}" for k in range(40)]
    variants = [f"P{k}" for k in range(40)]  # the same predicate once normalized
    kinds: list[str | None] = [*LEAVES, None]
    rng = random.Random(seed)
    for start, pred, subj, obj, st, ot in chunks:
        for i, (p, s, o, a, b) in enumerate(
            zip(pred.tolist(), subj.tolist(), obj.tolist(), st.tolist(), ot.tolist(), strict=True)
        ):
            t = Triple(f"t{start + i}", names[s], preds[p], names[o], kinds[a], kinds[b])
            yield t
            if i % 10 == 0:
                sample.append(t)
            if rng.random() < 0.01:
                yield Triple(f"r{start + i}", names[s], variants[p], names[o], kinds[a], kinds[b])


def reference_of(sample: list[Triple], names: list[str], seed: int) -> GraphView:
    rng = random.Random(seed + 1)
    extra = [Triple(f"x{i}", rng.choice(names), "p0", rng.choice(names)) for i in range(len(sample) // 10)]
    return GraphView([*sample, *extra])


# --------------------------------------------------------------------------- baselines


def scipy_components(graph: GraphView, rounds: int = 3) -> tuple[Any, float, float]:
    """(labels, ours s, scipy s): medians of ``rounds`` interleaved calls of ``component_labels``
    and of scipy called directly on a prebuilt one-direction CSR of the same edges (float64 / int32).
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(graph.nodes)
    direct = csr_matrix((np.ones(len(graph)), (graph.subject_index, graph.object_index)), shape=(n, n))
    direct = csr_matrix(
        (direct.data, direct.indices.astype(np.int32), direct.indptr.astype(np.int32)), shape=(n, n)
    )
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        graph.component_labels()
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        labels = connected_components(direct, directed=False)[1]
        theirs.append(time.perf_counter() - start)
    if not np.array_equal(labels, graph.component_labels()):
        raise SystemExit("components: ours and scipy's labels differ")
    return labels, statistics.median(ours), statistics.median(theirs)


def networkx_steps(graph: GraphView) -> tuple[float, float, float, int, float]:
    """(build s, DNR s, components s, components, DNR) with networkx on integer nodes."""
    import networkx as nx

    from triage_plugins.metrics.validation import _predicates

    start = time.perf_counter()
    p_code, _ = _predicates(graph)
    g = nx.MultiGraph()
    g.add_nodes_from(range(len(graph.nodes)))
    edges = {(s, o, p) for s, p, o in zip(graph.subject_index.tolist(), p_code.tolist(),
                                          graph.object_index.tolist(), strict=True)}  # fmt: skip
    g.add_edges_from((s, o, p) for s, o, p in edges)
    build = time.perf_counter() - start
    start = time.perf_counter()
    dead = sum(1 for _, d in g.degree() if d <= 1) / g.number_of_nodes()  # a self-loop counts 2 here
    dnr = time.perf_counter() - start
    start = time.perf_counter()
    k = nx.number_connected_components(g)
    comp = time.perf_counter() - start
    return build, dnr, comp, k, dead


def legacy_grounder() -> Any:
    path = ROOT / "tests" / "kg" / "legacy_grounding.py"
    spec = importlib.util.spec_from_file_location("legacy_grounding", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.Grounder


# --------------------------------------------------------------------------- run


def describe(symbol: str, result: Any) -> str:
    if result is None or not hasattr(result, "value"):
        return ""
    value = "None" if result.value is None else f"{result.value:.4f}"
    keep = {k: v for k, v in result.details.items() if isinstance(v, int) and not isinstance(v, bool)}
    return f"{symbol} = {value} " + ", ".join(f"{k} {v:,}" for k, v in list(keep.items())[:4])


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 - one linear script
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triples", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-gb", type=float, default=10.0, help="abort when RSS exceeds this")
    parser.add_argument("--networkx-max", type=int, default=2_000_000, help="largest graph networkx runs on")
    parser.add_argument("--legacy", action="store_true", help="also build the replaced dict-trie grounder")
    parser.add_argument("--skip-embedder", action="store_true", help="no SRR with the hashing embedder")
    args = parser.parse_args(argv)

    from triage_plugins.kg.grounding import Grounder
    from triage_plugins.metrics.registry import BUILTIN_METRICS
    from triage_plugins.metrics.validation import semantic_redundancy_rate
    from triage_plugins.offline.embedder import HashingEmbedder

    watch = Watch(int(args.max_gb * 1e9))
    load = os.getloadavg()
    print(
        f"python {sys.version.split()[0]}, numpy {np.__version__}; load average {load[0]:.2f} {load[1]:.2f}"
    )
    onto = ontology()
    sample: list[Triple] = []

    def build() -> tuple[GraphView, GraphView]:
        names, isolated, labels, chunks = generate(args.triples, args.seed, onto)
        graph = GraphView(triples_of(names, chunks, sample, args.seed), isolated, labels=labels)
        return graph, reference_of(sample, names, args.seed)

    (graph, reference), t_build, r0, p_build = watch.step("build", build)
    sample.clear()
    base = rss_bytes()
    print(f"\ngraph: {len(graph):,} triples, {len(graph.nodes):,} nodes, {len(graph.labels):,} labels; "
          f"K*: {len(reference):,} triples. Generated + GraphView in {t_build:.1f} s; RSS {gb(base)} "
          f"(peak {gb(p_build)}, {(base - r0) / len(graph):.0f} B per triple)\n")  # fmt: skip
    args_of = {"LC": (onto,), "OC": (onto,), "COR": (reference,), "CMP": (reference,)}
    steps: list[tuple[str, Callable[[], Any]]] = []
    for symbol in BUILTIN_METRICS.symbols(phase="validation"):
        fn = BUILTIN_METRICS[symbol].function
        steps.append((symbol, lambda fn=fn, extra=args_of.get(symbol, ()): fn(graph, *extra)))
    if not args.skip_embedder:
        embedder = HashingEmbedder()
        steps.append(("SRR (HashingEmbedder)", lambda: semantic_redundancy_rate(graph, embedder=embedder)))
    steps.append(("grounder build", lambda: Grounder(graph)))
    steps.append(("components (ours)", graph.component_labels))
    row("step", "result", "time", "peak RSS above start", "peak RSS")
    row("---", "---", "---:", "---:", "---:")
    total, embedded = 0.0, 0.0
    overall = p_build
    kept: dict[str, Any] = {}
    kept_srr = 0.0
    for name, fn in steps:
        out, seconds, before, peak = watch.step(name, fn)
        if name == "SRR (HashingEmbedder)":
            embedded = seconds
        elif name != "components (ours)":
            total += seconds
        overall = max(overall, peak)
        kept[name] = out
        if name == "SRR":
            kept_srr = seconds
        text = (
            describe(name, out)
            if name != "grounder build"
            else f"{len(out._gaz):,} entries, {out._gaz.nbytes() / 1e6:.0f} MB"
        )
        if name == "components (ours)":
            text = f"{int(out.max()) + 1:,} components"
        row(name, text, f"{seconds:.2f} s", gb(peak - before), gb(peak))
        if name != "grounder build":
            kept.pop(name)
        del out
    row(
        "**metrics (SRR exact, the default) + grounder**",
        "",
        f"**{total:.1f} s**",
        "",
        f"**{gb(overall)}** (whole run)",
    )
    if embedded:
        row("same, SRR with the HashingEmbedder instead", "", f"{total - kept_srr + embedded:.1f} s", "", "")

    grounder = kept["grounder build"]
    texts = [
        f"Did E{7 * k + 3} and Entity {k * 35} direct Lonely {k}? what about e{k} of the Who"
        for k in range(500)
    ]
    start = time.perf_counter()
    found = sum(len(grounder.ground(t).nodes) for t in texts)
    per = (time.perf_counter() - start) / len(texts)
    start = time.perf_counter()
    for t in texts:
        grounder.ground(t)
    warm = (time.perf_counter() - start) / len(texts)
    print(f"\nground(): {per * 1e6:.0f} µs per question, first pass ({found} nodes in {len(texts)} questions, "
          f"every entity new); {warm * 1e6:.0f} µs on the same questions again")  # fmt: skip
    if args.legacy:
        old, t_old, b_old, p_old = watch.step("legacy", lambda: legacy_grounder()(graph))
        start = time.perf_counter()
        found_old = sum(len(old.ground(t).nodes) for t in texts)
        per_old = (time.perf_counter() - start) / len(texts)
        start = time.perf_counter()
        for t in texts:
            old.ground(t)
        warm_old = (time.perf_counter() - start) / len(texts)
        same = all(old.ground(t).spans == grounder.ground(t).spans for t in texts[:100])
        print(f"legacy dict-trie grounder: build {t_old:.2f} s, peak +{gb(p_old - b_old)}; ground() "
              f"{per_old * 1e6:.0f} µs, again {warm_old * 1e6:.0f} µs ({found_old} nodes; same spans: {same})")  # fmt: skip
        del old
    del grounder, kept
    labels, t_ours, t_scipy = scipy_components(graph)
    print(f"components ({int(labels.max()) + 1:,}), median of 3 interleaved calls: ours {t_ours:.2f} s, "
          f"scipy called directly on a prebuilt CSR {t_scipy:.2f} s (ours / scipy = {t_ours / t_scipy:.2f})")  # fmt: skip
    if len(graph) <= args.networkx_max:
        nb, nd, nc, k, dead = networkx_steps(graph)
        print(f"networkx (integer nodes, MultiGraph of distinct (s, o, p)): build {nb:.1f} s, degree ≤ 1 "
              f"count {nd:.2f} s (DNR {dead:.4f}), components {nc:.2f} s ({k:,})")  # fmt: skip
    else:
        print(f"networkx skipped: {len(graph):,} triples > --networkx-max {args.networkx_max:,}")
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    load = os.getloadavg()
    print(f"process peak RSS (ru_maxrss) {gb(ru)}; load average at the end {load[0]:.2f} {load[1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
