"""Overhead of the LlamaIndex adapter on the host's query path: instrumented vs plain, side by side.

One PropertyGraphIndex (offline scripted LLM + hashing embedding) over the core's synthetic world
(``generate_world``: 236 chunks, 1-3 hop questions); the stock ``index.as_query_engine()`` (both sub-retrievers, ``include_text=True``) answers the same
questions with and without triage: every question runs twice in a row, plain and instrumented in
alternating order (the handlers are added and removed between the two, outside the timed region),
so drift and the noise of a shared machine hit both sides alike. Configurations:

- ``inline``    : triage handlers + a synchronous manager with no plugins: the adapter's own cost
  (span tree, parsing, grounding, event construction) with no thread involved;
- ``worker``    : the same with the manager's background worker (the default delivery): adds the
  cost of handing each event to the worker thread;
- ``defaults``  : the manager's default plugins and a SQLite store on the background worker (what
  ``instrument(store=...)`` gives a user); includes the synchronous ``triage_gate`` call, which the
  default gate answers by computing the pre-generation metrics inline.

Target (brief): median instrumented / plain ≤ 1.05.

Run: ``python benchmarks/bench_llamaindex.py [--seed 0] [--queries 300]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from llama_index.core import PropertyGraphIndex
from llama_index.core.schema import TextNode

from triage_llamaindex import instrument
from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM
from triage_plugins.offline.world import generate_world
from triage_plugins.runtime.manager import TriageManager


def world_corpus(seed: int, n_questions: int) -> tuple[list[TextNode], list[str]]:
    """The core's synthetic world (noisy documents, 1-3 hop questions), as LlamaIndex nodes."""
    world = generate_world(
        seed=seed,
        n_people=150,
        n_organisations=10,
        n_cities=16,
        n_countries=6,
        n_films=60,
        n_documents=150,
        n_questions=n_questions,
    )
    nodes = [TextNode(id_=c.id, text=c.text) for c in world.chunks()]
    return nodes, [q.text for q in world.questions]


def run(engine, inst, qs: list[str]) -> tuple[list[float], list[float]]:
    """Each question twice, plain and instrumented, in alternating order (handlers toggled between)."""
    plain: list[float] = []
    instrumented: list[float] = []
    for i, q in enumerate(qs):
        for on in (False, True) if i % 2 == 0 else (True, False):
            if on:
                inst.instrument()
            else:
                inst.uninstrument()
            t0 = time.perf_counter()
            engine.query(q)
            (instrumented if on else plain).append(time.perf_counter() - t0)
    inst.uninstrument()
    return plain, instrumented


def report(name: str, plain: list[float], instrumented: list[float]) -> None:
    def q(values: list[float], p: int) -> float:
        return statistics.quantiles(values, n=100)[p - 1]

    mp, mi = statistics.median(plain), statistics.median(instrumented)
    print(
        f"{name:<9} n={len(plain):<4} median plain {mp * 1e3:6.2f} ms  instrumented {mi * 1e3:6.2f} ms  "
        f"ratio {mi / mp:5.3f} | p25 ratio {q(instrumented, 25) / q(plain, 25):5.3f} | "
        f"mean ratio {statistics.fmean(instrumented) / statistics.fmean(plain):5.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()

    nodes, qs = world_corpus(args.seed, args.queries)
    llm, embed = OfflineLLM(logprobs=False), OfflineEmbedding()
    t0 = time.perf_counter()
    index = PropertyGraphIndex(nodes=nodes, llm=llm, embed_model=embed)
    n_triples = len(index.property_graph_store.graph.triplets)
    print(f"index: {len(nodes)} chunks, {n_triples} triples, built in {time.perf_counter() - t0:.1f} s")
    engine = index.as_query_engine(llm=llm)
    for q in qs[:20]:  # warm caches and lazy imports on both paths
        engine.query(q)

    with tempfile.TemporaryDirectory() as tmp:
        configs = {
            "inline": TriageManager(entry_points=False, defaults=False, synchronous=True),
            "worker": TriageManager(entry_points=False, defaults=False),
            "defaults": TriageManager(store=Path(tmp) / "bench.sqlite", entry_points=False),
        }
        for name, manager in configs.items():
            inst = instrument(manager=manager)
            inst.emit_graph(index)
            for q in qs[:5]:
                engine.query(q)
            plain, instrumented = run(engine, inst, qs)
            manager.flush()
            report(name, plain, instrumented)
            manager.close()


if __name__ == "__main__":
    main()
