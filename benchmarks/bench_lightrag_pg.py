"""LightRAG's graph in PostgreSQL (``PGTableGraphStorage``) read where it lives (issue #31), one run.

Fills LightRAG's own tables (``lightrag_graph_nodes`` / ``lightrag_graph_edges``, created by a real
LightRAG 1.5.7 instance) with a generated graph by COPY (bounded memory: written in blocks), with
LightRAG-like properties (types, descriptions, keywords, chunk ids). Then, each step in its own
process so that its peak RSS is its own:

- ``get_all``: today's full read, ``get_all_nodes()`` + ``get_all_edges()`` + ``graph_view``;
- ``stream``: :func:`triage_lightrag.pg_graph.stream_graph` (COPY of the needed columns) and the
  counts in SQL (:func:`~triage_lightrag.pg_graph.graph_counts`);
- ``refresh``: an instrumented LightRAG on that graph (first read streamed), then a 10-document
  upload through ``ainsert`` (offline scripted LLM): the seconds of the view refresh it ends in
  (``_sync_graph``: the logged change read back with ``get_nodes_batch`` / ``get_edges_batch``, the
  view and grounder updated incrementally). The store recorder and the metrics plugin are disabled in
  this step so the delivery thread does not compete for the interpreter (they are measured on their
  own). Then, for comparison: the view and grounder rebuilt whole (the cost before the incremental
  update; the rebuilt view must equal the updated one, their groundings of the upload's names too),
  the validation metrics on the updated view, and a full streamed re-read whose graph and metrics
  must equal the updated view's;
- ``metrics``: every validation metric (``validation_metrics``; no ontology or reference, so DNR and
  SRR are computed, LC/OC/COR/CMP are N/A) and connected components on the streamed view.

PostgreSQL: ``--postgres URL`` (a database it may fill), else a throw-away cluster started with the
test suite's ``tests/store/pgserver.py``.

    python benchmarks/bench_lightrag_pg.py --edges 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LAYERS = 5  # edge (u, u + offset_j) for j < LAYERS, each kept with probability KEEP
KEEP = 0.5
TYPES = ("person", "organization", "location", "event", "concept", "work", "product", "date")
PG_STORAGES = {"graph_storage": "PGTableGraphStorage", "kv_storage": "PGKVStorage"}
UPLOAD = [
    f"Director{i} Lastname{i} directed Movie{i}. Movie{i} was released in {1990 + i}. "
    f"Director{i} Lastname{i} was born in City{i}."
    for i in range(10)
]
UPLOAD_NAMES = [name for i in range(10) for name in (f"Director{i} Lastname{i}", f"Movie{i}", f"City{i}")]


def _pgserver() -> Any:
    spec = importlib.util.spec_from_file_location("pgserver", ROOT / "tests" / "store" / "pgserver.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["pgserver"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _use_database(url: str) -> None:
    from triage_lightrag.testing import postgres_settings

    os.environ.update(postgres_settings(url))


async def _rag(workdir: Path, workspace: str) -> Any:
    from triage_lightrag.testing import ScriptedLightRAGLLM, build_rag

    return await build_rag(
        workdir, [], workspace=workspace, llm=ScriptedLightRAGLLM(), insert=False, **PG_STORAGES
    )


# --------------------------------------------------------------------------- the generated graph


def _node(u: int) -> str:
    return f"Entity {u:07d}"  # fixed width: code-point order is numeric order


def _node_block(us: np.ndarray, workspace: str) -> str:
    lines = []
    for u in us.tolist():
        props = {
            "entity_id": _node(u),
            "entity_type": TYPES[u % len(TYPES)],
            "description": f"{_node(u)} is a generated entity of type {TYPES[u % len(TYPES)]}, "
            f"mentioned in chunk {u % 997} of document {u % 4999}.",
            "source_id": f"chunk-{u % 99991:05d}",
            "file_path": f"doc-{u % 4999}.txt",
            "created_at": 1767225600,
        }
        lines.append(f"{workspace}\tchunk_entity_relation\t{_node(u)}\t{json.dumps(props)}\n")
    return "".join(lines)


def _edge_block(a: np.ndarray, b: np.ndarray, workspace: str) -> str:
    lines = []
    for u, v in zip(a.tolist(), b.tolist(), strict=True):
        kw = f"relation {(u * 31 + v) % 1000}"
        props = {
            "keywords": kw,
            "description": f"{_node(u)} and {_node(v)} are linked by {kw}, as stated in the source text.",
            "source_id": f"chunk-{u % 99991:05d}<SEP>chunk-{v % 99991:05d}",
            "weight": 1.0,
            "file_path": f"doc-{u % 4999}.txt",
            "created_at": 1767225600,
        }
        lines.append(f"{workspace}\tchunk_entity_relation\t{_node(u)}\t{_node(v)}\t{json.dumps(props)}\n")
    return "".join(lines)


def fill(url: str, workspace: str, edges: int, block: int = 50_000) -> tuple[int, int]:
    """COPY a graph of about ``edges`` edges into LightRAG's tables; (nodes, edges) written."""
    import psycopg

    n = max(16, int(edges / (LAYERS * KEEP)))
    rng = np.random.default_rng(31)
    offsets = rng.choice(np.arange(1, n // 2), size=LAYERS, replace=False)  # < n/2: pairs distinct
    written = 0
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy("COPY lightrag_graph_nodes (workspace, namespace, id, properties) FROM STDIN") as cp:
            for start in range(0, n, block):
                cp.write(_node_block(np.arange(start, min(n, start + block)), workspace))
        cols = "(workspace, namespace, src_id, tgt_id, properties)"
        with cur.copy(f"COPY lightrag_graph_edges {cols} FROM STDIN") as cp:
            for start in range(0, n, block):
                us = np.arange(start, min(n, start + block))
                for off in offsets.tolist():
                    kept = us[rng.random(len(us)) < KEEP]
                    vs = (kept + off) % n
                    a, b = np.minimum(kept, vs), np.maximum(kept, vs)
                    cp.write(_edge_block(a, b, workspace))
                    written += len(a)
        conn.commit()
        conn.execute("ANALYZE lightrag_graph_nodes")
        conn.execute("ANALYZE lightrag_graph_edges")
    return n, written


# --------------------------------------------------------------------------- steps (own process)


async def step_get_all(workdir: Path, workspace: str) -> dict[str, Any]:
    from triage_lightrag.translate import graph_view

    rag = await _rag(workdir, workspace)
    base = _rss_mb()
    t0 = time.perf_counter()
    graph = rag.chunk_entity_relation_graph
    nodes, edges = await graph.get_all_nodes(), await graph.get_all_edges()
    view = await asyncio.to_thread(graph_view, nodes, edges)
    seconds = time.perf_counter() - t0
    await rag.finalize_storages()
    return {
        "seconds": seconds,
        "base_mb": base,
        "peak_mb": _peak_mb(),
        "nodes": len(view.nodes),
        "edges": len(view),
    }


async def step_stream(workdir: Path, workspace: str) -> dict[str, Any]:
    from triage_lightrag.pg_graph import graph_counts, stream_graph

    rag = await _rag(workdir, workspace)
    graph = rag.chunk_entity_relation_graph
    base = _rss_mb()
    t0 = time.perf_counter()
    counts = await graph_counts(graph)
    sql = time.perf_counter() - t0
    t0 = time.perf_counter()
    view = (await stream_graph(graph)).view
    seconds = time.perf_counter() - t0
    await rag.finalize_storages()
    dnr = counts.dead_node_ratio()
    from triage_plugins.metrics.validation import dead_node_ratio

    assert dnr == dead_node_ratio(view), (dnr, dead_node_ratio(view))  # SQL counts what the view counts
    return {
        "seconds": seconds, "counts_seconds": sql, "base_mb": base, "peak_mb": _peak_mb(),
        "nodes": len(view.nodes), "edges": len(view), "sql_nodes": counts.nodes, "sql_edges": counts.edges,
        "sql_dnr": dnr.value,
    }  # fmt: skip


async def step_refresh(workdir: Path, workspace: str) -> dict[str, Any]:
    from triage_lightrag import instrument
    from triage_plugins.kg import gazetteer

    os.environ["TRIAGE_DISABLE_PLUGINS"] = "triage.recorder,triage.implementation"
    rag = await _rag(workdir, workspace)
    inst = instrument(rag, store=workdir / "triage.sqlite")
    syncs: list[float] = []
    cpu: list[float] = []  # the process's CPU seconds (every thread) during each refresh
    original = inst._sync_graph

    async def timed() -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        await original()
        syncs.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)

    inst._sync_graph = timed  # our own method, timed: LightRAG is not touched
    t0 = time.perf_counter()
    await inst._ensure_graph()  # what the first query does: the full (streamed) read
    first = time.perf_counter() - t0
    before = inst._view
    syncs.clear()
    cpu.clear()
    builds = _count_calls(gazetteer.Gazetteer, "__init__")
    t0 = time.perf_counter()
    await rag.ainsert(UPLOAD)
    upload = time.perf_counter() - t0
    view, grounder = inst._view, inst._grounder
    result = {
        "first_read_seconds": first, "upload_seconds": upload, "refresh_seconds": syncs,
        "refresh_cpu_seconds": cpu, "triples_before": len(before), "triples_after": len(view), "peak_mb": _peak_mb(),
        "incremental": view.delta is not None, "gazetteer_builds": len(builds),
    }  # fmt: skip
    inst.uninstrument()
    result.update(await asyncio.to_thread(_rebuild_and_compare, view, grounder))
    result.update(await _compare_with_full_read(rag, view, grounder))
    await rag.finalize_storages()
    return result


def _count_calls(cls: type, name: str) -> list[int]:
    calls: list[int] = []
    original = getattr(cls, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    setattr(cls, name, counted)
    return calls


def _rebuild_and_compare(view: Any, grounder: Any) -> dict[str, Any]:
    """What a refresh cost before the incremental update: the view and the grounder rebuilt whole
    from the updated content (the old ``updated_view`` also made a Python pass over the triples)."""
    from triage_plugins.contract.graph_view import GraphView
    from triage_plugins.kg.grounding import Grounder
    from triage_plugins.metrics.validation import validation_metrics

    t0 = time.perf_counter()
    whole = GraphView(view.triples, nodes=view.nodes, sources=view.sources)
    rebuilt = Grounder(whole)
    seconds = time.perf_counter() - t0
    assert whole == view, "the incremental view differs from the one built whole"
    t0 = time.perf_counter()
    metrics = validation_metrics(view)  # what the metrics plugin computes on the graph event
    metrics_seconds = time.perf_counter() - t0
    texts = [f"Did {n} meet {m}?" for n, m in zip(UPLOAD_NAMES, UPLOAD_NAMES[1:], strict=False)]
    same = [grounder.ground(t) == rebuilt.ground(t) for t in texts]
    grounded = sum(len(grounder.ground(t).nodes) for t in texts)
    return {
        "rebuild_seconds": seconds, "metrics_on_updated_view_seconds": metrics_seconds,
        "groundings_equal": all(same), "grounded_nodes": grounded,
        "updated_values": {k: r.value for k, r in metrics.items()},
    }  # fmt: skip


async def _compare_with_full_read(rag: Any, view: Any, grounder: Any) -> dict[str, Any]:
    """The updated view's validation metrics equal those of a full (streamed) re-read."""
    from triage_lightrag.pg_graph import stream_graph
    from triage_plugins.metrics.validation import validation_metrics

    full = (await stream_graph(rag.chunk_entity_relation_graph)).view
    same_content = set(full.triples) == set(view.triples) and set(full.nodes) == set(view.nodes)
    a = {k: (r.value, dict(r.details)) for k, r in validation_metrics(full).items()}
    b = {k: (r.value, dict(r.details)) for k, r in validation_metrics(view).items()}
    return {"full_reread_same_graph": same_content, "full_reread_same_metrics": a == b}


async def step_metrics(workdir: Path, workspace: str) -> dict[str, Any]:
    from triage_lightrag.pg_graph import stream_graph
    from triage_plugins.metrics.validation import validation_metrics

    rag = await _rag(workdir, workspace)
    view = (await stream_graph(rag.chunk_entity_relation_graph)).view
    await rag.finalize_storages()
    import scipy.sparse.csgraph  # noqa: F401 - imported before the clock starts

    base = _rss_mb()
    t0 = time.perf_counter()
    results = validation_metrics(view)
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    components = int(view.component_labels().max()) + 1
    comp_seconds = time.perf_counter() - t0
    values = {k: (None if r.value is None else round(r.value, 6)) for k, r in results.items()}
    return {
        "seconds": seconds, "components_seconds": comp_seconds, "components": components,
        "values": values, "base_mb": base, "peak_mb": _peak_mb(),
    }  # fmt: skip


STEPS = {"get_all": step_get_all, "stream": step_stream, "refresh": step_refresh, "metrics": step_metrics}


def _run_step(name: str, url: str, workspace: str, workdir: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--step", name, "--postgres", url, "--workspace", workspace]
    out = subprocess.run(
        cmd, cwd=workdir, capture_output=True, text=True, check=False, timeout=1800,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'adapters'}"},
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"step {name} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--postgres", help="a database URL it may fill (default: a throw-away cluster)")
    ap.add_argument("--workspace", default="bench")
    ap.add_argument("--step", choices=sorted(STEPS), help=argparse.SUPPRESS)
    ap.add_argument("--steps", default="get_all,stream,metrics,refresh")  # refresh adds documents
    args = ap.parse_args()
    if args.step:
        _use_database(args.postgres)
        with tempfile.TemporaryDirectory() as tmp:
            result = asyncio.run(STEPS[args.step](Path(tmp), args.workspace))
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    pg = _pgserver()
    cluster = None
    url = args.postgres
    if url is None:
        cluster = pg.server()
        url, _drop = pg.fresh_database(cluster.url)
    _use_database(url)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(_create_tables(Path(tmp), args.workspace))
            t0 = time.perf_counter()
            n, m = fill(url, args.workspace, args.edges)
            sys.stdout.write(f"filled {n} nodes, {m} edges by COPY in {time.perf_counter() - t0:.1f} s\n")
            for name in args.steps.split(","):
                result = _run_step(name, url, args.workspace, Path(tmp))
                sys.stdout.write(f"{name}: {json.dumps(result)}\n")
                sys.stdout.flush()
    finally:
        if cluster is not None and cluster.stop is not None:
            cluster.stop()
    sys.stdout.write(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end\n")
    return 0


async def _create_tables(workdir: Path, workspace: str) -> None:
    rag = await _rag(workdir, workspace)  # LightRAG creates its own tables
    await rag.finalize_storages()


if __name__ == "__main__":
    sys.exit(main())
