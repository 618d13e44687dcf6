"""Where an instrumented query's extra CPU goes: each part's own thread CPU per query, per framework.

The default plugins' hooks, the store writes and the adapter's event builders are wrapped with a
timer of the calling thread's CPU (``time.thread_time``; a part's time excludes the timed parts it
calls). Queries then run on the instrumented host (default plugins, SQLite store, background
delivery) and as many on a plain one, interleaved; the total process CPU of both sides is printed
beside the parts. On a shared machine the total moves by several per cent between runs, the parts
far less: compare parts across trees, totals within one run.

- ``lightrag``: ``--queries`` queries of one ``--mode`` and ``--method`` on the ``--corpus`` instance
  (blocks of 5, each flushed), then as many on a plain instance;
- ``graphrag``: ``local_search`` through the instrumentor (flushed after each query, as
  ``bench_graphrag.py`` does) and ``graphrag.api.local_search``, alternating per question;
- ``llamaindex``: the stock query engine of a PropertyGraphIndex, blocks of 5 with the handlers
  on (flushed) and off, alternating, as ``bench_llamaindex.py`` does.

Run::

    python benchmarks/bench_parts.py --framework lightrag --mode global --method aquery --queries 60
    python benchmarks/bench_parts.py --framework graphrag --queries 60
    python benchmarks/bench_parts.py --framework llamaindex --queries 100

``--deep`` splits the parts further (the grounder, event validation, the manager's hook calls; for
LightRAG the translation's steps), timed only inside the parts above (the offline LLM grounds text
on the host too); each timer costs a little, so the total grows.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import logging
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SELF: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)
_LOCAL = threading.local()

#: (module, class, methods) timed for every framework: the default plugins and the store.
CORE_PARTS = (
    ("triage_plugins.plugins.recorder", "StoreRecorder", ("triage_retrieval", "triage_generation", "write_pending")),
    ("triage_plugins.plugins.usage", "UsageRecorder", ("triage_retrieval", "triage_generation", "write_pending")),
    ("triage_plugins.plugins.gate", "DefaultGate", ("triage_gate",)),
    ("triage_plugins.plugins.feedback", "FeedbackLearner", ("triage_retrieval", "triage_generation")),
    ("triage_plugins.store.sqlite", "SQLiteStore", ("record_events", "record_metrics")),
)  # fmt: skip
#: The adapter's own event builders, per framework.
ADAPTER_PARTS = {
    "lightrag": (
        ("triage_lightrag.instrument", "LightRAGInstrumentor", ("_retrieval_event", "_emit_retrieval", "_emit_generation")),
    ),
    "graphrag": (
        ("triage_graphrag.instrument", "_QueryRecorder", ("_retrieval", "generation")),
        ("triage_graphrag.instrument", "GraphRAGInstrumentor", ("query_callbacks",)),
    ),
    "llamaindex": (
        ("triage_llamaindex.instrument", "LlamaIndexInstrumentor", (
            "_on_retrieval", "_emit_retrieval", "_on_query_end", "_on_completion", "_ground", "_shown_chunks",
        )),
    ),
}  # fmt: skip
#: Module-level functions of the adapter, timed where their callers look them up.
ADAPTER_FUNCTIONS = {
    "graphrag": (("triage_graphrag.instrument", ("retrieval_event", "generation_event", "graph_tables")),),
}
#: ``--deep``: what the parts above spend their time in (grounding, event validation, the manager's
#: hook calls), and the LightRAG translation's steps; each then shows as a part of its own.
DEEP_PARTS = (
    ("triage_plugins.kg.grounding", "Grounder", ("ground", "ground_answer", "link")),
    ("triage_plugins.contract.events", "RetrievalEvent", ("__post_init__",)),
    ("triage_plugins.contract.events", "Subgraph", ("__post_init__",)),
    ("triage_plugins.contract.events", "GenerationEvent", ("__post_init__",)),
    ("triage_plugins.runtime.manager", "TriageManager", ("emit_retrieval", "emit_generation", "gate")),
)
DEEP_FUNCTIONS = {
    "lightrag": (
        ("triage_lightrag.instrument", ("retrieval_event",)),
        ("triage_lightrag.translate", ("query_mentions", "retrieved_subgraph", "retrieved_chunks")),
    ),
}


def _timed(name: str, fn: Callable[..., Any], *, inside: bool = False) -> Callable[..., Any]:
    """``fn`` timed as the part ``name``; with ``inside``, only when a timed part calls it (a
    ``--deep`` part: the offline LLM's own grounding on the host is not ours)."""

    @functools.wraps(fn)  # keeps pluggy's hookimpl markers
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stack = _LOCAL.__dict__.setdefault("stack", [])
        if inside and not stack:
            return fn(*args, **kwargs)
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


def _module(name: str) -> Any:
    importlib.import_module(name)
    return sys.modules[name]  # not the package attribute: triage_*.instrument is also a function


def _wrap_parts(framework: str, deep: bool = False) -> None:
    parts = [(p, False) for p in CORE_PARTS + ADAPTER_PARTS[framework]]
    functions = [(f, False) for f in ADAPTER_FUNCTIONS.get(framework, ())]
    if deep:
        parts += [(p, True) for p in DEEP_PARTS]
        functions += [(f, True) for f in DEEP_FUNCTIONS.get(framework, ())]
    for (module, cls_name, names), inside in parts:
        cls = getattr(_module(module), cls_name)
        for name in names:
            setattr(cls, name, _timed(f"{cls_name}.{name}", getattr(cls, name), inside=inside))
    for (module, names), inside in functions:
        mod = _module(module)
        for name in names:
            setattr(mod, name, _timed(name, getattr(mod, name), inside=inside))


def _reset() -> None:
    SELF.clear()
    CALLS.clear()


def _report(label: str, n: int, traced: float, plain: float) -> None:
    traced_ms, plain_ms = 1e3 * traced / n, 1e3 * plain / n
    print(f"{label}, {n} queries: process CPU traced {traced_ms:.2f} ms/query, plain {plain_ms:.2f}, "
          f"difference {traced_ms - plain_ms:.3f} ms")  # fmt: skip
    for part, spent in sorted(SELF.items(), key=lambda kv: -kv[1]):
        print(f"  {part:44s} {1e6 * spent / n:8.1f} µs/query  ({CALLS[part] / n:.2f} calls/query)")
    print(f"  {'parts listed, together':44s} {1e6 * sum(SELF.values()) / n:8.1f} µs/query")


# --------------------------------------------------------------------------- LightRAG


async def _lightrag(mode: str, method: str, n: int, corpus: str) -> None:
    import bench_lightrag
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
        _reset()
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
    _report(f"lightrag {corpus} {mode} {method}", n, c1 - c0, c2 - c1)


# --------------------------------------------------------------------------- GraphRAG


def _graphrag(n: int, root: Path) -> None:
    import bench_graphrag
    import graphrag.api as api

    from triage_graphrag import GraphRAGInstrumentor

    config, f, questions = bench_graphrag.load(root, 0)
    args = (config, f["entities"], f["communities"], f["community_reports"], f["text_units"],
            f["relationships"], None, 2, "Multiple Paragraphs")  # fmt: skip
    with tempfile.TemporaryDirectory() as name:
        inst = GraphRAGInstrumentor().instrument(store=Path(name) / "parts.sqlite")
        asyncio.run(inst.local_search(*args, questions[0]))  # untimed: tables, first-use costs
        inst.flush()
        _reset()
        traced = plain = 0.0
        for i in range(n):
            q = questions[i % len(questions)]
            for side in ("plain", "traced") if i % 2 == 0 else ("traced", "plain"):
                c0 = time.process_time()
                if side == "traced":
                    asyncio.run(inst.local_search(*args, q))
                    inst.flush()
                    traced += time.process_time() - c0
                else:
                    asyncio.run(api.local_search(*args, q))
                    plain += time.process_time() - c0
        inst.uninstrument()
    _report("graphrag local_search", n, traced, plain)


# --------------------------------------------------------------------------- LlamaIndex


def _llamaindex(n: int) -> None:
    import bench_llamaindex
    from llama_index.core import PropertyGraphIndex

    from triage_llamaindex import instrument
    from triage_plugins.runtime.manager import TriageManager

    nodes, questions = bench_llamaindex.world_corpus(0, n)
    llm, embed = bench_llamaindex.DelayedLLM(logprobs=False), bench_llamaindex.DelayedEmbedding()
    index = PropertyGraphIndex(nodes=nodes, llm=llm, embed_model=embed)
    engine = index.as_query_engine(llm=llm)
    for q in questions[:20]:  # warm caches and lazy imports on both paths
        engine.query(q)
    with tempfile.TemporaryDirectory() as name:
        manager = TriageManager(store=Path(name) / "parts.sqlite", entry_points=False)
        inst = instrument(manager=manager)
        inst.emit_graph(index)
        for q in questions[:5]:
            engine.query(q)
        inst.flush()
        _reset()
        traced = plain = 0.0
        for b, start in enumerate(range(0, n, 5)):
            block = questions[start : start + 5]
            for on in (False, True) if b % 2 == 0 else (True, False):
                (inst.instrument if on else inst.uninstrument)()
                c0 = time.process_time()
                for q in block:
                    engine.query(q)
                if on:
                    inst.flush()
                    traced += time.process_time() - c0
                else:
                    plain += time.process_time() - c0
        inst.uninstrument()
        manager.close()
    _report("llamaindex query engine", n, traced, plain)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="lightrag", choices=tuple(ADAPTER_PARTS))
    parser.add_argument("--queries", type=int, default=60, help="queries per side")
    parser.add_argument("--mode", default="global", help="LightRAG query mode")
    parser.add_argument("--method", default="aquery", help="LightRAG method: aquery or aquery_data")
    parser.add_argument("--corpus", default="small", help="LightRAG corpus: small or large")
    parser.add_argument("--deep", action="store_true",
                        help="also time grounding, event validation and the manager's hook calls")  # fmt: skip
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "bench-graphrag",
                        help="GraphRAG index directory (built once, as bench_graphrag.py does)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.queries < 1:
        parser.error("--queries must be >= 1")
    if args.framework == "lightrag":
        import bench_lightrag

        for value, choices, flag in ((args.mode, bench_lightrag.MODES, "--mode"),
                                     (args.method, bench_lightrag.METHODS, "--method"),
                                     (args.corpus, tuple(bench_lightrag.CORPORA), "--corpus")):  # fmt: skip
            if value not in choices:
                parser.error(f"{flag} must be one of {', '.join(choices)}, got {value!r}")
    logging.disable(logging.WARNING)
    _wrap_parts(args.framework, args.deep)
    if args.framework == "lightrag":
        asyncio.run(_lightrag(args.mode, args.method, args.queries, args.corpus))
    elif args.framework == "graphrag":
        _graphrag(args.queries, args.root)
    else:
        _llamaindex(args.queries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
