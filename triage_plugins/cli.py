"""The ``triage`` command: thin typer layer over the library, rendered with rich.

Everything a command does is a library function a user can call from Python; this module only
parses options, calls it and renders the result.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from triage_plugins import __version__
from triage_plugins.errors import TriageError

app = typer.Typer(
    name="triage",
    help=(
        "Observe, diagnose and improve graph-RAG pipelines (LightRAG, GraphRAG, LlamaIndex, or your own) "
        "with the TRIAGE metric suite and EvoRAG feedback learning. Everything runs offline by default."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
store_app = typer.Typer(help="Inspect a triage store (SQLite file).", no_args_is_help=True)
app.add_typer(store_app, name="store")

console = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        console.print(f"triage-plugins {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log what the plugins do (INFO level).")
    ] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


@app.command("plugins")
def plugins_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the loaded plugins (default plugins and entry points) and the hooks each implements."""
    from triage_plugins.manager import TriageManager

    manager = TriageManager(synchronous=True)
    try:
        infos = manager.plugins()
        if as_json:
            data = {
                "plugins": [
                    {"name": p.name, "version": p.version, "source": p.source, "hooks": list(p.hooks)}
                    for p in infos
                ],
                "load_errors": [
                    {"name": e.name, "source": e.source, "error": e.error} for e in manager.load_errors
                ],
            }
            console.print_json(json.dumps(data))
            return
        table = Table(title="triage plugins")
        table.add_column("name", style="bold")
        table.add_column("version")
        table.add_column("source")
        table.add_column("hooks")
        for p in infos:
            table.add_row(p.name, p.version or "-", p.source, ", ".join(p.hooks) or "(none)")
        console.print(table)
        for e in manager.load_errors:
            err.print(f"[yellow]not loaded:[/] {e.name} ({e.source}): {e.error}")
    finally:
        manager.close()


@store_app.command("info")
def store_info(
    path: Annotated[str, typer.Argument(help="Store path or sqlite:/// URL.")],
) -> None:
    """Show the schema version and the number of rows in each table of a store."""
    from triage_plugins.store import Store

    if "://" not in path and not Path(path).exists():
        _fail(f"no store at {path}")
    try:
        store = Store.open(path)
    except TriageError as exc:
        _fail(str(exc))
    try:
        counts = store.counts()
        table = Table(title=f"store {path}")
        table.add_column("table", style="bold")
        table.add_column("rows", justify="right")
        for name, n in counts.items():
            table.add_row(name, str(n))
        console.print(table)
    finally:
        store.close()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
