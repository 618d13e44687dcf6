"""``python -m triage_graphrag index|update --root DIR [--store PATH] [--method standard]``: an observed
``graphrag index`` / ``graphrag update``.

``graphrag index`` / ``graphrag update`` take no callbacks and cannot know the triage workflow; this
runs the same pipeline through ``graphrag.api.build_index`` with :func:`triage_graphrag.observe_index`
installed (``update``: ``is_update_run=True``, the ``<method>-update`` pipeline observed, the merged
graph emitted).
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
    for name, text in (
        ("index", "build a GraphRAG index with triage observation"),
        ("update", "update a GraphRAG index with new documents (graphrag update), observed"),
    ):
        _arguments(sub.add_parser(name, help=text))
    args = parser.parse_args(argv)
    return _run(args)


def _arguments(index: argparse.ArgumentParser) -> None:
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


def _run(args: argparse.Namespace) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import graphrag.api as api

    from triage_graphrag import observe_index
    from triage_plugins.runtime.manager import TriageManager

    if args.offline:
        from triage_graphrag.offline import register_offline_models

        register_offline_models()
    store = args.store or os.environ.get("TRIAGE_STORE") or str(args.root / "triage.sqlite")
    with TriageManager(store=store) as manager:
        update = args.command == "update"
        observed = f"{args.method}-update" if update else args.method
        obs = observe_index(args.root, manager=manager, logprobs=not args.no_logprobs, method=observed)
        results = asyncio.run(
            api.build_index(obs.config, method=args.method, is_update_run=update, callbacks=obs.callbacks)
        )
        manager.flush()
    failed = [r.workflow for r in results if r.error is not None]
    print(
        f"indexed {args.root}: events {obs.events}; store {store}" + (f"; failed: {failed}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
