"""``python -m triage_graphrag index --root DIR [--store PATH] [--method standard]``: an observed ``graphrag index``.

``graphrag index`` takes no callbacks and cannot know the triage workflow; this runs the same
pipeline through ``graphrag.api.build_index`` with :func:`triage_graphrag.observe_index` installed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m triage_graphrag", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    index = sub.add_parser("index", help="build a GraphRAG index with triage observation")
    index.add_argument("--root", type=Path, default=Path.cwd(), help="GraphRAG project root (settings.yaml)")
    index.add_argument(
        "--store", default=None, help="triage store (default: $TRIAGE_STORE or ROOT/triage.sqlite)"
    )
    index.add_argument("--method", default="standard", help="GraphRAG indexing method")
    index.add_argument("--no-logprobs", action="store_true", help="do not wrap the extraction model")
    index.add_argument(
        "--offline",
        action="store_true",
        help="register the offline model types (triage_offline_chat / _embedding)",
    )
    args = parser.parse_args(argv)

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import graphrag.api as api

    from triage_graphrag import observe_index
    from triage_plugins.runtime.manager import TriageManager

    if args.offline:
        from triage_graphrag.offline import register_offline_models

        register_offline_models()
    store = args.store or os.environ.get("TRIAGE_STORE") or str(args.root / "triage.sqlite")
    with TriageManager(store=store) as manager:
        obs = observe_index(args.root, manager=manager, logprobs=not args.no_logprobs, method=args.method)
        results = asyncio.run(api.build_index(obs.config, method=args.method, callbacks=obs.callbacks))
        manager.flush()
    failed = [r.workflow for r in results if r.error is not None]
    print(
        f"indexed {args.root}: events {obs.events}; store {store}" + (f"; failed: {failed}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
