"""EvoRAG protocol benchmark: the library behind ``triage evolve-bench``, with every knob exposed.

Run from the repo root, for example::

    python benchmarks/bench_evolve.py \\
        --kb ../shared/data/pathquestion/3H-kb.txt --questions ../shared/data/pathquestion/PQ-3H.txt \\
        --noise 0.2 --feedback-noise 0.1 --iterations 6 --seeds 3 --sample 500 --json out.json

MetaQA: pass ``--kb`` twice (the two ``kb_reconstructed.part*.txt``) and ``--questions
.../metaqa/2-hop/qa_test.txt``; the annotated JSONL next to it is found automatically.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

from triage_plugins.apps.evolve import render_evolve_bench, run_evolve_bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", action="append", required=True, help="KB file (repeat for MetaQA's parts)")
    parser.add_argument("--questions", required=True)
    parser.add_argument("--annotations", default=None)
    parser.add_argument("--noise", type=float, default=0.2)
    parser.add_argument("--feedback-noise", type=float, default=0.0)
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--unit", choices=("triple", "chunk"), default="triple")
    parser.add_argument("--chunking", choices=("source", "subject"), default="source")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument("--split", choices=("all", "dev", "test"), default="all")
    parser.add_argument("--modes", default="learned,fixed")
    parser.add_argument("--gold-others", choices=("neutral", "misled", "penalize"), default="neutral")
    parser.add_argument("--train-source", choices=("retrieved", "neighbourhood"), default="retrieved")
    parser.add_argument("--paths-per-seed", type=int, default=None)
    parser.add_argument("--alpha-step", type=float, default=None, help="α learning rate and bound per update")
    parser.add_argument("--eta", type=float, default=None, help="S_c learning rate (bench default 1.0)")
    parser.add_argument("--max-step", type=float, default=None, help="bound on |ΔS_c| per update (0.2)")
    parser.add_argument(
        "--suppression-factor", type=float, default=None, help="P(t) factor when suppressed (0.9)"
    )
    parser.add_argument("--width", type=float, default=None, help="evolution thresholds μ ± width·σ (2)")
    parser.add_argument("--no-fusion", action="store_true", help="no relation fusion (suppression only)")
    parser.add_argument("--simple-paths", action="store_true", help="krag paths never revisit a node")
    parser.add_argument("--one-top-m", action="store_true", help="one top-M over all path lengths")
    parser.add_argument("--repeat-train", action="store_true", help="the same training set every iteration")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    pipeline: dict[str, object] = (
        {} if args.paths_per_seed is None else {"paths_per_seed": args.paths_per_seed}
    )
    if args.simple_paths:
        pipeline["walks"] = False
    if args.one_top_m:
        pipeline["per_length"] = False
    feedback: dict[str, object] = {"gold_others": args.gold_others}
    if args.alpha_step is not None:
        feedback.update(eta_alpha=args.alpha_step, max_alpha_step=args.alpha_step)
    for name in ("eta", "max_step", "suppression_factor", "width"):
        if getattr(args, name) is not None:
            feedback[name] = getattr(args, name)
    if args.no_fusion:
        feedback["max_hops"] = 1
    result = run_evolve_bench(
        args.kb,
        args.questions,
        annotations=args.annotations,
        noise=args.noise,
        feedback_noise=args.feedback_noise,
        iterations=args.iterations,
        unit=args.unit,
        chunking=args.chunking,
        seed=args.seed,
        seeds=args.seeds,
        sample=args.sample,
        split=args.split,
        modes=tuple(args.modes.split(",")),  # type: ignore[arg-type]
        pipeline_options=pipeline,
        feedback_options=feedback,
        train_source=args.train_source,
        train_refresh=not args.repeat_train,
    )
    render_evolve_bench(result, Console())
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_dict(), indent=1))
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
