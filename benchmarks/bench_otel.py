"""Overhead of ``triage.otel`` on the host's query path: LlamaIndex instrumented with spans on vs off.

The index and questions of ``bench_llamaindex.py`` (the core's synthetic world, offline scripted LLM
and hashing embedding; the stock ``index.as_query_engine()``). Every question runs three times in a
row, in rotating order: plain (not instrumented), instrumented with the default plugins and a SQLite
store (``off``: ``triage.otel`` not configured), and the same with ``triage.otel`` on (``on``). The
handlers are added and removed between runs, outside the timed region.

``on`` uses an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` (the exporter's default
settings) over an exporter that encodes every batch to OTLP protobuf exactly as the OTLP/HTTP
exporter does and then drops the bytes: everything but the network, so the run stays offline.

Target (issue #17): median on / off ≤ 1.05 (the adapters' 5 % budget).

Run: ``python benchmarks/bench_otel.py [--seed 0] [--queries 200]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_llamaindex import world_corpus  # noqa: E402
from llama_index.core import PropertyGraphIndex  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402

from triage_llamaindex import instrument  # noqa: E402
from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM  # noqa: E402
from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402


class EncodingExporter(SpanExporter):
    """Encodes each batch to OTLP protobuf (as the OTLP/HTTP exporter does) and drops it."""

    def __init__(self) -> None:
        self.spans = 0
        self.bytes = 0

    def export(self, spans) -> SpanExportResult:
        self.bytes += len(encode_spans(spans).SerializeToString())
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def run(engine, instrumentors: dict, qs: list[str]) -> dict[str, list[float]]:
    """Each question once per configuration, in rotating order; only one configuration instrumented."""
    names = ["plain", *instrumentors]
    times: dict[str, list[float]] = {n: [] for n in names}
    for i, q in enumerate(qs):
        for name in names[i % 3 :] + names[: i % 3]:
            for other, inst in instrumentors.items():
                if other != name:
                    inst.uninstrument()
            if name != "plain":
                instrumentors[name].instrument()
            t0 = time.perf_counter()
            engine.query(q)
            times[name].append(time.perf_counter() - t0)
    for inst in instrumentors.values():
        inst.uninstrument()
    return times


def ratio_line(label: str, num: list[float], den: list[float]) -> str:
    def p(values: list[float], k: int) -> float:
        return statistics.quantiles(values, n=100)[k - 1]

    pairs = sorted(a / b for a, b in zip(num, den, strict=True))
    return (
        f"{label:<10} median {statistics.median(num) * 1e3:6.2f} vs {statistics.median(den) * 1e3:6.2f} ms  "
        f"ratio of medians {statistics.median(num) / statistics.median(den):5.3f} | "
        f"median paired ratio {statistics.median(pairs):5.3f} | p25 ratio {p(num, 25) / p(den, 25):5.3f} | "
        f"mean ratio {statistics.fmean(num) / statistics.fmean(den):5.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    nodes, qs = world_corpus(args.seed, args.queries)
    llm, embed = OfflineLLM(logprobs=False), OfflineEmbedding()
    t0 = time.perf_counter()
    index = PropertyGraphIndex(nodes=nodes, llm=llm, embed_model=embed)
    print(f"index: {len(nodes)} chunks, built in {time.perf_counter() - t0:.1f} s")
    engine = index.as_query_engine(llm=llm)
    for q in qs[:20]:  # warm caches and lazy imports
        engine.query(q)

    exporter = EncodingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    with tempfile.TemporaryDirectory() as tmp:
        off = TriageManager(store=Path(tmp) / "off.sqlite", entry_points=False)
        on = TriageManager(
            store=Path(tmp) / "on.sqlite",
            config=TriageConfig(options={"otel.tracer_provider": provider}),
            entry_points=False,
        )
        assert type(off.get_plugin("triage.otel")).__name__ == "OtelOff"
        assert type(on.get_plugin("triage.otel")).__name__ == "OtelExporter"
        instrumentors = {}
        for name, manager in (("off", off), ("on", on)):
            inst = instrumentors[name] = instrument(manager=manager)  # one at a time: a new instrumentor
            inst.emit_graph(index)
            inst.uninstrument()
        times = run(engine, instrumentors, qs)
        t0 = time.perf_counter()
        off.flush()
        on.flush()
        provider.force_flush()
        drained = time.perf_counter() - t0
        print(f"n={len(qs)} queries per configuration; flushed the rest in {drained * 1e3:.0f} ms")
        print(ratio_line("on / off", times["on"], times["off"]))
        print(ratio_line("on / plain", times["on"], times["plain"]))
        print(ratio_line("off / plain", times["off"], times["plain"]))
        print(
            f"exported {exporter.spans} spans ({exporter.spans / len(qs):.1f} per query), "
            f"{exporter.bytes / max(exporter.spans, 1):,.0f} OTLP bytes per span"
        )
        off.close()
        on.close()
    provider.shutdown()


if __name__ == "__main__":
    main()
