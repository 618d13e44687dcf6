"""GraphRAG local search, instrumented vs plain, side by side (offline models, synthetic world corpus).

Builds (once, cached under ``--root``) a GraphRAG 3.3 index of the synthetic world
(:func:`triage_plugins.offline.world.generate_world`) with the scripted offline models, then for
every world question, interleaving plain and instrumented runs:

1. **context step** — what the instrumentation touches before the answer is generated:
   ``context_builder.build_context(query)`` followed by the ``on_context`` callback. Plain: GraphRAG's
   no-op callback. Instrumented: ``GraphRAGInstrumentor.query_callbacks`` (built per query) whose
   ``on_context`` builds the retrieval event (short ids -> stable ids, grounding), queues it and asks
   the gate synchronously (default plugins: recorder, usage metrics, gate, feedback learner, SQLite
   store). The manager's background worker is flushed, untimed, after each instrumented run (in a real
   query it works during the LLM call); "inline" repeats it with a synchronous manager, every handler
   and SQLite write on the timed path (the worst case).
2. **whole search** — ``graphrag.api.local_search`` vs ``GraphRAGInstrumentor.local_search`` (reweighting off).
3. **reweighting on** (for information): the same with ``reweight=True``.

Target: median ratio ≤ 1.05 on the context step. Run::

    python benchmarks/bench_graphrag.py [--root DIR] [--passes 3]
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

    def context_plain(self, q: str) -> float:
        start = time.perf_counter()
        result = self.engine.context_builder.build_context(query=q, **self.engine.context_builder_params)
        self.noop.on_context(result.context_records)
        return time.perf_counter() - start

    def context_triage(self, q: str, inst: Any) -> float:
        f = self.f
        start = time.perf_counter()
        cb = inst.query_callbacks(q, f["entities"], f["relationships"], f["text_units"], f["communities"])
        result = self.engine.context_builder.build_context(query=q, **self.engine.context_builder_params)
        cb.on_context(result.context_records)
        elapsed = time.perf_counter() - start
        inst.flush()  # untimed: the worker's handlers run off the host's path (during the LLM call)
        return elapsed

    async def search_plain(self, q: str) -> float:
        import graphrag.api as api

        f = self.f
        start = time.perf_counter()
        await api.local_search(
            self.config, f["entities"], f["communities"], f["community_reports"], f["text_units"],
            f["relationships"], None, 2, "Multiple Paragraphs", q,
        )  # fmt: skip
        return time.perf_counter() - start

    async def search_triage(self, q: str, inst: Any) -> float:
        f = self.f
        start = time.perf_counter()
        await inst.local_search(
            self.config, f["entities"], f["communities"], f["community_reports"], f["text_units"],
            f["relationships"], None, 2, "Multiple Paragraphs", q,
        )  # fmt: skip
        return time.perf_counter() - start


def run_passes(
    runs: Runs, questions: list[str], passes: int, observed: Any, reweighting: Any, inline: Any
) -> dict[str, list[float]]:
    """Every question per pass, plain and instrumented interleaved (which runs first alternates)."""
    runs.context_triage(questions[0], observed)  # warm caches: the tables are built once per set of frames
    asyncio.run(runs.search_triage(questions[0], reweighting))
    keys = ("ctx_plain", "ctx_triage", "ctx_inline", "s_plain", "s_triage", "s_reweight")
    times: dict[str, list[float]] = {k: [] for k in keys}
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
            observed.flush()
            reweighting.flush()
    return times


def report(times: dict[str, list[float]], observed: Any) -> None:
    def ms(xs: list[float]) -> str:
        return f"median {statistics.median(xs) * 1e3:7.2f} ms  mean {statistics.fmean(xs) * 1e3:7.2f} ms"

    print(f"context step  plain      {ms(times['ctx_plain'])}")
    print(f"context step  triage     {ms(times['ctx_triage'])}")
    ratio_ctx = statistics.median(times["ctx_triage"]) / statistics.median(times["ctx_plain"])
    pairs = [t / p for t, p in zip(times["ctx_triage"], times["ctx_plain"], strict=True)]
    print(
        f"context step  ratio (medians) {ratio_ctx:.3f}; median of per-query ratios "
        f"{statistics.median(pairs):.3f}  (target <= 1.05)"
    )
    ratio_inline = statistics.median(times["ctx_inline"]) / statistics.median(times["ctx_plain"])
    print(
        f"context step  inline     {ms(times['ctx_inline'])}  ratio {ratio_inline:.3f} (synchronous manager)"
    )
    print(f"local search  plain      {ms(times['s_plain'])}")
    print(f"local search  triage     {ms(times['s_triage'])}")
    print(f"local search  reweight   {ms(times['s_reweight'])}")
    ratio = statistics.median(times["s_triage"]) / statistics.median(times["s_plain"])
    print(f"local search  ratio (medians) {ratio:.3f}; reweighting on / plain "
          f"{statistics.median(times['s_reweight']) / statistics.median(times['s_plain']):.3f}")  # fmt: skip
    m = observed.manager
    print(f"store: {m.store.counts()}, dropped events: {m.dropped}, plugin failures: {dict(m.failures)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "bench-graphrag")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--passes", type=int, default=3)
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
    times = run_passes(runs, questions, args.passes, observed, reweighting, inline)
    report(times, observed)
    for inst in (observed, reweighting, inline):
        inst.uninstrument()
    inline.manager.close()


if __name__ == "__main__":
    main()
