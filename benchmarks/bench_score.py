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
and prints medians (wall, and CPU: user + system) and each one's ratio to ``json.loads``:

    python benchmarks/bench_score.py --ratio --lines 100000 --rounds 3

With ``--before DIR`` (a folder holding an earlier copy of ``triage_plugins``) it runs that copy's
``triage score`` and this tree's instead, in the same rounds (children run outside the checkout, so
``PYTHONPATH`` decides which copy they import):

    cd /tmp && PYTHONPATH=/tmp/after python /work/main/benchmarks/bench_score.py --ratio --before /tmp/before

``--split`` shows where the time goes, in-process CPU (see :func:`split`):

    python benchmarks/bench_score.py --split --lines 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
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
    "u = resource.getrusage(resource.RUSAGE_CHILDREN); print(u.ru_maxrss, u.ru_utime + u.ru_stime)"
)


def measure(
    argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[float, float, float]:
    """(wall seconds, peak RSS in GB, CPU seconds) of one child process (in ``env``, default this one's).

    :param cwd: the child's working folder: not a checkout, so ``python -c`` (whose ``sys.path`` starts
        with the working folder) imports the ``triage_plugins`` that ``PYTHONPATH`` or the install names.
    """
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *argv], check=True, capture_output=True, text=True, env=env, cwd=cwd
    )
    seconds = time.perf_counter() - t0
    rss, cpu = done.stdout.split()
    return seconds, int(rss) / 1024 / 1024, float(cpu)


JSON_LOADS = (
    "import json, sys, time\n"
    "fh = open(sys.argv[1], 'rb'); t0 = time.perf_counter(); c0 = time.process_time()\n"
    "for line in fh:\n    json.loads(line)\n"
    "print(time.perf_counter() - t0, time.process_time() - c0)\n"
)
# ``triage score`` as the CLI runs it; ``{cache}`` sets score_file.CACHE_BYTES (0: every line parsed twice),
# ``{gc}`` score_file.GC_YOUNG_THRESHOLD (0: Python's default collector thresholds).
SCORE = (
    "import sys; import triage_plugins.apps.score_file as m\n"
    "m.CACHE_BYTES = {cache}; m.GC_YOUNG_THRESHOLD = {gc}\n"
    "from triage_plugins.cli import main; sys.argv = ['triage', 'score', *sys.argv[1:]]; main()\n"
)


def ratio(lines: int, n_triples: int, rounds: int, before: Path | None = None) -> None:
    """json.loads of every line vs ``triage score`` before and after, interleaved; medians.

    :param before: a copy of an earlier ``triage_plugins`` package's parent folder: its ``triage score``
        (as it is) runs in the same rounds, first on ``PYTHONPATH``; without it, the variants of this
        tree with pass 2 parsing every line again and Python's default collector thresholds.
    """
    with tempfile.TemporaryDirectory() as tmp:
        trace, out = Path(tmp) / "trace.jsonl", Path(tmp) / "out.json"
        write_trace(trace, lines, n_triples)
        same = "m.CACHE_BYTES", "m.GC_YOUNG_THRESHOLD"
        after = [sys.executable, "-c", SCORE.format(cache=same[0], gc=same[1])]
        argv: dict[str, list[str]] = {
            "score, parsed twice (before)": [sys.executable, "-c", SCORE.format(cache=0, gc=0)],
            "score, parsed once, default GC": [sys.executable, "-c", SCORE.format(cache=same[0], gc=0)],
            "score, parsed once, fewer GC (after)": after,
        }
        env: dict[str, dict[str, str]] = {}
        if before is not None:
            argv = {f"score, {before}": after, "score, this tree": after}
            env[f"score, {before}"] = {**os.environ, "PYTHONPATH": str(before)}
        seconds: dict[str, list[float]] = {"json.loads of every line": [], **{k: [] for k in argv}}
        cpu: dict[str, list[float]] = {k: [] for k in seconds}
        peak: dict[str, list[float]] = {k: [] for k in argv}
        for _ in range(rounds):
            loads = [sys.executable, "-c", JSON_LOADS, str(trace)]
            wall, used = subprocess.run(loads, check=True, capture_output=True).stdout.split()
            seconds["json.loads of every line"].append(float(wall))
            cpu["json.loads of every line"].append(float(used))
            for name, cmd in argv.items():
                s, gb, c = measure([*cmd, str(trace), "--json", str(out)], env.get(name), Path(tmp))
                seconds[name].append(s)
                cpu[name].append(c)
                peak[name].append(gb)
    floor = statistics.median(seconds["json.loads of every line"])
    cpu_floor = statistics.median(cpu["json.loads of every line"])
    print(f"{lines} lines, medians of {rounds} interleaved runs (score: the whole process; CPU: user + system)")
    for name, values in seconds.items():
        med, used = statistics.median(values), statistics.median(cpu[name])
        rss = f"  peak RSS {statistics.median(peak[name]):.2f} GB" if name in peak else ""
        print(
            f"{name:38} {med:8.2f} s wall {med / floor:6.1f} x   {used:8.2f} s CPU {used / cpu_floor:6.1f} x{rss}",
            flush=True,
        )


def _cpu(fn: Any) -> float:
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def split(lines: int, n_triples: int, rounds: int) -> None:
    """Where ``triage score``'s time goes, in-process CPU medians: the json.loads floor, pass 1 (every
    line parsed into a validated event and indexed), the usage metrics computed once per query (what the
    replay's scorer does since #32: at the query's end) and at the retrieval then again at the answer
    (what it did before), the whole score, and the whole minus pass 1 (the replay, records, JSON)."""
    import io

    from triage_plugins.apps import score_file as sf
    from triage_plugins.kg.grounding import shared_grounder
    from triage_plugins.metrics.per_query import usage_metrics
    from triage_plugins.runtime.registrations import metric_registry

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
        events = [index.events[n][0] for n in sorted(index.events)]
        pairs = list(zip(events[::2], events[1::2], strict=True))  # this trace: a retrieval, then its answer

        def once() -> None:  # results dropped as they come (a list of 50k would only feed the collector)
            for r, a in pairs:
                usage_metrics(r, a, grounder=grounder, metrics=registry)

        def twice() -> None:  # at the retrieval (every metric, no answer), then at the answer: one view
            for r, a in pairs:
                usage_metrics(r, grounder=grounder, metrics=registry)
                usage_metrics(r, a, grounder=grounder, metrics=registry)

        parts = {
            "json.loads of every line": lambda: loads(trace),
            "pass 1: parse, validate, index": lambda: sf._index(trace),
            "usage metrics once per query": once,
            "usage metrics at retrieval + answer": twice,
            "score_file, whole": lambda: sf.score_file(trace, json_to=io.StringIO(), keep=50),
        }
        seconds = {name: statistics.median(_cpu(fn) for _ in range(rounds)) for name, fn in parts.items()}
        seconds["whole − pass 1 (replay, JSON)"] = seconds["score_file, whole"] - seconds[
            "pass 1: parse, validate, index"
        ]
    floor, queries = seconds["json.loads of every line"], len(pairs)
    print(f"{lines} lines, {queries} queries, in-process CPU, medians of {rounds}")
    for name, value in seconds.items():
        print(
            f"{name:36} {value:7.2f} s  {value / floor:6.1f} x json.loads  {value / queries * 1e6:6.0f} µs/query"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--triples", type=int, default=5_000)
    parser.add_argument("--memory-max-lines", type=int, default=100_000)
    parser.add_argument("--ratio", action="store_true", help="json.loads vs triage score, before and after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="with --ratio: the folder holding an earlier triage_plugins")
    parser.add_argument("--split", action="store_true", help="where triage score's time goes, in-process")
    args = parser.parse_args()
    if args.split:
        split(args.lines, args.triples, args.rounds)
        return
    if args.ratio:
        ratio(args.lines, args.triples, args.rounds, args.before)
        return
    triage = str(Path(sys.executable).with_name("triage"))
    sizes = sorted({min(args.lines, args.memory_max_lines), args.lines})
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'lines':>9}  {'path':10} {'seconds':>8} {'peak RSS GB':>12}")
        for lines in sizes:
            trace = Path(tmp) / f"trace-{lines}.jsonl"
            write_trace(trace, lines, args.triples)
            out = Path(tmp) / "out.json"
            s, gb, _ = measure([triage, "score", str(trace), "--json", str(out)])
            print(f"{lines:>9}  {'streamed':10} {s:8.1f} {gb:12.2f}", flush=True)
            if lines <= args.memory_max_lines:
                s, gb, _ = measure([sys.executable, "-c", IN_MEMORY, str(trace), str(out)])
                print(f"{lines:>9}  {'in memory':10} {s:8.1f} {gb:12.2f}", flush=True)


if __name__ == "__main__":
    main()
