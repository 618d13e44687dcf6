"""Overhead of the LightRAG adapter: median ``aquery_data`` and ``aquery`` times, instrumented vs plain.

Per corpus, two LightRAG 1.5.7 instances hold the same graph, built offline (scripted LLM, so the
LLM is free; hashing embedder; byte tokenizer): the ``small`` synthetic corpus and a ``large`` one
(1,000 documents, a graph of a few thousand edges), built once and copied. One instance is
instrumented with a full default manager (store writer, implementation and usage metrics, the gate
in its default ``warn`` mode, feedback learner; SQLite store; background delivery). Every query runs
on both, in blocks of five (one per mode) that alternate between the instances, for ``aquery_data``
and for ``aquery`` (answer generated). The background work an instrumented query leaves (event
building, gate, metrics, SQLite writes on the delivery worker) runs concurrently with the rest of its
block and so slows the instrumented queries; between blocks the workers catch up, untimed, as they
would in a server's idle time (``--no-catch-up`` to measure without). The instances swap roles
half-way; per-query wall times are compared by median, per method, mode and corpus. ``--queries``
counts queries per role, method and corpus. Target: ratio <= 1.05 (DESIGN §2).

Run::

    python benchmarks/bench_lightrag.py --queries 200                    # both corpora, both methods
    python benchmarks/bench_lightrag.py --queries 200 --corpora small --bare   # the adapter alone
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

MODES = ("local", "global", "hybrid", "mix", "naive")
METHODS = ("aquery_data", "aquery")
CORPORA = {
    "small": {},
    "large": {
        "n_people": 200, "n_organisations": 10, "n_cities": 16, "n_countries": 6, "n_films": 225,
        "n_documents": 1000, "n_questions": 60,
    },
}  # fmt: skip


async def _instances(tmp: Path, corpus: str, seed: int) -> tuple[object, object, list[str], int]:
    """Two instances over the same graph: built once, the working directory copied."""
    from triage_lightrag.testing import build_rag
    from triage_plugins.offline.world import generate_world

    world = generate_world(seed, **CORPORA[corpus])
    texts = [d.text for d in world.documents]
    first = await build_rag(
        tmp / "a", texts, workspace="a", llm_model_max_async=16, embedding_func_max_async=16
    )
    await first.finalize_storages()
    shutil.copytree(tmp / "a", tmp / "b")
    if (tmp / "b" / "a").exists():
        (tmp / "b" / "a").rename(tmp / "b" / "b")
    first = await build_rag(tmp / "a", texts, workspace="a", insert=False)
    second = await build_rag(tmp / "b", texts, workspace="b", insert=False)
    edges = len(await first.chunk_entity_relation_graph.get_all_edges())
    return first, second, [q.text for q in world.questions], edges


async def run(
    n_queries: int, seed: int, corpus: str, bare: bool = False, block: int = 5, catch_up: bool = True
) -> tuple[dict[tuple[str, str], tuple[float, float, float, int]], int]:
    """Per (method, mode) and (method, "all"): the :func:`_summary`; and the graph's edge count."""
    from lightrag import QueryParam

    from triage_lightrag import instrument
    from triage_plugins.runtime.manager import TriageManager

    n_blocks = max(1, n_queries // (2 * block))  # blocks per role assignment
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        first, second, questions, edges = await _instances(tmp, corpus, seed)
        if bare:  # the adapter alone: events built and queued, no handler consuming them
            manager = TriageManager(store=None, entry_points=False, defaults=False)
        else:
            manager = TriageManager(store=tmp / "bench.sqlite", entry_points=False)
        times = {(m, mode): {"plain": [], "traced": []} for m in METHODS for mode in MODES}
        plain, traced = first, second  # they swap roles half-way: a difference between them cancels out
        inst = instrument(traced, manager=manager)
        for b in range(2 * n_blocks):
            if b == n_blocks:
                inst.uninstrument()
                plain, traced = second, first
                inst = instrument(traced, manager=manager)
            for method in METHODS:
                for rag in (plain, traced) if b % 2 == 0 else (traced, plain):
                    role = "traced" if rag is traced else "plain"
                    for i in range(block):
                        position = b * block + i  # both roles see the same queries, every mode
                        mode = MODES[position % len(MODES)]
                        q = questions[position // len(MODES) % len(questions)]
                        t0 = time.perf_counter()
                        await getattr(rag, method)(q, QueryParam(mode=mode, enable_rerank=False))
                        times[(method, mode)][role].append(time.perf_counter() - t0)
                    if catch_up:  # untimed: the workers finish what the block left (idle time)
                        inst.flush()
        inst.flush()
        manager.close()
        await first.finalize_storages()
        await second.finalize_storages()
    out = {key: _summary(r["plain"], r["traced"]) for key, r in times.items()}
    for method in METHODS:
        rows = [r for (m, _), r in times.items() if m == method]
        out[(method, "all")] = _summary(
            [t for r in rows for t in r["plain"]], [t for r in rows for t in r["traced"]]
        )
    return out, edges


def _summary(plain: list[float], traced: list[float]) -> tuple[float, float, float, int]:
    """Median plain, median traced, median of the paired ratios (same query, same position), n."""
    ratios = [t / p for p, t in zip(plain, traced, strict=True)]
    return statistics.median(plain), statistics.median(traced), statistics.median(ratios), len(plain)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpora", default="small,large", help="comma-separated: small, large")
    parser.add_argument("--bare", action="store_true", help="manager without the default plugins")
    parser.add_argument("--block", type=int, default=5, help="queries per block (1 = query by query)")
    parser.add_argument(
        "--no-catch-up", action="store_true", help="do not let the workers catch up between blocks"
    )
    args = parser.parse_args(argv)
    corpora = [c.strip() for c in args.corpora.split(",") if c.strip()]
    unknown = [c for c in corpora if c not in CORPORA]
    if unknown:
        parser.error(f"unknown corpus {unknown[0]!r}; choose from {', '.join(CORPORA)}")
    logging.disable(logging.WARNING)
    sys.stdout.write(
        f"{'corpus':7} {'edges':>6} {'method':12} {'mode':7} {'n':>4} {'plain ms':>9} {'traced ms':>10} "
        f"{'ratio':>6} {'paired':>7}\n"
    )
    for corpus in corpora:
        result, edges = asyncio.run(
            run(args.queries, args.seed, corpus, args.bare, args.block, not args.no_catch_up)
        )
        for (method, mode), (plain, traced, paired, n) in result.items():
            sys.stdout.write(
                f"{corpus:7} {edges:6d} {method:12} {mode:7} {n:4d} {plain * 1e3:9.2f} {traced * 1e3:10.2f} "
                f"{traced / plain:6.3f} {paired:7.3f}\n"
            )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
