"""Where an instrumented LightRAG query's extra CPU goes: each part's own thread CPU per query.

The default plugins' hooks, the store writes and the adapter's event builders are wrapped with a
timer of the calling thread's CPU (``time.thread_time``; a part's time excludes the timed parts it
calls), then ``--queries`` queries of one mode run on the instrumented instance (blocks of 5, each
flushed) and as many on a plain one; the total process CPU of both sides is printed beside the parts.

Run::

    python benchmarks/bench_lightrag_parts.py --mode global --method aquery --queries 60
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import logging
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_lightrag  # noqa: E402

SELF: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)
_LOCAL = threading.local()

PARTS = (
    ("triage_plugins.plugins.recorder", "StoreRecorder", ("triage_retrieval", "triage_generation", "write_pending")),
    ("triage_plugins.plugins.usage", "UsageRecorder", ("triage_retrieval", "triage_generation", "write_pending")),
    ("triage_plugins.plugins.gate", "DefaultGate", ("triage_gate",)),
    ("triage_plugins.plugins.feedback", "FeedbackLearner", ("triage_retrieval", "triage_generation")),
    ("triage_plugins.store.sqlite", "SQLiteStore", ("record_events", "record_metrics")),
    ("triage_lightrag.instrument", "LightRAGInstrumentor", ("_retrieval_event", "_emit_retrieval", "_emit_generation")),
)  # fmt: skip


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)  # keeps pluggy's hookimpl markers
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stack = _LOCAL.__dict__.setdefault("stack", [])
        start = time.thread_time()
        stack.append(0.0)
        try:
            return fn(*args, **kwargs)
        finally:
            spent = time.thread_time() - start
            SELF[name] += spent - stack.pop()
            CALLS[name] += 1
            if stack:
                stack[-1] += spent

    return wrapper


def _wrap_parts() -> None:
    for module, cls_name, names in PARTS:
        cls = getattr(importlib.import_module(module), cls_name)
        for name in names:
            setattr(cls, name, _timed(f"{cls_name}.{name}", getattr(cls, name)))


async def run(mode: str, method: str, n: int, corpus: str) -> None:
    from lightrag import QueryParam

    from triage_lightrag import instrument
    from triage_plugins.runtime.manager import TriageManager

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        plain, traced, questions, _ = await bench_lightrag._instances(
            tmp, corpus, 0, bench_lightrag.ModelDelay()
        )
        manager = TriageManager(store=tmp / "parts.sqlite", entry_points=False)
        inst = instrument(traced, manager=manager)

        async def ask(rag: Any, i: int) -> None:
            await getattr(rag, method)(
                questions[i % len(questions)], QueryParam(mode=mode, enable_rerank=False)
            )

        for i in range(3):  # untimed: the graph event, first-use costs
            await ask(traced, i)
        inst.flush()
        SELF.clear()
        CALLS.clear()
        c0 = time.process_time()
        for start in range(0, n, 5):
            for i in range(start, min(n, start + 5)):
                await ask(traced, i)
            inst.flush()
        c1 = time.process_time()
        for i in range(n):
            await ask(plain, i)
        c2 = time.process_time()
        inst.uninstrument()
        manager.close()
        await plain.finalize_storages()
        await traced.finalize_storages()
    traced_ms, plain_ms = 1e3 * (c1 - c0) / n, 1e3 * (c2 - c1) / n
    print(f"{corpus} {mode} {method}, {n} queries: process CPU traced {traced_ms:.2f} ms/query, "
          f"plain {plain_ms:.2f}, difference {traced_ms - plain_ms:.3f} ms")  # fmt: skip
    for part, spent in sorted(SELF.items(), key=lambda kv: -kv[1]):
        print(f"  {part:42s} {1e6 * spent / n:8.1f} µs/query  ({CALLS[part] / n:.2f} calls/query)")
    print(f"  {'parts listed, together':42s} {1e6 * sum(SELF.values()) / n:8.1f} µs/query")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="global", choices=bench_lightrag.MODES)
    parser.add_argument("--method", default="aquery", choices=bench_lightrag.METHODS)
    parser.add_argument("--queries", type=int, default=60, help="queries per side")
    parser.add_argument("--corpus", default="small", choices=tuple(bench_lightrag.CORPORA))
    args = parser.parse_args(argv)
    if args.queries < 1:
        parser.error("--queries must be >= 1")
    logging.disable(logging.WARNING)
    _wrap_parts()
    asyncio.run(run(args.mode, args.method, args.queries, args.corpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
