"""Cost of the GraphRAG adapter (local search): host-path latency and total process CPU, one run.

Builds (once, cached under ``--root``) a GraphRAG 3.3 index of the synthetic world
(:func:`triage_plugins.offline.world.generate_world`) with the scripted offline models, then for
every world question, interleaving plain and instrumented runs (which goes first alternates):

1. **context step** (~30-40 ms) — what the instrumentation touches before the answer is generated:
   ``context_builder.build_context(query)`` followed by the ``on_context`` callback. Plain: GraphRAG's
   no-op callback. Instrumented: ``GraphRAGInstrumentor.query_callbacks`` (built per query) whose
   ``on_context`` builds the retrieval event (short ids -> stable ids, grounding), queues it and asks
   the gate synchronously (default plugins: recorder, usage metrics, gate, feedback learner, SQLite
   store). "inline" repeats it with a synchronous manager (every handler and SQLite write on the
   host's path: the worst case for latency).
2. **whole search** (~80-100 ms, the offline model answering) — ``graphrag.api.local_search`` vs
   ``GraphRAGInstrumentor.local_search`` (reweighting off); for information, reweighting on.

Two figures per run: **latency** (wall time on the host's path) and **total CPU**
(``time.process_time()``, every thread, from the start of the run until the instrumented manager's
queue is flushed: the deferred work — usage metrics, SQLite writes on the worker — is inside it).
The CPU ratio comes with a 95 % bootstrap interval over the paired queries (``ratio_ci.py``).
Targets: total CPU <= 1.03 (issue #20), latency <= 1.05. Run::

    python benchmarks/bench_graphrag.py [--root DIR] [--passes 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ratio_ci import cost_interval, format_interval

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def build(root: Path, seed: int) -> None:
    import graphrag.api as api

    from triage_graphrag.offline import offline_config
    from triage_plugins.offline.world import generate_world

    if (root / "output" / "relationships.parquet").exists():
        return
    world = generate_world(seed)
    (root / "input").mkdir(parents=True, exist_ok=True)
    for doc in world.documents:
        (root / "input" / f"{doc.id}.txt").write_text(doc.text, encoding="utf-8")
    results = asyncio.run(api.build_index(offline_config(root)))
    failed = [r.workflow for r in results if r.error is not None]
    if failed:
        raise SystemExit(f"index build failed in {failed}")


def load(root: Path, seed: int) -> tuple[Any, dict[str, Any], list[str]]:
    """The offline config, the output tables and the world's questions (index built if needed)."""
    import pandas as pd

    from triage_graphrag.offline import offline_config
    from triage_plugins.offline.world import generate_world

    t0 = time.perf_counter()
    build(root, seed)
    print(f"index: {root} ({time.perf_counter() - t0:.1f} s incl. build if needed)")
    names = ("entities", "communities", "community_reports", "text_units", "relationships")
    frames = {n: pd.read_parquet(root / "output" / f"{n}.parquet") for n in names}
    return offline_config(root), frames, [q.text for q in generate_world(seed).questions]


def local_engine(config: Any, f: dict[str, Any]) -> Any:
    """GraphRAG's own local search engine over the tables (for the context step)."""
    from graphrag.config.embeddings import entity_description_embedding
    from graphrag.query.factory import get_local_search_engine
    from graphrag.query.indexer_adapters import (
        read_indexer_entities,
        read_indexer_relationships,
        read_indexer_reports,
        read_indexer_text_units,
    )
    from graphrag.utils.api import get_embedding_store

    return get_local_search_engine(
        config=config,
        reports=read_indexer_reports(f["community_reports"], f["communities"], 2),
        text_units=read_indexer_text_units(f["text_units"]),
        entities=read_indexer_entities(f["entities"], f["communities"], 2),
        relationships=read_indexer_relationships(f["relationships"]),
        covariates={"claims": []},
        description_embedding_store=get_embedding_store(
            config=config.vector_store, embedding_name=entity_description_embedding
        ),
        response_type="Multiple Paragraphs",
    )


class Runs:
    """The timed runs: the context step and the whole search, plain and instrumented."""

    def __init__(self, config: Any, frames: dict[str, Any], engine: Any) -> None:
        from graphrag.callbacks.noop_query_callbacks import NoopQueryCallbacks

        self.config, self.f, self.engine = config, frames, engine
        self.noop = NoopQueryCallbacks()

    def context_plain(self, q: str) -> tuple[float, float]:
        cpu0, start = time.process_time(), time.perf_counter()
        result = self.engine.context_builder.build_context(query=q, **self.engine.context_builder_params)
        self.noop.on_context(result.context_records)
        return time.perf_counter() - start, time.process_time() - cpu0

    def context_triage(self, q: str, inst: Any) -> tuple[float, float]:
        f = self.f
        cpu0, start = time.process_time(), time.perf_counter()
        cb = inst.query_callbacks(q, f["entities"], f["relationships"], f["text_units"], f["communities"])
        result = self.engine.context_builder.build_context(query=q, **self.engine.context_builder_params)
        cb.on_context(result.context_records)
        elapsed = time.perf_counter() - start
        inst.flush()  # the deferred work, inside the CPU measurement (not the latency)
        return elapsed, time.process_time() - cpu0

    async def search_plain(self, q: str) -> tuple[float, float]:
        import graphrag.api as api

        f = self.f
        cpu0, start = time.process_time(), time.perf_counter()
        await api.local_search(
            self.config, f["entities"], f["communities"], f["community_reports"], f["text_units"],
            f["relationships"], None, 2, "Multiple Paragraphs", q,
        )  # fmt: skip
        return time.perf_counter() - start, time.process_time() - cpu0

    async def search_triage(self, q: str, inst: Any) -> tuple[float, float]:
        f = self.f
        cpu0, start = time.process_time(), time.perf_counter()
        await inst.local_search(
            self.config, f["entities"], f["communities"], f["community_reports"], f["text_units"],
            f["relationships"], None, 2, "Multiple Paragraphs", q,
        )  # fmt: skip
        elapsed = time.perf_counter() - start
        inst.flush()
        return elapsed, time.process_time() - cpu0


def run_passes(
    runs: Runs, questions: list[str], passes: int, observed: Any, reweighting: Any, inline: Any
) -> dict[str, list[tuple[float, float]]]:
    """Every question per pass, plain and instrumented interleaved (which runs first alternates)."""
    runs.context_triage(questions[0], observed)  # warm caches: the tables are built once per set of frames
    asyncio.run(runs.search_triage(questions[0], reweighting))
    keys = ("ctx_plain", "ctx_triage", "ctx_inline", "s_plain", "s_triage", "s_reweight")
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in keys}
    for p in range(passes):
        for i, q in enumerate(questions):
            first_plain = (i + p) % 2 == 0  # alternate which side runs first
            pair = [
                ("ctx_plain", lambda q=q: runs.context_plain(q)),
                ("ctx_triage", lambda q=q: runs.context_triage(q, observed)),
            ]
            for key, fn in pair if first_plain else pair[::-1]:
                times[key].append(fn())
            times["ctx_inline"].append(runs.context_triage(q, inline))
            order = [
                ("s_plain", lambda q=q: runs.search_plain(q)),
                ("s_triage", lambda q=q: runs.search_triage(q, observed)),
            ]
            for key, fn in order if first_plain else order[::-1]:
                times[key].append(asyncio.run(fn()))
            times["s_reweight"].append(asyncio.run(runs.search_triage(q, reweighting)))
    return times


def report(times: dict[str, list[tuple[float, float]]], observed: Any) -> None:
    print(
        f"{'step':13} {'side':9} {'n':>4} {'latency ms':>10} {'ratio':>6} {'paired':>6} "
        f"{'cpu ms':>7} {'cpu ratio':>9} {'cpu 95% CI':>11}"
    )
    for step, plain, sides in (
        ("context step", "ctx_plain", ("ctx_triage", "ctx_inline")),
        ("local search", "s_plain", ("s_triage", "s_reweight")),
    ):
        lp = [t for t, _ in times[plain]]
        cp = sum(c for _, c in times[plain])
        print(f"{step:13} {'plain':9} {len(lp):4d} {statistics.median(lp) * 1e3:10.2f} {'':6} {'':6} "
              f"{cp / len(lp) * 1e3:7.2f}")  # fmt: skip
        for key in sides:
            lt = [t for t, _ in times[key]]
            ct = sum(c for _, c in times[key])
            ci = format_interval(cost_interval([c for _, c in times[plain]], [c for _, c in times[key]]))
            paired = statistics.median(t / p for t, p in zip(lt, lp, strict=True))
            side = {"ctx_triage": "triage", "ctx_inline": "inline", "s_triage": "triage"}.get(key, "reweight")
            print(
                f"{step:13} {side:9} {len(lt):4d} {statistics.median(lt) * 1e3:10.2f} "
                f"{statistics.median(lt) / statistics.median(lp):6.3f} {paired:6.3f} "
                f"{ct / len(lt) * 1e3:7.2f} {ct / cp:9.3f} {ci:>11}"
            )
    m = observed.manager
    print(f"store: {m.store.counts()}, dropped events: {m.dropped}, plugin failures: {dict(m.failures)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "bench-graphrag")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()

    from triage_graphrag import GraphRAGInstrumentor

    config, frames, questions = load(args.root, args.seed)
    f = frames
    print(
        f"graph: {len(f['entities'])} entities, {len(f['relationships'])} relationships, "
        f"{len(f['text_units'])} text units; {len(questions)} questions x {args.passes} passes"
    )
    runs = Runs(config, frames, local_engine(config, frames))
    paths = {name: args.root / f"{name}.sqlite" for name in ("bench", "bench-reweight", "bench-sync")}
    for path in paths.values():
        path.unlink(missing_ok=True)
    # one instrumentor per manager, each owning it (closed by uninstrument)
    observed = GraphRAGInstrumentor().instrument(store=paths["bench"])
    reweighting = GraphRAGInstrumentor().instrument(store=paths["bench-reweight"], reweight=True)
    from triage_plugins.runtime.manager import TriageManager

    inline = GraphRAGInstrumentor().instrument(
        manager=TriageManager(store=paths["bench-sync"], synchronous=True)
    )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    times = run_passes(runs, questions, args.passes, observed, reweighting, inline)
    report(times, observed)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    for inst in (observed, reweighting, inline):
        inst.uninstrument()
    inline.manager.close()


if __name__ == "__main__":
    main()
