"""Host-path latency of one LightRAG query kind under several manager set-ups, side by side.

One process, two LightRAG instances over the same offline graph (see ``bench_lightrag.py``). For
each set-up in ``--configs`` the second instance is instrumented with that manager, then plain and
instrumented blocks of 5 queries alternate (the instrumented block flushed after it, outside the
timing); each query's wall time is taken on the host's path. Set-ups:

- ``bare``: a manager without plugins (the adapter's own work: wrappers, the deferred event build);
- ``defaults``: the default plugins and a SQLite store (what ``instrument()`` gives);
- ``nodefer``: a manager without plugins whose ``defer`` does nothing (the wrappers alone).

Run::

    python benchmarks/bench_lightrag_host.py --mode naive --method aquery_data --configs bare,defaults,nodefer
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_lightrag  # noqa: E402

CONFIGS = ("bare", "defaults", "nodefer")


def _manager(config: str, tmp: Path) -> Any:
    from triage_plugins.runtime.manager import TriageManager

    if config == "defaults":
        return TriageManager(store=tmp / f"{time.monotonic_ns()}.sqlite", entry_points=False)
    manager = TriageManager(store=None, entry_points=False, defaults=False)
    if config == "nodefer":
        manager.defer = lambda fn, *args: True  # type: ignore[method-assign]
    return manager


async def run(mode: str, method: str, configs: list[str], blocks: int, corpus: str) -> None:
    from lightrag import QueryParam

    from triage_lightrag import instrument

    delay = bench_lightrag.ModelDelay()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        plain, traced, questions, _ = await bench_lightrag._instances(tmp, corpus, 0, delay)

        async def ask(rag: Any, q: str) -> float:
            t0 = time.perf_counter()
            await getattr(rag, method)(q, QueryParam(mode=mode, enable_rerank=False))
            return time.perf_counter() - t0

        for config in configs:
            manager = _manager(config, tmp)
            inst = instrument(traced, manager=manager)
            for q in questions[:3]:  # untimed: the graph event, first-use costs
                await ask(traced, q)
            inst.flush()
            lat: dict[str, list[float]] = {"plain": [], "traced": []}
            for r in range(blocks):
                block = [questions[(r * 5 + i) % len(questions)] for i in range(5)]
                for rag in (plain, traced) if r % 2 else (traced, plain):
                    role = "traced" if rag is traced else "plain"
                    for q in block:
                        lat[role].append(await ask(rag, q))
                    if rag is traced:
                        inst.flush()
            inst.uninstrument()
            manager.close()
            mp, mt = statistics.median(lat["plain"]), statistics.median(lat["traced"])
            paired = statistics.median(b / a for a, b in zip(lat["plain"], lat["traced"], strict=True))
            print(f"{config:9s} n {len(lat['plain']):4d}  plain {mp * 1e3:.3f} ms  traced {mt * 1e3:.3f} ms  "
                  f"diff {1e6 * (mt - mp):+5.0f} µs  ratio {mt / mp:.3f}  paired {paired:.3f}", flush=True)  # fmt: skip
        await plain.finalize_storages()
        await traced.finalize_storages()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="naive", choices=bench_lightrag.MODES)
    parser.add_argument("--method", default="aquery_data", choices=bench_lightrag.METHODS)
    parser.add_argument(
        "--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}"
    )
    parser.add_argument("--blocks", type=int, default=60, help="blocks of 5 queries per side and set-up")
    parser.add_argument("--corpus", default="small", choices=tuple(bench_lightrag.CORPORA))
    args = parser.parse_args(argv)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    wrong = [c for c in configs if c not in CONFIGS]
    if wrong or not configs or args.blocks < 1:
        parser.error(
            f"unknown set-up {(wrong or [''])[0]!r}; choose from {', '.join(CONFIGS)}; --blocks >= 1"
        )
    logging.disable(logging.WARNING)
    asyncio.run(run(args.mode, args.method, configs, args.blocks, args.corpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
