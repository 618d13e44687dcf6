"""``triage score --json`` on long traces: time and peak memory, streamed vs held in memory.

Writes a synthetic trace (one graph event of ``--triples`` triples, then a retrieval and an answer
event per query, ``--lines`` lines in all), then runs, each in a fresh process so peak RSS is its own:

* ``streamed``: ``triage score TRACE --json OUT`` (two streaming passes, JSON written as it goes);
* ``in memory``: ``score_events(read_events(TRACE))`` + ``report_json`` — the pre-streaming path —
  only up to ``--memory-max-lines`` (it needs about 14 GB at 1M lines).

    python benchmarks/bench_score.py --lines 1000000
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
        Triple(f"t{i}", rng.choice(entities), rng.choice(("born_in", "directed", "works_for")), rng.choice(entities))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--triples", type=int, default=5_000)
    parser.add_argument("--memory-max-lines", type=int, default=100_000)
    args = parser.parse_args()
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
