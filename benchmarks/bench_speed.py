"""Speed of the core's hot paths, each before/after side by side in one run (issue 20, items 2–4).

Run from the repository root::

    python benchmarks/bench_speed.py                       # everything (1M generated triples)
    python benchmarks/bench_speed.py --only encode,store   # sections: encode, store, labels, demo, graph

- ``encode``: ``event.to_json()`` (per-class encoders) against the generic dataclass walk it replaced
  (kept here as ``generic_to_json``; both texts are checked identical), per event size.
- ``store``: events/s written to a SQLite file store, events built beforehand, each written once:
  ``before`` = generic walk, one transaction per event (the store recorder's path) and the old batch
  path (one ``execute`` per row); ``after`` = per-class encoders, the same two paths, and
  ``record_events`` (one transaction, ``executemany``) in batches of 256 (the worker's batch size).
- ``labels`` and ``demo``: ``normalize_label`` memoized against its unmemoized function
  (``__wrapped__``), per call and over a whole ``run_demo()`` (wall and process CPU, which counts the
  background workers; the unmemoized runs patch every module's imported name).
- ``graph``: on a generated graph (1M triples, typed, with an ontology; generated, never written):
  LC against the per-triple loop it replaced, and connected components against the previous call
  (both directions, int64 indices converted by scipy), scipy called directly on the same one-direction
  CSR (prebuilt, float64 / int32: nothing to convert), and networkx on integer nodes.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import fields
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from triage_plugins.contract import events as ev
from triage_plugins.contract.events import Chunk, Event, FeedbackEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.events import Path as KGPath
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.store.sql import Written

SECTIONS = ("encode", "store", "labels", "demo", "graph")


# --------------------------------------------------------------------------- helpers


def clock(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(median wall seconds, median process CPU seconds) of ``fn()`` over ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def per_call(fn: Callable[[], Any], calls: int, repeat: int) -> float:
    """Best of ``repeat`` batch means of ``calls`` calls, in seconds per call."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def row(*cells: object) -> None:
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


# --------------------------------------------------------------------------- the generic walk (before)


def _walk(obj: Any) -> Any:
    if type(obj).__module__ != ev.__name__ and hasattr(obj, "to_dict") and not isinstance(obj, Mapping):
        return obj.to_dict()
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: _walk(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, Mapping):
        return {k: _walk(v) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [_walk(v) for v in obj]
    return obj


def generic_to_json(event: Event) -> str:
    """``Event.to_json`` as it was: a reflective walk over dataclass fields, then ``json.dumps``."""
    return json.dumps({"event": event.kind, **_walk(event)}, ensure_ascii=False, allow_nan=False)


class generic_encoding:  # noqa: N801 - used as a context manager, reads as a phrase
    """Within the block, every event's ``to_json`` is the generic walk (what the store wrote before)."""

    def __enter__(self) -> None:
        from triage_plugins.store import sql

        self._saved = Event.to_json, sql.split_json
        Event.to_json = generic_to_json  # type: ignore[method-assign]
        sql.split_json = lambda event: (generic_to_json(event), {})  # whole texts, as then

    def __exit__(self, *exc: object) -> None:
        from triage_plugins.store import sql

        Event.to_json, sql.split_json = self._saved  # type: ignore[method-assign]


# --------------------------------------------------------------------------- events


def retrieval(i: int, size: int, chunks: int = 0, chunk_chars: int = 0) -> RetrievalEvent:
    """A retrieval event of ``size`` fresh triples, 2 paths and ``chunks`` chunks of ``chunk_chars``."""
    triples = tuple(
        Triple.of(f"Entity {i}-{k}", f"rel {k % 7}", f"Entity {i}-{(k * 7 + 1) % 150}") for k in range(size)
    )
    grounding = {f"Entity {i}-0": f"Entity {i}-0", f"Entity {i}-1": f"Entity {i}-1", "Nobody": None}
    text = ('Some retrieved passage text, with a quote " and an accent: é. ' * 40)[:chunk_chars]
    return RetrievalEvent(
        "bench",
        f"q{i}",
        f"How is Entity {i}-0 related to Entity {i}-1 or Nobody?",
        tuple(grounding),
        grounding,
        Subgraph(triples),
        (KGPath((triples[0].id, triples[1].id), 0.5), KGPath((triples[2].id,), 0.25)),
        tuple(Chunk(f"c{i}-{k}", f"doc{k}", text, {"sentence": k}) for k in range(chunks)),
        expanded_nodes=size,
        seconds=0.01,
        retriever="hybrid",
    )


#: name -> (label, builder of event ``i``); "large" is shaped like an offline LightRAG hybrid query's
#: retrieval event (examples/lightrag_quickstart.py: 63 triples, 13 chunks, ~23 KB of JSON).
EVENTS: dict[str, tuple[str, Callable[[int], Event]]] = {
    "small": ("feedback event", lambda i: FeedbackEvent("bench", f"q{i}", 0.75, "llm", 4)),
    "medium": ("retrieval: 20 triples, 2 chunks", lambda i: retrieval(i, 20, 2, 300)),
    "large": ("retrieval, LightRAG-sized: 63 triples, 13 chunks", lambda i: retrieval(i, 63, 13, 1100)),
    "200": ("retrieval: 200 triples", lambda i: retrieval(i, 200)),
}


def make_events(kind: str, count: int) -> list[Event]:
    build = EVENTS[kind][1]
    return [build(i) for i in range(count)]


def bench_encode(repeat: int) -> None:
    print("\n## encoding: `event.to_json()` per event (best of batch means)\n")
    row("event", "JSON bytes", "before (generic walk)", "after (per-class)", "speed-up", "identical")
    row("---", "---:", "---:", "---:", "---:", "---")
    for kind, (label, _) in EVENTS.items():
        events = make_events(kind, 50)
        same = all(e.to_json() == generic_to_json(e) for e in events)
        it = iter(range(10**9))
        before = per_call(lambda e=events, i=it: generic_to_json(e[next(i) % 50]), 200, repeat)
        after = per_call(lambda e=events, i=it: e[next(i) % 50].to_json(), 200, repeat)
        row(label, f"{len(events[0].to_json()):,}", fmt(before), fmt(after), f"{before / after:.1f}x", same)


# --------------------------------------------------------------------------- store


def _old_batch(store: Any, events: list[Event]) -> None:
    """``record_events`` as it was: one transaction, one ``execute`` per row (private API on purpose)."""
    now = time.time()
    with store._tx() as db:
        for event in events:
            parts: dict[str, str] = {}
            row = store._event_row(event, None, now, parts)
            store._insert_events(db, [row], parts, None, Written())


def _write_all(store: Any, events: list[Event], how: str) -> None:
    if how == "event":
        for event in events:
            store.record_event(event)
        return
    for start in range(0, len(events), 256):
        batch = events[start : start + 256]
        if how == "old-batch":
            _old_batch(store, batch)
        else:
            store.record_events(batch)


def _raw_sqlite(store: Any, events: list[Event]) -> float:
    """The ceiling: pre-encoded texts, ``executemany`` into a bare table of the store's file."""
    texts = [(e.to_json(),) for e in events]
    db = store._handle().db  # the store's own connection: same file, same pragmas
    db.execute("CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, json TEXT NOT NULL)")
    start = time.perf_counter()
    for first in range(0, len(texts), 256):
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT INTO bare (json) VALUES (?)", texts[first : first + 256])
        db.execute("COMMIT")
    return time.perf_counter() - start


STORE_MODES = (  # (column, encoding, write path)
    ("before: one tx per event", "generic", "event"),
    ("before: batch, execute per row", "generic", "old-batch"),
    ("after: one tx per event", "classes", "event"),
    ("after: batch, execute per row", "classes", "old-batch"),
    ("after: `record_events` (executemany)", "classes", "many"),
)


def _store_rate(kind: str, n: int, encoding: str, how: str, repeat: int) -> float:
    from triage_plugins.store import open_store

    walls = []
    for _ in range(repeat):
        events = make_events(kind, n)
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(Path(tmp) / "bench.sqlite")
            try:
                if how == "raw":
                    walls.append(_raw_sqlite(store, events))
                    continue
                with generic_encoding() if encoding == "generic" else _Nothing():
                    walls.append(clock(lambda e=events, s=store: _write_all(s, e, how), 1)[0])
            finally:
                store.close()
    return n / statistics.median(walls)


def bench_store(count: int, repeat: int) -> None:
    print(f"\n## store: events/s into a SQLite file ({count:,} distinct events per figure, "
          f"batches of 256, median of {repeat})\n")  # fmt: skip
    row("event", *(m[0] for m in STORE_MODES), "speed-up (batch)", "ceiling: bare table, texts pre-encoded")
    row("---", *["---:"] * (len(STORE_MODES) + 2))
    for kind, (label, _) in EVENTS.items():
        n = count if kind in ("small", "medium") else max(256, count // 4)
        rates = [_store_rate(kind, n, encoding, how, repeat) for _, encoding, how in STORE_MODES]
        ceiling = _store_rate(kind, n, "classes", "raw", repeat)
        row(label, *(f"{r:,.0f}" for r in rates), f"{rates[-1] / rates[1]:.1f}x", f"{ceiling:,.0f}")


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# --------------------------------------------------------------------------- labels and the demo


class unmemoized_labels:  # noqa: N801
    """Within the block, every module's ``normalize_label`` is the function without its memo."""

    def __enter__(self) -> None:
        from triage_plugins.contract import graph_view

        cached = graph_view.normalize_label
        self._patched = [
            m for m in list(sys.modules.values()) if getattr(m, "normalize_label", None) is cached
        ]
        for module in self._patched:
            module.normalize_label = cached.__wrapped__  # type: ignore[attr-defined]
        self._cached = cached

    def __exit__(self, *exc: object) -> None:
        for module in self._patched:
            module.normalize_label = self._cached  # type: ignore[attr-defined]


def bench_labels(repeat: int) -> None:
    from triage_plugins.contract.graph_view import normalize_label

    labels = [f"Entity_{i % 500} (the {i % 7}th)" for i in range(5000)]
    plain = normalize_label.__wrapped__
    before = per_call(lambda: [plain(x) for x in labels], 1, repeat) / len(labels)
    normalize_label.cache_clear()
    after = per_call(lambda: [normalize_label(x) for x in labels], 1, repeat) / len(labels)
    print("\n## `normalize_label`: 5,000 calls over 500 distinct labels\n")
    row("per call", "before (no memo)", "after (lru_cache)", "speed-up")
    row("---", "---:", "---:", "---:")
    row("mean", fmt(before), fmt(after), f"{before / after:.1f}x")


def bench_demo(repeat: int) -> None:
    from triage_plugins.apps.demo import run_demo
    from triage_plugins.contract import graph_view

    run_demo(feedback_rounds=1)  # warm up: imports, the embedded world
    calls = _count_label_calls(run_demo)
    results: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    for _ in range(repeat):  # interleaved, so load changes hit both alike
        with unmemoized_labels():
            results["before"].append(clock(run_demo, 1))
        graph_view.normalize_label.cache_clear()
        results["after"].append(clock(run_demo, 1))
    info = graph_view.normalize_label.cache_info()
    print(f"\n## `triage demo` (`run_demo()`, in memory): {calls:,} `normalize_label` calls; "
          f"memo after the last run: {info.hits:,} hits, {info.misses:,} misses; median of {repeat}\n")  # fmt: skip
    row("", "before (no memo)", "after (lru_cache)", "ratio")
    row("---", "---:", "---:", "---:")
    for i, what in enumerate(("wall", "process CPU")):
        b = statistics.median(r[i] for r in results["before"])
        a = statistics.median(r[i] for r in results["after"])
        row(what, fmt(b), fmt(a), f"{a / b:.3f}")


def _count_label_calls(run: Callable[[], Any]) -> int:
    from triage_plugins.contract import graph_view

    cached = graph_view.normalize_label
    count = [0]

    def counting(text: str) -> str:
        count[0] += 1
        return cached(text)

    modules = [m for m in list(sys.modules.values()) if getattr(m, "normalize_label", None) is cached]
    for module in modules:
        module.normalize_label = counting  # type: ignore[attr-defined]
    try:
        run()
    finally:
        for module in modules:
            module.normalize_label = cached  # type: ignore[attr-defined]
    return count[0]


# --------------------------------------------------------------------------- graph: LC, components


def typed_graph(n_triples: int, seed: int) -> tuple[list[Triple], list[str], Any]:
    """A typed KG and its ontology: 12 classes in 3 levels, 3 disjoint top classes, 40 predicates with
    domain and range (8 functional). Entity ``e`` is of leaf class ``e % 7``; each triple's ends are
    drawn among entities its predicate admits (0.5 % among all), ~5 triples per subject; 70 % of ends
    carry their type, 0.5 % of those a random leaf class instead; 1 % extra isolated nodes."""
    from triage_plugins.kg.ontology import Ontology, PredicateSpec

    parents = {"Agent": "Thing", "Work": "Thing", "Place": "Thing", "Person": "Agent", "Organisation": "Agent",
               "Film": "Work", "Book": "Work", "City": "Place", "Country": "Place", "Director": "Person",
               "Actor": "Person"}  # fmt: skip
    leaves = ["Organisation", "Film", "Book", "City", "Country", "Director", "Actor"]
    pr = random.Random(seed)
    inner = ["Agent", "Work", "Place", "Person", *leaves]
    preds = {f"p{k}": PredicateSpec(f"p{k}", pr.choice(inner), pr.choice(inner), k < 8) for k in range(40)}
    onto = Ontology(
        ("Thing", *parents), parents, (("Agent", "Work"), ("Agent", "Place"), ("Work", "Place")), preds
    )
    admits = {c: [k for k, leaf in enumerate(leaves) if onto.is_a(leaf, c)] for c in inner}
    rng = np.random.default_rng(seed)
    groups = max(2, n_triples // 35)  # entity e = 7 * group + leaf: ~5 triples per subject
    base = rng.integers(0, groups, (2, n_triples)).tolist()
    pick = rng.integers(0, 7, (2, n_triples)).tolist()
    pred = rng.integers(0, 40, n_triples).tolist()
    typed = (rng.random((2, n_triples)) < 0.7).tolist()
    wrong = (rng.random((2, n_triples)) < 0.005).tolist()
    misused = (rng.random(n_triples) < 0.005).tolist()
    triples = []
    for i in range(n_triples):
        spec = preds[f"p{pred[i]}"]
        ends, types = [], []
        for side, cls in ((0, spec.domain), (1, spec.range)):
            kinds = range(7) if misused[i] else admits[cls]  # type: ignore[index]
            leaf = kinds[pick[side][i] % len(kinds)]
            ends.append(f"E{7 * base[side][i] + leaf}")
            shown = pick[1 - side][i] if wrong[side][i] else leaf
            types.append(leaves[shown] if typed[side][i] else None)
        s, o = ends
        triples.append(Triple(f"{s}|p{pred[i]}|{o}", s, f"p{pred[i]}", o, types[0], types[1]))
    return triples, [f"Lonely {i}" for i in range(n_triples // 100)], onto


def loop_lc(graph: GraphView, ontology: Any) -> float:
    """LC as it was: per-triple Python loops over dicts (TRIAGE eq. 19)."""
    triples = graph.triples
    asserted: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, t in enumerate(triples):
        if t.subject_type:
            asserted[t.subject][t.subject_type].append(i)
        if t.object_type:
            asserted[t.object][t.object_type].append(i)
    conflicting: set[int] = set()
    for by_type in asserted.values():
        for a, b in combinations(by_type, 2):
            if ontology.are_disjoint(a, b):
                conflicting.update(by_type[a], by_type[b])
    objects: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, t in enumerate(triples):
        spec = ontology.predicates.get(t.predicate)
        if spec is None:
            continue
        for node, cls in ((t.subject, spec.domain), (t.object, spec.range)):
            types = asserted.get(node)
            if cls is not None and types and not any(ontology.is_a(x, cls) for x in types):
                conflicting.add(i)
        if spec.cardinality_limit is not None:
            objects[(t.subject, t.predicate)][t.object].append(i)
    for (_, predicate), by_object in objects.items():
        if len(by_object) > ontology.predicates[predicate].cardinality_limit:
            for ids in by_object.values():
                conflicting.update(ids)
    return 1.0 - len(conflicting) / len(triples)


def old_components(graph: GraphView) -> np.ndarray:
    """``component_labels`` as it was: both directions, int8 data, int64 indices scipy converts."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(graph.nodes)
    mat = csr_matrix((np.ones(len(graph.indices), dtype=np.int8), graph.indices, graph.indptr), shape=(n, n))
    return connected_components(mat, directed=False)[1]


def bench_graph(n_triples: int, seed: int, repeat: int) -> None:
    import networkx as nx
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    from triage_plugins.metrics.validation import logical_consistency

    gen_s, (triples, isolated, onto) = _timed_once(lambda: typed_graph(n_triples, seed))
    build_s, graph = _timed_once(lambda: GraphView(triples, isolated))
    triples.clear()  # the view holds them; the list itself is not needed
    n, m = len(graph.nodes), len(graph)
    print(
        f"\n## generated graph: {m:,} triples, {n:,} nodes (generated in {fmt(gen_s)}, GraphView in {fmt(build_s)})\n"
    )
    row("metric", "before", "after", "speed-up", "same value")
    row("---", "---:", "---:", "---:", "---")
    t_loop, _ = clock(lambda: loop_lc(graph, onto), 1)
    t_lc, _ = clock(lambda: logical_consistency(graph, onto), repeat)
    lc = logical_consistency(graph, onto)
    d = lc.details
    row(f"LC = {lc.value:.4f} ({d['conflicting']:,} conflicting: {d['disjointness']:,} disjointness, "
        f"{d['domain_range']:,} domain/range, {d['cardinality']:,} cardinality)", fmt(t_loop), fmt(t_lc),
        f"{t_loop / t_lc:.0f}x", loop_lc(graph, onto) == lc.value)  # fmt: skip

    subj, obj = graph.subject_index, graph.object_index
    direct = csr_matrix((np.ones(m), (subj, obj)), shape=(n, n))  # scipy's own CSR of the same edges
    direct = csr_matrix(
        (direct.data, direct.indices.astype(np.int32), direct.indptr.astype(np.int32)), shape=(n, n)
    )
    g_int = nx.Graph()
    g_int.add_nodes_from(range(n))
    g_int.add_edges_from(zip(subj.tolist(), obj.tolist(), strict=True))
    times: dict[str, list[float]] = defaultdict(list)
    for _ in range(repeat):  # interleaved
        for name, fn in (("old", lambda: old_components(graph)), ("ours", graph.component_labels),
                         ("scipy", lambda: connected_components(direct, directed=False)[1])):  # fmt: skip
            times[name].append(clock(fn, 1)[0])
    t_nx, _ = clock(lambda: nx.number_connected_components(g_int), 1)
    med = {k: statistics.median(v) for k, v in times.items()}
    labels = graph.component_labels()
    same = bool((labels == old_components(graph)).all()) and bool(
        (labels == connected_components(direct, directed=False)[1]).all()
    )
    k = int(labels.max()) + 1
    row(f"components = {k:,} (before: previous call)", fmt(med["old"]), fmt(med["ours"]),
        f"{med['old'] / med['ours']:.1f}x", same and k == nx.number_connected_components(g_int))  # fmt: skip
    row("components: scipy called directly on the same CSR (prebuilt)", fmt(med["scipy"]), fmt(med["ours"]),
        f"ours / scipy = {med['ours'] / med['scipy']:.2f}", same)  # fmt: skip
    row("components: networkx on integer nodes (graph prebuilt)", fmt(t_nx), fmt(med["ours"]),
        f"{t_nx / med['ours']:.1f}x", "-")  # fmt: skip


def _timed_once(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {SECTIONS}")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median, or best batch mean)")
    parser.add_argument(
        "--events", type=int, default=4096, help="events per store figure (a quarter for large)"
    )
    parser.add_argument("--demo-repeat", type=int, default=3, help="demo runs per variant")
    parser.add_argument("--triples", type=int, default=1_000_000, help="size of the generated graph")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    wanted = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = wanted - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")
    if "encode" in wanted:
        bench_encode(args.repeat)
    if "store" in wanted:
        bench_store(args.events, args.repeat)
    if "labels" in wanted:
        bench_labels(args.repeat)
    if "demo" in wanted:
        bench_demo(args.demo_repeat)
    if "graph" in wanted:
        bench_graph(args.triples, args.seed, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
