"""Planted false facts in the real frameworks: per-round tables and the checks of issue #30.

Drives the real LightRAG, Microsoft GraphRAG and LlamaIndex ``PropertyGraphIndex`` offline over the
planted-fact film corpus of :mod:`planted` (its docstring has the corpus, the questions and the
protocol): round 0 static (reweighting on, no feedback), then ``--rounds`` rounds of oracle feedback
on the training questions, the held-out questions measured after each round.

Configurations (``--framework`` picks a framework's, ``--config`` one by name):

- ``lightrag``: ``rag.aquery(q, QueryParam(mode="hybrid", ...))``, the README's mode;
- ``lightrag-global``: the same in ``mode="global"`` (relations *and* the entities shown follow the
  reranked relation order there, so reweighting can change answers);
- ``graphrag``: ``GraphRAGInstrumentor.local_search`` (``top_k_entities=3``, ``top_k_relationships=3``);
- ``llamaindex``: ``index.as_query_engine(node_postprocessors=[TriagePostprocessor()])`` (no cut);
- ``llamaindex-top3``: the same with ``TriagePostprocessor(top_n=3)``;
- ``llamaindex-reader-top3``: the same with the offline LLM's relation-aware reader
  (``OfflineLLM(answer="reader")``) instead of its default first-line reader.

Readers: LightRAG's and GraphRAG's stand-ins answer with the relation-aware offline reader over the
whole context (ties: first mention); LlamaIndex's, by default, with the other end of the first
``s -> p -> o`` line. LightRAG (local / hybrid) and GraphRAG put entity descriptions, which restate
every sentence naming the entity, before the relations, so reweighting cannot change those answers;
the scores still move, and the checks are about them too.

Each framework runs in its own interpreter with ``PYTHONHASHSEED`` fixed (``--hashseed``):
LlamaIndex orders triplets by iterating a ``set`` of strings, so its answers depend on the seed.

Run: ``python benchmarks/bench_planted.py [--framework lightrag|graphrag|llamaindex|all]
[--unit triple|chunk|both] [--rounds 3] [--config NAME] [--hashseed 0] [--json FILE]``

Exit status 0 whatever the checks say (this is a measurement); ``tests/adapters/test_planted_learning.py``
asserts them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planted import (  # noqa: E402
    CONFIGS,
    FRAMEWORKS,
    HELDOUT,
    INIT,
    PLANTED,
    QUESTIONS,
    TEXTS,
    TRAIN,
    TWINS,
    Report,
    checks,
    run_isolated,
)

SHORT = {
    "planted_never_rises": "planted",
    "twin_never_falls": "twin",
    "heldout_never_below_round0": "held-out",
    "control_keeps_round0": "control",
    "planted_chunks_never_promoted": "p.chunks",
}
CHECK_NAMES = {
    "planted_never_rises": "no planted fact rises above its initial score",
    "twin_never_falls": "no true twin falls below its initial score",
    "heldout_never_below_round0": "held-out accuracy never below round 0",
    "control_keeps_round0": "control (unrated relation) accuracy keeps round 0 (with a cut)",
    "planted_chunks_never_promoted": "chunk unit: planted chunks never promoted",
}


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else "ok" if ok else "FAIL"


def print_report(report: Report) -> None:
    rows = report.rows
    print(
        f"\n== {report.config} [{report.setup}] unit={report.unit}  "
        f"(build {report.build_seconds:.1f} s, whole run {report.seconds:.1f} s, PYTHONHASHSEED={report.hashseed})"
    )
    print(
        f"{'round':>5} {'train':>6} {'held-out':>8} {'control':>7} {'misled':>6} {'max planted':>11} "
        f"{'min twin':>8} {'collateral':>10} {'scored':>6} {'s':>5}"
    )
    for r in rows:
        print(
            f"{r.round:>5} {r.train_acc:>6.2f} {r.heldout_acc:>8.2f} {r.control_acc:>7.2f} {r.misled:>6} "
            f"{r.max_planted:>11.1f} {r.min_twin:>8.1f} {r.collateral:>6}/{report.true_units:<3} "
            f"{r.scored:>6} {r.seconds:>5.1f}"
        )
    width = max(len(label) for label in (*rows[0].planted, *rows[0].twins)) + 2
    rounds = " ".join(f"{'r' + str(r.round):>6}" for r in rows)
    print(f"  raw scores (init {INIT:.0f}){'':<{width - 18}}{rounds}   unit")
    shared = set(report.shared)
    for kind, values in (("planted", "planted"), ("twin", "twins")):
        for label in getattr(rows[0], values):
            scores = " ".join(f"{getattr(r, values)[label]:>6.1f}" for r in rows)
            ids = ",".join(report.units.get(label, [])) or "-"
            mark = "P" if kind == "planted" else "T"
            tag = " (shares its unit with a true twin)" if label in shared else ""
            print(f"  {mark} {label:<{width}}{scores}   {ids}{tag}")
    for note in report.notes:
        print(f"  note: {note}")
    c = checks(report)
    for name, text in CHECK_NAMES.items():
        print(f"  check {_verdict(getattr(c, name)):>4}: {text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="all", choices=(*FRAMEWORKS, "all"))
    parser.add_argument("--config", action="append", choices=sorted(CONFIGS), help="run only these")
    parser.add_argument("--unit", default="both", choices=("triple", "chunk", "both"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hashseed", default="0", help="PYTHONHASHSEED of each framework's interpreter")
    parser.add_argument("--json", type=Path, help="also write the reports here")
    args = parser.parse_args(argv)
    if args.config:
        names = args.config
    elif args.framework == "all":
        names = list(CONFIGS)
    else:
        names = list(FRAMEWORKS[args.framework])
    units = ("triple", "chunk") if args.unit == "both" else (args.unit,)
    started = time.perf_counter()
    print(
        f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}; corpus: {len(TEXTS)} "
        f"documents, {len(PLANTED)} planted facts ({sum(1 for p in PLANTED if any(t.pair == p.pair for t in TWINS))} "
        f"with a true twin), {len(QUESTIONS)} questions ({len(TRAIN)} rated, {len(HELDOUT)} held out, "
        f"{sum(q.control for q in QUESTIONS)} of them control); {args.rounds} rounds"
    )
    reports: list[Report] = []
    timings: dict[str, float] = {}
    for framework in FRAMEWORKS:  # one interpreter per framework (its configurations share imports)
        mine = [n for n in names if CONFIGS[n].framework == framework]
        if not mine:
            continue
        outcome = run_isolated(mine, units, args.rounds, hashseed=args.hashseed)
        if outcome.unavailable:
            print(f"\n== {framework}: skipped ({outcome.unavailable})")
            continue
        timings[framework] = outcome.seconds
        for report in outcome.reports:
            print_report(report)
            reports.append(report)
    if reports:
        print("\nsummary (ok / FAIL / n/a per check; round 0 -> last round accuracy)")
        header = " ".join(f"{SHORT[k]:>8}" for k in CHECK_NAMES)
        print(f"  {'config':<22} {'unit':<6} {header}  {'held-out':>11} {'control':>11} {'max planted':>11} "
              f"{'min twin':>8} {'misled r0':>9}")  # fmt: skip
        for rep in reports:
            c = checks(rep)
            verdicts = " ".join(f"{_verdict(getattr(c, k)):>8}" for k in CHECK_NAMES)
            first, last = rep.rows[0], rep.rows[-1]
            print(
                f"  {rep.config:<22} {rep.unit:<6} {verdicts}  {first.heldout_acc:>5.2f}->{last.heldout_acc:<5.2f}"
                f" {first.control_acc:>5.2f}->{last.control_acc:<5.2f} {max(r.max_planted for r in rep.rows):>11.1f}"
                f" {min(r.min_twin for r in rep.rows):>8.1f} {first.misled:>9}"
            )
        print("  seconds per framework (one interpreter, imports included): "
              + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps([r.to_json() for r in reports], indent=1), encoding="utf-8")
    print(f"\n{time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
