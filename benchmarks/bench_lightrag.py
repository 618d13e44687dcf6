"""Cost of the LightRAG adapter: host-path latency and total process CPU, instrumented vs plain, one run.

Per corpus, two LightRAG 1.5.7 instances hold the same graph, built offline (scripted LLM, hashing
embedder, byte tokenizer): the ``small`` synthetic corpus and a ``large`` one (1,000 documents, a
graph of a few thousand edges), built once and copied. One instance is instrumented with a full
default manager (store writer, implementation and usage metrics, the gate in its default ``warn``
mode, feedback learner; SQLite store; background delivery).

Queries run in blocks of ``--block`` queries of one mode and one method (``aquery_data``, ``aquery``),
a plain block and an instrumented block back to back (which goes first alternates), the modes in
turn; the instances swap roles half-way, so a difference between them cancels. Two figures per block:

- **latency** — each query's wall time on the host's path (``perf_counter`` around the call);
- **total CPU** — ``time.process_time()`` (every thread of the process) from the block's first query
  until the instrumented manager's queue is flushed after its last one: the deferred work (event
  building, gate, usage metrics, SQLite writes on the delivery worker) is inside the measurement.

Host speeds (``--delays``, ms): ``0`` is the free offline model (queries of 2–50 ms); a positive value
makes every query-time model call (LLM completion and embedding batch) wait that long first, so each
query takes 50 ms or more. ``--delay-kind sleep`` (default) awaits ``asyncio.sleep``: a remote model,
the host's thread idle while it answers (latency as a deployment sees it; the CPU ratio is *not*
diluted by model CPU, so it stays the strict one). ``--delay-kind burn`` spins the CPU for that long
(a model computing in-process): it adds the same CPU to both sides, so the CPU ratio shrinks toward 1.

Reported per (delay, method, mode): median latency plain / instrumented, their ratio and the median of
per-query paired ratios; CPU per query plain / instrumented, the ratio of the totals (the cost) and the
median of per-block paired ratios (robust to one block hit by a garbage collection or a neighbour)
and a 95 % bootstrap interval of the CPU ratio over the paired blocks (``ratio_ci.py``);
and the garbage collector's CPU per query during each side's blocks (``gc.callbacks``; part of the CPU
figures, shown because a full collection over LightRAG's loaded graph costs ~0.1 s). Targets:
total CPU <= 1.03 (issue #20), latency <= 1.05 (issue #15).

Run::

    python benchmarks/bench_lightrag.py --queries 20 --delays 0,50         # both corpora
    python benchmarks/bench_lightrag.py --queries 20 --corpora small --bare # the adapter alone
    python benchmarks/bench_lightrag.py --queries 20 --gc-freeze            # after gc.freeze()
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ratio_ci import cost_interval, format_interval

MODES = ("local", "global", "hybrid", "mix", "naive")
METHODS = ("aquery_data", "aquery")
CORPORA = {
    "small": {},
    "large": {
        "n_people": 200, "n_organisations": 10, "n_cities": 16, "n_countries": 6, "n_films": 225,
        "n_documents": 1000, "n_questions": 60,
    },
}  # fmt: skip


class ModelDelay:
    """A fixed wait before every query-time model call; ``seconds`` and ``kind`` are set per level."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.kind = "sleep"

    async def wait(self) -> None:
        if self.seconds <= 0:
            return
        if self.kind == "sleep":
            await asyncio.sleep(self.seconds)
        else:  # burn: this thread's CPU, so the cost is the same under any load
            end = time.thread_time() + self.seconds
            while time.thread_time() < end:
                pass

    def llm(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        async def delayed_llm(*args: Any, **kwargs: Any) -> Any:
            await self.wait()
            return await inner(*args, **kwargs)

        return delayed_llm

    def embedding(self, inner: Any) -> Any:
        from lightrag.utils import EmbeddingFunc

        async def delayed_embed(texts: list[str], **kwargs: Any) -> Any:
            await self.wait()
            return await inner.func(texts, **kwargs)

        return EmbeddingFunc(
            embedding_dim=inner.embedding_dim, func=delayed_embed,
            max_token_size=inner.max_token_size, model_name=inner.model_name,
        )  # fmt: skip


async def _instances(
    tmp: Path, corpus: str, seed: int, delay: ModelDelay
) -> tuple[object, object, list[str], int]:
    """Two instances over the same graph: built once, the working directory copied."""
    from triage_lightrag.testing import ScriptedLightRAGLLM, build_rag, hashing_embedding
    from triage_plugins.adapter_kit.logprobs import capture_logprobs
    from triage_plugins.offline.world import generate_world

    world = generate_world(seed, **CORPORA[corpus])
    texts = [d.text for d in world.documents]
    first = await build_rag(
        tmp / "a", texts, workspace="a", llm_model_func=capture_logprobs(ScriptedLightRAGLLM(texts)),
        llm_model_max_async=16, embedding_func_max_async=16,
    )  # fmt: skip
    await first.finalize_storages()
    shutil.copytree(tmp / "a", tmp / "b")
    if (tmp / "b" / "a").exists():
        (tmp / "b" / "a").rename(tmp / "b" / "b")
    rags = []
    for name in ("a", "b"):
        llm = delay.llm(capture_logprobs(ScriptedLightRAGLLM(texts)))
        rags.append(
            await build_rag(
                tmp / name,
                texts,
                workspace=name,
                insert=False,
                llm_model_func=llm,
                embedding_func=delay.embedding(hashing_embedding()),
            )  # fmt: skip
        )
    edges = len(await rags[0].chunk_entity_relation_graph.get_all_edges())
    return rags[0], rags[1], [q.text for q in world.questions], edges


class GCTimer:
    """Process CPU spent in the garbage collector (``gc.callbacks``), to show its share of a block."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.total += time.process_time() - self._start


GC = GCTimer()


class Samples:
    """Per (delay, method, mode): per-query latencies and per-block CPU, for each role."""

    def __init__(self) -> None:
        self.latency: dict[tuple, dict[str, list[float]]] = {}
        self.cpu: dict[tuple, dict[str, list[float]]] = {}
        self.gc: dict[tuple, dict[str, float]] = {}

    def add(self, key: tuple, role: str, latencies: list[float], cpu: float, gc_cpu: float) -> None:
        self.latency.setdefault(key, {"plain": [], "traced": []})[role].extend(latencies)
        self.cpu.setdefault(key, {"plain": [], "traced": []})[role].append(cpu)
        spent = self.gc.setdefault(key, {"plain": 0.0, "traced": 0.0})
        spent[role] += gc_cpu


async def _block(
    rag: Any, method: str, mode: str, questions: list[str], flush: Callable[[], object] | None
) -> tuple[list[float], float, float]:
    """``len`` queries of one mode; their host-path latencies, the block's process CPU (flush included) and its GC CPU."""
    from lightrag import QueryParam

    latencies = []
    gc0 = GC.total
    cpu0 = time.process_time()
    for q in questions:
        t0 = time.perf_counter()
        await getattr(rag, method)(q, QueryParam(mode=mode, enable_rerank=False))
        latencies.append(time.perf_counter() - t0)
    if flush is not None:
        flush()  # the deferred work of this block, inside the CPU measurement
    return latencies, time.process_time() - cpu0, GC.total - gc0


async def _warm_up(plain: Any, traced: Any, questions: list[str], flush: Callable[[], object]) -> None:
    """Untimed: the first instrumented query reads the graph and emits its graph event."""
    for method in METHODS:
        await _block(plain, method, "mix", questions[:2], None)
        await _block(traced, method, "mix", questions[:2], flush)


async def run(
    n_queries: int,
    seed: int,
    corpus: str,
    delays: list[float],
    kind: str,
    bare: bool,
    block: int,
    gc_freeze: bool = False,
    modes: tuple[str, ...] = MODES,
    methods: tuple[str, ...] = METHODS,
) -> tuple[Samples, int]:
    """Every (delay, method, mode), plain and instrumented blocks interleaved; and the edge count."""
    from triage_lightrag import instrument
    from triage_plugins.runtime.manager import TriageManager

    delay = ModelDelay()
    delay.kind = kind
    reps = max(2, n_queries // block)  # blocks per role, method and mode
    samples = Samples()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        first, second, questions, edges = await _instances(tmp, corpus, seed, delay)
        if gc_freeze:  # what a server can do after start-up: the loaded graph leaves the GC's scans
            gc.collect()
            gc.freeze()
        if bare:  # the adapter alone: events built and queued, no handler consuming them
            manager = TriageManager(store=None, entry_points=False, defaults=False)
        else:
            manager = TriageManager(store=tmp / "bench.sqlite", entry_points=False)
        for seconds in delays:
            delay.seconds = seconds
            plain, traced = first, second  # swapped half-way: a difference between them cancels out
            inst = instrument(traced, manager=manager)
            await _warm_up(plain, traced, questions, inst.flush)
            for r in range(reps):
                if r == reps // 2:
                    inst.uninstrument()
                    plain, traced = traced, plain
                    inst = instrument(traced, manager=manager)
                    await _warm_up(plain, traced, questions, inst.flush)  # the graph event, untimed
                for m, mode in enumerate(modes):
                    for method in methods:
                        offset = (r * block) % len(questions)
                        qs = [questions[(offset + i) % len(questions)] for i in range(block)]
                        order = (plain, traced) if (r + m) % 2 == 0 else (traced, plain)
                        for rag in order:
                            role = "traced" if rag is traced else "plain"
                            lat, cpu, gc_cpu = await _block(
                                rag, method, mode, qs, inst.flush if role == "traced" else None
                            )
                            samples.add((seconds, method, mode), role, lat, cpu, gc_cpu)
            inst.uninstrument()
        manager.close()
        await first.finalize_storages()
        await second.finalize_storages()
    return samples, edges


def _rows(samples: Samples) -> list[tuple]:
    """One row per key plus an ``all`` row per (delay, method)."""
    keys = list(samples.latency)
    groups: dict[tuple, list[tuple]] = {}
    for key in keys:
        groups.setdefault((key[0], key[1], "all"), []).append(key)
    out = []
    for key in keys + list(groups):
        members = groups.get(key, [key])
        lp = [t for k in members for t in samples.latency[k]["plain"]]
        lt = [t for k in members for t in samples.latency[k]["traced"]]
        cp = sum(c for k in members for c in samples.cpu[k]["plain"])
        ct = sum(c for k in members for c in samples.cpu[k]["traced"])
        paired = statistics.median(t / p for p, t in zip(lp, lt, strict=True))
        bp = [c for k in members for c in samples.cpu[k]["plain"]]
        bt = [c for k in members for c in samples.cpu[k]["traced"]]
        cpu_paired = statistics.median(t / p for p, t in zip(bp, bt, strict=True))
        ci = format_interval(cost_interval(bp, bt))
        mp, mt = statistics.median(lp), statistics.median(lt)
        gp = sum(samples.gc[k]["plain"] for k in members) / len(lp)
        gt = sum(samples.gc[k]["traced"] for k in members) / len(lt)
        out.append(
            (
                *key,
                len(lp),
                mp,
                mt,
                mt / mp,
                paired,
                cp / len(lp),
                ct / len(lt),
                ct / cp,
                cpu_paired,
                ci,
                gp,
                gt,
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20, help="queries per role, method, mode, delay")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpora", default="small,large", help="comma-separated: small, large")
    parser.add_argument("--delays", default="0,50", help="model-call delays in ms, comma-separated")
    parser.add_argument("--delay-kind", choices=("sleep", "burn"), default="sleep")
    parser.add_argument("--bare", action="store_true", help="manager without the default plugins")
    parser.add_argument("--block", type=int, default=5, help="queries per block")
    parser.add_argument(
        "--gc-freeze", action="store_true", help="gc.freeze() after loading (the graph leaves GC scans)"
    )
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated query modes")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated: aquery_data, aquery")
    args = parser.parse_args(argv)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    for given, known, what in ((modes, MODES, "mode"), (methods, METHODS, "method")):
        wrong = [x for x in given if x not in known]
        if wrong or not given:
            parser.error(f"unknown {what} {(wrong or [''])[0]!r}; choose from {', '.join(known)}")
    corpora = [c.strip() for c in args.corpora.split(",") if c.strip()]
    unknown = [c for c in corpora if c not in CORPORA]
    if unknown:
        parser.error(f"unknown corpus {unknown[0]!r}; choose from {', '.join(CORPORA)}")
    delays = [float(d) / 1e3 for d in args.delays.split(",") if d.strip()]
    logging.disable(logging.WARNING)
    sys.stdout.write(
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; delay kind {args.delay_kind}\n"
        f"{'corpus':7} {'edges':>5} {'delay':>5} {'method':11} {'mode':6} {'n':>4} {'lat plain':>9} "
        f"{'lat traced':>10} {'ratio':>6} {'paired':>6} {'cpu plain':>9} {'cpu traced':>10} {'cpu ratio':>9} {'paired':>6} {'cpu 95% CI':>11} {'gc plain':>8} {'gc traced':>9}\n"
    )
    for corpus in corpora:
        samples, edges = asyncio.run(
            run(
                args.queries,
                args.seed,
                corpus,
                delays,
                args.delay_kind,
                args.bare,
                args.block,
                args.gc_freeze,
                modes,
                methods,
            )
        )
        for seconds, method, mode, n, mp, mt, ratio, paired, cp, ct, cratio, cpaired, ci, gp, gt in _rows(
            samples
        ):
            sys.stdout.write(
                f"{corpus:7} {edges:5d} {seconds * 1e3:5.0f} {method:11} {mode:6} {n:4d} {mp * 1e3:9.2f} "
                f"{mt * 1e3:10.2f} {ratio:6.3f} {paired:6.3f} {cp * 1e3:9.2f} {ct * 1e3:10.2f} {cratio:9.3f} {cpaired:6.3f} {ci:>11} {gp * 1e3:8.2f} {gt * 1e3:9.2f}\n"
            )
        sys.stdout.flush()
    sys.stdout.write(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
