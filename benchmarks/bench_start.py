"""A manager start, side by side: as it is vs with ``scipy.optimize`` imported at start (as before #32).

Each start runs in a fresh interpreter: ``from triage_plugins.runtime.manager import TriageManager;
TriageManager(None)``. The ``before`` variant imports ``scipy.optimize`` first, which is exactly what
``metrics/extraction.py``'s module-top import did on every start; the ``after`` variant is the tree
as it is. Runs alternate (after, before, after, ...) so load on a shared machine hits both alike;
medians of wall time, CPU time (user + system of the child) and peak RSS are printed, with the ratio.

    python benchmarks/bench_start.py --rounds 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_START = (
    "import json, resource, sys, time\n"
    "t0 = time.perf_counter(); c0 = time.process_time()\n"
    "{before}"
    "from triage_plugins.runtime.manager import TriageManager\n"
    "TriageManager(None)\n"
    "wall = time.perf_counter() - t0; cpu = time.process_time() - c0\n"
    "rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
    "print(json.dumps({{'wall': wall, 'cpu': cpu, 'rss': rss, 'scipy': 'scipy.optimize' in sys.modules}}))\n"
)
VARIANTS = {"after": "", "before": "import scipy.optimize\n"}


def one_start(variant: str) -> dict[str, float]:
    """Wall s, CPU s (both from the interpreter's first line to a built manager), peak RSS MiB."""
    code = _START.format(before=VARIANTS[variant])
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    one_start("after")  # warm the file cache
    for _ in range(args.rounds):
        for name in VARIANTS:
            runs[name].append(one_start(name))
    if any(r["scipy"] for r in runs["after"]):
        raise SystemExit("a manager start imported scipy.optimize")
    med = {
        name: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "rss")}
        for name, rs in runs.items()
    }
    print(f"manager start, medians of {args.rounds} interleaved fresh interpreters")
    print(f"{'':8} {'wall ms':>9} {'CPU ms':>9} {'peak RSS MiB':>13}")
    for name in ("before", "after"):
        m = med[name]
        print(f"{name:8} {m['wall'] * 1e3:9.0f} {m['cpu'] * 1e3:9.0f} {m['rss']:13.1f}")
    b, a = med["before"], med["after"]
    print(
        f"saved: wall {(b['wall'] - a['wall']) * 1e3:.0f} ms, CPU {(b['cpu'] - a['cpu']) * 1e3:.0f} ms, "
        f"RSS {b['rss'] - a['rss']:.1f} MiB; after/before CPU = {a['cpu'] / b['cpu']:.2f}"
    )


if __name__ == "__main__":
    main()
