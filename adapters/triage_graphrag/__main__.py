"""``python -m triage_graphrag index|update|query``: GraphRAG's CLI commands, observed.

``graphrag index`` / ``graphrag update`` take no callbacks and cannot know the triage workflow; this
runs the same pipeline through ``graphrag.api.build_index`` with :func:`triage_graphrag.observe_index`
installed (``update``: ``is_update_run=True``, the ``<method>-update`` pipeline observed, the merged
graph emitted). ``graphrag query`` passes no callbacks either, so its searches cannot be observed:
``query --root R --method local|global|drift|basic "…"`` reads the same project (its settings and
output tables, as ``graphrag query`` does) and runs the search through ``graphrag.api`` with a
triage callback (:meth:`~triage_graphrag.GraphRAGInstrumentor.query_callbacks`), printing the answer
and the query id to rate with ``GraphRAGInstrumentor.feedback``.

Every failure is one ``error:`` line on stderr (exit 2; Ctrl-C exits 130 with one line).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

SETTINGS_FILES = ("settings.yaml", "settings.yml", "settings.json")
METHODS = ("local", "global", "drift", "basic")
#: The output tables read: what local search reads; the others read fewer, and the observation maps
#: every search's context back to stable ids through the entities and relationships.
TABLES = ("entities", "communities", "community_reports", "text_units", "relationships")


class CommandError(Exception):
    """A problem the user can fix, said in one line."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        _require_settings(args.root)
        return _query(args) if args.command == "query" else _index(args)
    except KeyboardInterrupt:
        print("interrupted: stopped; what was already written to the store is kept", file=sys.stderr)
        return 130
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - GraphRAG's own errors (config, models, tables): one line
        print(
            f"error: graphrag {args.command} failed: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr
        )
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m triage_graphrag", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("index", "build a GraphRAG index with triage observation (graphrag index, observed)"),
        ("update", "update a GraphRAG index with new documents (graphrag update), observed"),
    ):
        _index_arguments(sub.add_parser(name, help=text))
    _query_arguments(sub.add_parser("query", help="answer a question (graphrag query), observed"))
    return parser


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="GraphRAG project root (settings.yaml)")
    parser.add_argument(
        "--store", default=None, help="triage store (default: $TRIAGE_STORE or ROOT/triage.sqlite)"
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="register the offline model types (triage_offline_chat / _embedding)",
    )


def _index_arguments(index: argparse.ArgumentParser) -> None:
    _common(index)
    index.add_argument("--method", default="standard", help="GraphRAG indexing method")
    index.add_argument("--no-logprobs", action="store_true", help="do not wrap the extraction model")


def _query_arguments(query: argparse.ArgumentParser) -> None:
    _common(query)
    query.add_argument("--method", choices=METHODS, default="local", help="the search (default: local)")
    query.add_argument("--community-level", type=int, default=2, help="community level (default: 2)")
    query.add_argument(
        "--response-type", default="Multiple Paragraphs", help="answer format (default: Multiple Paragraphs)"
    )
    query.add_argument("query", metavar="QUERY", help="the question")


def _require_settings(root: Path) -> None:
    if not root.is_dir():
        raise CommandError(f"no GraphRAG project at {root}: pass --root DIR, a folder holding settings.yaml")
    if not any((root / name).is_file() for name in SETTINGS_FILES):
        raise CommandError(
            f"no settings.yaml (or .yml / .json) in {root}: run `graphrag init --root {root}` first, "
            "or pass --root DIR of an existing GraphRAG project"
        )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:500] + ("…" if len(text) > 500 else "")


def _store(args: argparse.Namespace) -> str:
    return args.store or os.environ.get("TRIAGE_STORE") or str(args.root / "triage.sqlite")


def _prepare(args: argparse.Namespace) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if args.offline:
        from triage_graphrag.offline import register_offline_models

        register_offline_models()


def _index(args: argparse.Namespace) -> int:
    _prepare(args)
    import graphrag.api as api

    from triage_graphrag import observe_index
    from triage_plugins import TriageManager

    store = _store(args)
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


def _query(args: argparse.Namespace) -> int:
    _prepare(args)
    from graphrag.config.load_config import load_config

    from triage_graphrag import instrument

    config = load_config(root_dir=args.root)
    tables = _read_tables(config, TABLES)
    store = _store(args)
    inst = instrument(store=store)
    try:
        cb = inst.query_callbacks(
            args.query,
            tables["entities"],
            tables["relationships"],
            tables["text_units"],
            tables["communities"],
            retriever=args.method,
        )
        response, _context = asyncio.run(_search(args, config, tables, cb))
        cb.generation(response if isinstance(response, str) else str(response))
        inst.flush()
    finally:
        inst.uninstrument()
    print(response)
    print(f"query id {cb.query_id} (store {store})", file=sys.stderr)
    return 0


def _read_tables(config: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The project's output tables, read as ``graphrag query`` reads them."""
    from graphrag.data_model.data_reader import DataReader
    from graphrag_storage import create_storage
    from graphrag_storage.tables.table_provider_factory import create_table_provider

    provider = create_table_provider(config.table_provider, storage=create_storage(config.output_storage))
    reader = DataReader(provider)
    tables: dict[str, Any] = {}
    for name in names:
        if not asyncio.run(provider.has(name)):
            raise CommandError(
                f"the index has no {name} table in {config.output_storage.base_dir}: "
                "run `python -m triage_graphrag index --root DIR` first"
            )
        tables[name] = asyncio.run(getattr(reader, name)())
    return tables


async def _search(args: argparse.Namespace, config: Any, t: dict[str, Any], cb: Any) -> tuple[Any, Any]:
    import graphrag.api as api

    level, kind, question = args.community_level, args.response_type, args.query
    if args.method == "global":
        return await api.global_search(
            config, t["entities"], t["communities"], t["community_reports"], level, False, kind, question,
            callbacks=[cb],
        )  # fmt: skip
    if args.method == "drift":
        return await api.drift_search(
            config, t["entities"], t["communities"], t["community_reports"], t["text_units"],
            t["relationships"], level, kind, question, callbacks=[cb],
        )  # fmt: skip
    if args.method == "basic":
        return await api.basic_search(config, t["text_units"], kind, question, callbacks=[cb])
    return await api.local_search(
        config, t["entities"], t["communities"], t["community_reports"], t["text_units"], t["relationships"],
        None, level, kind, question, callbacks=[cb],
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
