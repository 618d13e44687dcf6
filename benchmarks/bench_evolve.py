"""EvoRAG protocol benchmark: the library behind ``triage evolve-bench``, with every knob exposed.

Run from the repo root, for example::

    /work/venv/bin/python benchmarks/bench_evolve.py \\
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

from triage_plugins.evolve_bench import render_evolve_bench, run_evolve_bench


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
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    pipeline = {} if args.paths_per_seed is None else {"paths_per_seed": args.paths_per_seed}
    feedback: dict[str, object] = {"gold_others": args.gold_others}
    if args.alpha_step is not None:
        feedback.update(eta_alpha=args.alpha_step, max_alpha_step=args.alpha_step)
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
    )
    render_evolve_bench(result, Console())
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_dict(), indent=1))
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
