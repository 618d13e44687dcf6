"""Overhead of the LightRAG adapter: median ``aquery_data`` time, instrumented vs plain, side by side.

Two LightRAG 1.5.7 instances are built offline from the same synthetic corpus (scripted LLM,
hashing embedder, byte tokenizer); one is instrumented with a full default manager (store writer,
usage metrics, gate, feedback learner; SQLite store; background delivery). Every query runs on both,
in blocks of five queries (one per mode) that alternate between the instances. The background work
an instrumented query leaves (event building, metrics, SQLite writes on worker threads) runs
concurrently with the rest of its block and so slows the instrumented queries; between blocks the
workers catch up, untimed, as they would in a server's idle time (``--no-catch-up`` to measure
without). The instances swap roles half-way (a difference between the two cancels out); per-query
wall times are compared by median, per mode and overall. ``--queries`` counts queries per role. Target: ratio
<= 1.05 (DESIGN §2 "stay off the host's hot path").

Run::

    python benchmarks/bench_lightrag.py --queries 500          # full default manager
    python benchmarks/bench_lightrag.py --queries 500 --bare   # the adapter alone
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

MODES = ("local", "global", "hybrid", "mix", "naive")


async def run(
    n_queries: int, seed: int, bare: bool = False, block: int = 5, catch_up: bool = True
) -> dict[str, tuple[float, float, float, int]]:
    from lightrag import QueryParam

    from triage_lightrag import instrument
    from triage_lightrag.testing import build_rag
    from triage_plugins.offline.world import generate_world
    from triage_plugins.runtime.manager import TriageManager

    n_blocks = max(1, n_queries // (2 * block))  # blocks per role assignment
    world = generate_world(seed)
    texts = [d.text for d in world.documents]
    questions = [q.text for q in world.questions]
    with tempfile.TemporaryDirectory() as tmp:
        first = await build_rag(Path(tmp) / "a", texts, workspace="a")
        second = await build_rag(Path(tmp) / "b", texts, workspace="b")
        if bare:  # the adapter alone: events built and queued, no handler consuming them
            manager = TriageManager(store=None, entry_points=False, defaults=False)
        else:
            manager = TriageManager(store=Path(tmp) / "bench.sqlite", entry_points=False)
        times: dict[str, dict[str, list[float]]] = {m: {"plain": [], "traced": []} for m in MODES}
        # the two instances swap roles half-way, so any difference between them cancels out
        plain, traced = first, second
        inst = instrument(traced, manager=manager)
        for b in range(2 * n_blocks):
            if b == n_blocks:
                inst.uninstrument()
                plain, traced = second, first
                inst = instrument(traced, manager=manager)
            order = (plain, traced) if b % 2 == 0 else (traced, plain)
            for rag in order:
                role = "traced" if rag is traced else "plain"
                for i in range(block):
                    # both roles see the same queries; each question is asked in every mode
                    position = b * block + i
                    mode = MODES[position % len(MODES)]
                    q = questions[position // len(MODES) % len(questions)]
                    t0 = time.perf_counter()
                    await rag.aquery_data(q, QueryParam(mode=mode, enable_rerank=False))
                    times[mode][role].append(time.perf_counter() - t0)
                if catch_up:  # untimed: the workers finish what the block left (a server's idle time)
                    inst.flush()
        inst.flush()
        manager.close()
        await first.finalize_storages()
        await second.finalize_storages()
    out = {}
    for mode, by_role in times.items():
        out[mode] = _summary(by_role["plain"], by_role["traced"])
    out["all"] = _summary(
        [t for by_role in times.values() for t in by_role["plain"]],
        [t for by_role in times.values() for t in by_role["traced"]],
    )
    return out


def _summary(plain: list[float], traced: list[float]) -> tuple[float, float, float, int]:
    """Median plain, median traced, median of the paired ratios (same query, same position), n."""
    ratios = [t / p for p, t in zip(plain, traced, strict=True)]
    return statistics.median(plain), statistics.median(traced), statistics.median(ratios), len(plain)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bare", action="store_true", help="manager without the default plugins")
    parser.add_argument("--block", type=int, default=5, help="queries per block (1 = query by query)")
    parser.add_argument(
        "--no-catch-up", action="store_true", help="do not let the workers catch up between blocks"
    )
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    result = asyncio.run(run(args.queries, args.seed, args.bare, args.block, not args.no_catch_up))
    sys.stdout.write(f"{'mode':8} {'n':>4} {'plain ms':>9} {'traced ms':>10} {'ratio':>6} {'paired':>7}\n")
    for mode, (plain, traced, paired, n) in result.items():
        sys.stdout.write(
            f"{mode:8} {n:4d} {plain * 1e3:9.2f} {traced * 1e3:10.2f} {traced / plain:6.3f} {paired:7.3f}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
