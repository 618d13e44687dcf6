"""``triage score --json`` on long traces: time and peak memory, streamed vs held in memory.

Writes a synthetic trace (one graph event of ``--triples`` triples, then a retrieval and an answer
event per query, ``--lines`` lines in all), then runs, each in a fresh process so peak RSS is its own:

* ``streamed``: ``triage score TRACE --json OUT`` (two streaming passes, JSON written as it goes);
* ``in memory``: ``score_events(read_events(TRACE))`` + ``report_json`` — the pre-streaming path —
  only up to ``--memory-max-lines`` (it needs about 14 GB at 1M lines).

    python benchmarks/bench_score.py --lines 1000000

``--ratio`` instead runs, interleaved ``--rounds`` times on one ``--lines`` trace, ``json.loads`` of
every line (the floor: seconds of the loop alone, in a fresh process), ``triage score --json`` with
pass 2 parsing every scored line again and Python's default collector thresholds (``CACHE_BYTES = 0``,
``GC_YOUNG_THRESHOLD = 0``: the path before #32 point 5), with pass 1's events kept only, and as it is,
and prints medians and each one's ratio to ``json.loads``:

    python benchmarks/bench_score.py --ratio --lines 100000 --rounds 3

``--split`` shows where the time goes, in-process CPU (see :func:`split`):

    python benchmarks/bench_score.py --split --lines 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from triage_plugins.contract.events import GenerationEvent, GraphEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView

IN_MEMORY = (
    "import sys; from pathlib import Path; "
    "from triage_plugins.apps.score import read_events, report_json, score_events; "
    "Path(sys.argv[2]).write_text(report_json(score_events(read_events(sys.argv[1]))))"
)


def write_trace(path: Path, lines: int, n_triples: int, seed: int = 0) -> None:
    """A graph event, then (retrieval, answer) pairs until ``lines`` lines."""
    rng = random.Random(seed)
    entities = [f"Entity {i}" for i in range(max(2, n_triples // 2))]
    triples = [
        Triple(
            f"t{i}",
            rng.choice(entities),
            rng.choice(("born_in", "directed", "works_for")),
            rng.choice(entities),
        )
        for i in range(n_triples)
    ]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(GraphEvent("bench", GraphView(triples)).to_json() + "\n")
        for q in range((lines - 1) // 2):
            picked = rng.sample(triples, 8)
            head = picked[0].subject
            grounding = {head: head}
            fh.write(
                RetrievalEvent(
                    "bench", f"q{q}", f"Where was {head} born?", mentions=(head,), grounding=grounding,
                    subgraph=Subgraph(tuple(picked)), expanded_nodes=16, retriever="local",
                ).to_json() + "\n"
            )  # fmt: skip
            fh.write(GenerationEvent("bench", f"q{q}", picked[0].object).to_json() + "\n")


# Each run goes through a fresh wrapper process, so its children's peak RSS is that run's alone.
_WRAPPER = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def measure(argv: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in GB) of one child process."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *argv], check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    return seconds, int(done.stdout.strip()) / 1024 / 1024


JSON_LOADS = (
    "import json, sys, time\n"
    "fh = open(sys.argv[1], 'rb'); t0 = time.perf_counter()\n"
    "for line in fh:\n    json.loads(line)\n"
    "print(time.perf_counter() - t0)\n"
)
# ``triage score`` as the CLI runs it; ``{cache}`` sets score_file.CACHE_BYTES (0: every line parsed twice),
# ``{gc}`` score_file.GC_YOUNG_THRESHOLD (0: Python's default collector thresholds).
SCORE = (
    "import sys; import triage_plugins.apps.score_file as m\n"
    "m.CACHE_BYTES = {cache}; m.GC_YOUNG_THRESHOLD = {gc}\n"
    "from triage_plugins.cli import main; sys.argv = ['triage', 'score', *sys.argv[1:]]; main()\n"
)


def ratio(lines: int, n_triples: int, rounds: int) -> None:
    """json.loads of every line vs ``triage score`` before and after, interleaved; medians."""
    with tempfile.TemporaryDirectory() as tmp:
        trace, out = Path(tmp) / "trace.jsonl", Path(tmp) / "out.json"
        write_trace(trace, lines, n_triples)
        same = "m.CACHE_BYTES", "m.GC_YOUNG_THRESHOLD"
        argv = {
            "score, parsed twice (before)": [sys.executable, "-c", SCORE.format(cache=0, gc=0)],
            "score, parsed once, default GC": [sys.executable, "-c", SCORE.format(cache=same[0], gc=0)],
            "score, parsed once, fewer GC (after)": [
                sys.executable,
                "-c",
                SCORE.format(cache=same[0], gc=same[1]),
            ],
        }
        seconds: dict[str, list[float]] = {"json.loads of every line": [], **{k: [] for k in argv}}
        peak: dict[str, list[float]] = {k: [] for k in argv}
        for _ in range(rounds):
            loads = [sys.executable, "-c", JSON_LOADS, str(trace)]
            seconds["json.loads of every line"].append(
                float(subprocess.run(loads, check=True, capture_output=True).stdout)
            )
            for name, cmd in argv.items():
                s, gb = measure([*cmd, str(trace), "--json", str(out)])
                seconds[name].append(s)
                peak[name].append(gb)
    floor = statistics.median(seconds["json.loads of every line"])
    print(f"{lines} lines, medians of {rounds} interleaved runs (score: the whole process)")
    for name, values in seconds.items():
        med = statistics.median(values)
        rss = f"  peak RSS {statistics.median(peak[name]):.2f} GB" if name in peak else ""
        print(f"{name:38} {med:8.2f} s  {med / floor:6.1f} x json.loads{rss}", flush=True)


def _cpu(fn: Any) -> float:
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def split(lines: int, n_triples: int, rounds: int) -> None:
    """Where ``triage score``'s time goes, in-process CPU medians: the json.loads floor, pass 1 (every
    line parsed into a validated event and indexed), the usage metrics computed once per query and
    twice (what the replay's scorer does: at the retrieval, then at the answer), the whole score."""
    import io

    from triage_plugins.apps import score_file as sf
    from triage_plugins.kg.grounding import shared_grounder
    from triage_plugins.metrics.registry import metric_registry
    from triage_plugins.metrics.usage import usage_metrics

    def loads(path: Path) -> None:
        with open(path, "rb") as fh:
            for line in fh:
                json.loads(line)

    registry = metric_registry()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        write_trace(trace, lines, n_triples)
        index = sf._index(trace)
        graph = index.trace.graph_event
        grounder = shared_grounder(graph.graph, dict(graph.aliases))
        pairs = [(index.events[r][0], index.events[a][0] if a else None) for r, a, _ in index.parts.values()]
        once = lambda: [usage_metrics(r, a, grounder=grounder, metrics=registry) for r, a in pairs]  # noqa: E731
        parts = {
            "json.loads of every line": lambda: loads(trace),
            "pass 1: parse, validate, index": lambda: sf._index(trace),
            "usage metrics once per query": once,
            "usage metrics twice per query": lambda: (once(), once()),
            "score_file, whole (after)": lambda: sf.score_file(trace, json_to=io.StringIO(), keep=50),
        }
        seconds = {name: statistics.median(_cpu(fn) for _ in range(rounds)) for name, fn in parts.items()}
    floor, queries = seconds["json.loads of every line"], len(pairs)
    print(f"{lines} lines, {queries} queries, in-process CPU, medians of {rounds}")
    for name, value in seconds.items():
        print(
            f"{name:32} {value:7.2f} s  {value / floor:6.1f} x json.loads  {value / queries * 1e6:6.0f} µs/query"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--triples", type=int, default=5_000)
    parser.add_argument("--memory-max-lines", type=int, default=100_000)
    parser.add_argument("--ratio", action="store_true", help="json.loads vs triage score, before and after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--split", action="store_true", help="where triage score's time goes, in-process")
    args = parser.parse_args()
    if args.split:
        split(args.lines, args.triples, args.rounds)
        return
    if args.ratio:
        ratio(args.lines, args.triples, args.rounds)
        return
    triage = str(Path(sys.executable).with_name("triage"))
    sizes = sorted({min(args.lines, args.memory_max_lines), args.lines})
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'lines':>9}  {'path':10} {'seconds':>8} {'peak RSS GB':>12}")
        for lines in sizes:
            trace = Path(tmp) / f"trace-{lines}.jsonl"
            write_trace(trace, lines, args.triples)
            out = Path(tmp) / "out.json"
            s, gb = measure([triage, "score", str(trace), "--json", str(out)])
            print(f"{lines:>9}  {'streamed':10} {s:8.1f} {gb:12.2f}", flush=True)
            if lines <= args.memory_max_lines:
                s, gb = measure([sys.executable, "-c", IN_MEMORY, str(trace), str(out)])
                print(f"{lines:>9}  {'in memory':10} {s:8.1f} {gb:12.2f}", flush=True)


if __name__ == "__main__":
    main()
