"""Cost of the LlamaIndex adapter: host-path latency and total process CPU, instrumented vs plain, one run.

One PropertyGraphIndex (offline scripted LLM + hashing embedding) over the core's synthetic world
(``generate_world``: 236 chunks, 1-3 hop questions); the stock ``index.as_query_engine()`` (both
sub-retrievers, ``include_text=True``) answers the same questions with and without triage, in blocks of
``--block`` questions: a plain block and an instrumented block back to back (which goes first
alternates; the handlers are added and removed between blocks, outside the measurements), so drift and
the noise of a shared machine hit both sides alike. Two figures:

- **latency** — each query's wall time on the host's path;
- **total CPU** — ``time.process_time()`` (every thread) over the block, the instrumented block until
  its manager's queue is flushed: the deferred work (event delivery, usage metrics, gate, SQLite
  writes on the worker) is inside the measurement. The ratio of the totals comes with a 95 %
  bootstrap interval over the paired blocks (``ratio_ci.py``): on a shared machine a single ratio
  moves by several per cent.

Configurations: ``adapter`` = triage handlers + a manager without plugins (the adapter's own cost:
span tree, parsing, grounding, event construction, the hand-off to the worker); ``defaults`` = the
manager's default plugins and a SQLite store (what ``instrument(store=...)`` gives a user).

Host speeds (``--delays``, ms): ``0`` is the free offline model (~15-30 ms queries); a positive value
makes every LLM completion and query embedding wait that long first (``--delay-kind sleep``, the
default: a remote model, the host idle while it answers, CPU ratio undiluted; ``burn``: the CPU spins,
as an in-process model would, and the CPU ratio shrinks toward 1). Targets: total CPU <= 1.03 (issue
#20), latency <= 1.05.

Run: ``python benchmarks/bench_llamaindex.py --queries 100 --delays 0,50``

``--peer`` measures, in the same run and on the same queries, the peer OpenInference's LlamaIndex
instrumentor (``openinference-instrumentation-llama-index``, the dev extra) beside ours: ``defaults`` as
above, and ``openinference`` = its span and event handlers with an OpenTelemetry SDK tracer provider,
a batch span processor and an in-memory exporter (no network: the cheapest sink it can have; flushed
at the end of each block as ours is). Each is measured against plain blocks interleaved with its own:

    python benchmarks/bench_llamaindex.py --peer --queries 100 --delays 0
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from llama_index.core import PropertyGraphIndex
from llama_index.core.schema import TextNode
from ratio_ci import cost_interval, format_interval

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


class Delay:
    """The wait every query-time model call takes first (set per level; see the module docstring)."""

    seconds = 0.0
    kind = "sleep"

    @classmethod
    def wait(cls) -> None:
        if cls.seconds <= 0:
            return
        if cls.kind == "sleep":
            time.sleep(cls.seconds)
            return
        end = time.thread_time() + cls.seconds  # burn: this thread's CPU, the same under any load
        while time.thread_time() < end:
            pass


class DelayedLLM(OfflineLLM):
    def _respond(self, prompt: str) -> Any:
        Delay.wait()
        return super()._respond(prompt)


class DelayedEmbedding(OfflineEmbedding):
    def _get_query_embedding(self, query: str) -> list[float]:
        Delay.wait()
        return super()._get_query_embedding(query)


def _block(engine: Any, qs: list[str], flush: Any) -> tuple[list[float], float]:
    """Host-path latency of each query, and the block's process CPU (the manager flushed inside)."""
    latencies = []
    cpu0 = time.process_time()
    for q in qs:
        t0 = time.perf_counter()
        engine.query(q)
        latencies.append(time.perf_counter() - t0)
    if flush is not None:
        flush()
    return latencies, time.process_time() - cpu0


def run(engine: Any, inst: Any, qs: list[str], block: int) -> dict[str, list]:
    """Blocks of questions, plain and instrumented in alternating order (handlers toggled between)."""
    out: dict[str, list] = {"lat_plain": [], "lat_traced": [], "cpu_plain": [], "cpu_traced": []}
    for b, start in enumerate(range(0, len(qs) - block + 1, block)):
        chunk = qs[start : start + block]
        for on in (False, True) if b % 2 == 0 else (True, False):
            if on:
                inst.instrument()
            else:
                inst.uninstrument()
            lat, cpu = _block(engine, chunk, inst.flush if on else None)
            side = "traced" if on else "plain"
            out[f"lat_{side}"].extend(lat)
            out[f"cpu_{side}"].append(cpu)
    inst.uninstrument()
    return out


def report(name: str, delay_ms: float, r: dict[str, list]) -> None:
    lp, lt = r["lat_plain"], r["lat_traced"]
    mp, mt = statistics.median(lp), statistics.median(lt)
    paired = statistics.median(t / p for p, t in zip(lp, lt, strict=True))
    cp, ct = sum(r["cpu_plain"]), sum(r["cpu_traced"])
    ci = format_interval(cost_interval(r["cpu_plain"], r["cpu_traced"]))
    print(
        f"{name:<9} {delay_ms:5.0f} {len(lp):4d} {mp * 1e3:9.2f} {mt * 1e3:10.2f} {mt / mp:6.3f} {paired:6.3f} "
        f"{cp / len(lp) * 1e3:9.2f} {ct / len(lt) * 1e3:10.2f} {ct / cp:9.3f} {ci:>11}"
    )


class OpenInferencePeer:
    """OpenInference's LlamaIndex instrumentor behind the toggle :func:`run` uses (instrument /
    uninstrument / flush), exporting to memory through a batch span processor."""

    def __init__(self) -> None:
        import logging

        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter))
        self.instrumentor = LlamaIndexInstrumentor()
        # run() toggles before each block; "already instrumented" is expected there, not news.
        logging.getLogger("opentelemetry.instrumentation.instrumentor").setLevel(logging.ERROR)

    def instrument(self) -> None:
        self.instrumentor.instrument(tracer_provider=self.provider)

    def uninstrument(self) -> None:
        self.instrumentor.uninstrument()

    def flush(self) -> None:
        self.provider.force_flush()
        self.exporter.clear()  # what was exported is not kept across blocks (ours writes and forgets too)

    def close(self) -> None:
        self.provider.shutdown()


def peer(engine: Any, index: Any, qs: list[str], block: int, delay_ms: float, tmp: str) -> None:
    """Ours (default plugins, SQLite store) and OpenInference's instrumentor, each against plain."""
    manager = TriageManager(store=Path(tmp) / f"peer-{delay_ms:g}.sqlite", entry_points=False)
    ours = instrument(manager=manager)
    ours.emit_graph(index)
    for q in qs[:5]:
        engine.query(q)
    ours.flush()
    report("defaults", delay_ms, run(engine, ours, qs, block))
    manager.close()
    oi = OpenInferencePeer()
    oi.instrument()
    for q in qs[:5]:
        engine.query(q)
    oi.flush()
    report("openinf.", delay_ms, run(engine, oi, qs, block))
    oi.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=100, help="questions per configuration and delay")
    parser.add_argument("--delays", default="0,50", help="model-call delays in ms, comma-separated")
    parser.add_argument("--delay-kind", choices=("sleep", "burn"), default="sleep")
    parser.add_argument("--block", type=int, default=5)
    parser.add_argument("--peer", action="store_true", help="ours (defaults) vs OpenInference's instrumentor")
    args = parser.parse_args()

    nodes, qs = world_corpus(args.seed, args.queries)
    llm, embed = DelayedLLM(logprobs=False), DelayedEmbedding()
    t0 = time.perf_counter()
    index = PropertyGraphIndex(nodes=nodes, llm=llm, embed_model=embed)
    n_triples = len(index.property_graph_store.graph.triplets)
    print(f"index: {len(nodes)} chunks, {n_triples} triples, built in {time.perf_counter() - t0:.1f} s")
    engine = index.as_query_engine(llm=llm)
    for q in qs[:20]:  # warm caches and lazy imports on both paths
        engine.query(q)
    Delay.kind = args.delay_kind
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; delay kind {args.delay_kind}")
    print(
        f"{'config':<9} {'delay':>5} {'n':>4} {'lat plain':>9} {'lat traced':>10} {'ratio':>6} {'paired':>6} "
        f"{'cpu plain':>9} {'cpu traced':>10} {'cpu ratio':>9} {'cpu 95% CI':>11}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for delay_ms in (float(d) for d in args.delays.split(",") if d.strip()):
            Delay.seconds = delay_ms / 1e3
            if args.peer:
                peer(engine, index, qs, args.block, delay_ms, tmp)
                continue
            configs = {
                "adapter": TriageManager(entry_points=False, defaults=False),
                "defaults": TriageManager(store=Path(tmp) / f"bench-{delay_ms:g}.sqlite", entry_points=False),
            }
            for name, manager in configs.items():
                inst = instrument(manager=manager)
                inst.emit_graph(index)
                for q in qs[:5]:
                    engine.query(q)
                result = run(engine, inst, qs, args.block)
                manager.flush()
                report(name, delay_ms, result)
                manager.close()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
