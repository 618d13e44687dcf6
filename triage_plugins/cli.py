"""The ``triage`` command: thin typer layer over the library, rendered with rich.

Everything a command does is a library function a user can call from Python; this module only
parses options, calls it and renders the result.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from triage_plugins import __version__
from triage_plugins.contract.errors import TriageError

app = typer.Typer(
    name="triage",
    help=(
        "Observe, diagnose and improve graph-RAG pipelines (an installed framework's or your own) "
        "with the TRIAGE metric suite and EvoRAG feedback learning. Everything runs offline by default."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
store_app = typer.Typer(
    help="Inspect and prune a triage store (a SQLite file or a PostgreSQL database).", no_args_is_help=True
)
app.add_typer(store_app, name="store")

console = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 1) -> None:
    # Plain text (no markup read from the message) on one line whatever the terminal width.
    err.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)
    raise typer.Exit(code)


def _check_paths(inputs: dict[str, Path | str | None] = {}, outputs: dict[str, Path | None] = {}) -> None:  # noqa: B006 - read only
    """Fail now, before any long work, when an input file is missing or an output cannot be written."""
    from triage_plugins.apps.paths import check_input_file, check_output_file, is_store_url

    try:
        for what, path in inputs.items():
            if path is not None and not (isinstance(path, str) and is_store_url(path)):
                check_input_file(path, what)
        for what, path in outputs.items():
            if path is not None:
                check_output_file(path, what)
    except TriageError as exc:
        _fail(str(exc))


def _save(path: Path, text: str, what: str) -> None:
    """Write an output file the user asked for and say where it went."""
    path.write_text(text, encoding="utf-8")
    console.print(f"[dim]{what} written to {path}[/]")


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
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # Some frameworks set INFO on their own loggers; the handler decides what is shown.
    for handler in logging.getLogger().handlers:
        handler.setLevel(level)


_PROGRESS_EVERY = 5.0
"""Seconds between two progress lines when stderr is not a terminal."""


def _progress_lines(label: str, total: int) -> Callable[[], None]:
    """A ``tick()`` that prints ``label: n/total`` to stderr periodically and when the stage ends."""
    import time

    done, last = 0, time.monotonic()

    def tick() -> None:
        nonlocal done, last
        done += 1
        now = time.monotonic()
        if done == total or now - last >= _PROGRESS_EVERY:
            last = now
            err.print(Text(f"{label}: {done}/{total}"), soft_wrap=True, highlight=False)

    return tick


@contextmanager
def _progress_bars(enabled: bool = True) -> Iterator[Callable[[str, int], Callable[[], None]]]:
    """A ``progress(label, total) -> tick`` factory: rich progress bars on a terminal; otherwise (a
    log, a pipe) one line ``label: n/total`` on stderr at most every ``_PROGRESS_EVERY`` seconds and at
    the end of each stage."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not enabled:
        yield lambda label, total: lambda: None
        return
    if not err.is_terminal:
        yield _progress_lines
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bars:

        def factory(label: str, total: int) -> Callable[[], None]:
            task = bars.add_task(label, total=total)
            return lambda: bars.advance(task)

        yield factory


@app.command("demo")
def demo_cmd(
    seed: Annotated[
        int, typer.Option(help="Seed of the generated world (everything is deterministic given it).")
    ] = 0,
    store: Annotated[
        str,
        typer.Option(
            help="Store for the trace and the learned scores: a SQLite path, or a postgresql:// URL "
            "(with --no-fresh). A file that is not a triage store is refused, never overwritten."
        ),
    ] = "triage-demo.sqlite",
    feedback_rounds: Annotated[
        int, typer.Option(help="Gold-feedback rounds of EvoRAG learning (0: none).")
    ] = 3,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write everything measured as JSON here.")
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            help="Reset an existing triage store file first (its runs and learned scores); anything "
            "else at that path is left untouched and the demo stops."
        ),
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    seeds: Annotated[
        int,
        typer.Option(
            min=1,
            help="Run the demo on this many worlds (seeds SEED, SEED+1, …) and report held-out accuracy "
            "before and after the feedback rounds as a mean with a 95% Student t-interval over seeds. "
            "The first seed is shown in full and is the only one written to --store.",
        ),
    ] = 1,
) -> None:
    """Run the whole loop offline on the built-in world: extract, build, measure, diagnose, learn.

    Generates a small world of people, organisations, places and films with realistic extraction
    noise, reads it back with the rule-based extractor, builds the graph, computes the TRIAGE
    Implementation and Validation metrics, answers every question with each reference retriever,
    reads the diagnostic chain, then runs EvoRAG feedback rounds and reports accuracy before and after.
    """
    from triage_plugins.apps.demo import run_demo, run_demo_seeds
    from triage_plugins.apps.store_tools import is_url, reset_sqlite_store
    from triage_plugins.report.demo_view import render_demo, render_demo_seeds

    try:
        if fresh and is_url(store):
            _fail(f"--fresh resets only a store file, not {store}; pass --no-fresh to add this run to it")
        if fresh and (n_runs := reset_sqlite_store(Path(store))) is not None:
            err.print(
                Text(f"--fresh: reset the triage store {store} ({n_runs} runs)", style="dim"), soft_wrap=True
            )
        with _progress_bars(not quiet) as progress:
            if seeds == 1:
                result = run_demo(seed=seed, store=store, feedback_rounds=feedback_rounds, progress=progress)
            else:
                result = run_demo_seeds(
                    seeds, seed=seed, store=store, feedback_rounds=feedback_rounds, progress=progress
                )
    except TriageError as exc:
        _fail(str(exc))
    if seeds == 1:
        render_demo(result, console)  # type: ignore[arg-type]
    else:
        render_demo_seeds(result, console)  # type: ignore[arg-type]
    if json_out is not None:
        _save(json_out, json.dumps(result.to_dict(), indent=2, default=str), "results")


@app.command("probe")
def probe_cmd(
    kb: Annotated[
        list[str],
        typer.Option(help="KB file (PathQuestion `s\\tr\\to` or MetaQA `s|r|o`); repeat for parts."),
    ],
    questions: Annotated[
        Path | None,
        typer.Option(
            help="Optional question file: probe entities are then drawn from the entities it mentions."
        ),
    ] = None,
    per_category: Annotated[int, typer.Option(help="Questions per category (9 categories).")] = 12,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    reader: Annotated[
        str, typer.Option(help="Reader for Hits@1: 'extractive' (the offline reader).")
    ] = "extractive",
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples for the CIs.")] = 1000,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write every observation as JSON here.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """TRIAGE §5.1's distance-controlled probe (Table 5) on any KB, through the five retrievers."""
    from triage_plugins.apps.probe import run_probe
    from triage_plugins.contract.graph_view import GraphView
    from triage_plugins.datasets import load_kb, load_questions
    from triage_plugins.report.probe_view import render_probe

    if reader != "extractive":
        _fail(f"unknown reader {reader!r}: only 'extractive' (answers from the retrieved context) ships")
    _check_paths({**{f"KB file {k}": k for k in kb}, "question file": questions}, {"--json file": json_out})
    try:
        triples = load_kb(kb if len(kb) > 1 else kb[0])
        graph = GraphView(triples)
        candidates = None
        if questions is not None:
            items = load_questions(questions, kb=triples)
            candidates = {e for q in items for e in (*q.topic_entities, *q.answers) if graph.has_node(e)}
        with _progress_bars(not quiet) as progress:
            result = run_probe(
                graph,
                kb_name=", ".join(kb),
                per_category=per_category,
                seed=seed,
                candidates=candidates,
                resamples=resamples,
                progress=progress,
            )
    except TriageError as exc:
        _fail(str(exc))
    render_probe(result, console)
    if json_out is not None:
        _save(json_out, json.dumps(result.to_dict(), indent=2, default=str), "observations")


@app.command("evolve-bench")
def evolve_bench_cmd(
    kb: Annotated[
        list[str], typer.Option(help="KB file (PathQuestion or MetaQA); repeat for MetaQA's two parts.")
    ],
    questions: Annotated[str, typer.Option(help="Test questions (PathQuestion file or MetaQA qa_test.txt).")],
    annotations: Annotated[
        str | None, typer.Option(help="MetaQA annotated JSONL (found next to the questions when omitted).")
    ] = None,
    noise: Annotated[
        float, typer.Option(help="Share of the test gold steps given a conflicting fact.")
    ] = 0.2,
    feedback_noise: Annotated[
        float, typer.Option(help="Probability of flipping each training feedback.")
    ] = 0.0,
    iterations: Annotated[int, typer.Option(help="Feedback iterations after the static baseline.")] = 6,
    unit: Annotated[str, typer.Option(help="What is scored: 'triple' or 'chunk'.")] = "triple",
    chunking: Annotated[
        str, typer.Option(help="Chunk level: 'source' (one source's facts about a subject) or 'subject'.")
    ] = "source",
    seed: Annotated[int, typer.Option(help="First seed.")] = 0,
    seeds: Annotated[int, typer.Option(help="Number of seeds to average over.")] = 1,
    sample: Annotated[int | None, typer.Option(help="Test questions to sample (default: all).")] = None,
    split: Annotated[str, typer.Option(help="Question split: 'all', 'dev' or 'test'.")] = "all",
    modes: Annotated[
        str, typer.Option(help="α modes to run: learned, fixed (comma list).")
    ] = "learned,fixed",
    repeat_train: Annotated[
        bool,
        typer.Option(
            "--repeat-train",
            help="Answer the same training queries every iteration (default: a fresh set per iteration).",
        ),
    ] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write every iteration as JSON here.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """The EvoRAG protocol offline: noisy KB, feedback on training queries, accuracy on test queries.

    Injects conflicting facts (a wrong object that continues the path) and irrelevant facts on a
    share of the test gold steps, answers training queries sampled in the test queries' local
    subgraphs with the relation-aware reader, feeds gold feedback (flipped with --feedback-noise),
    learns contribution scores, evolves the graph, and reports test ACC / EM / F1, α and the
    problematic-triplet ratio per iteration, static baseline first.
    """
    from triage_plugins.apps.evolve import render_evolve_bench, run_evolve_bench

    if unit not in ("triple", "chunk"):
        _fail(f"--unit must be 'triple' or 'chunk', got {unit!r}")
    if chunking not in ("source", "subject") or split not in ("all", "dev", "test"):
        _fail("--chunking takes 'source' or 'subject'; --split takes 'all', 'dev' or 'test'")
    _check_paths(
        {**{f"KB file {k}": k for k in kb}, "question file": questions, "annotations file": annotations},
        {"--json file": json_out},
    )
    try:
        with _progress_bars(not quiet) as progress:
            result = run_evolve_bench(
                kb if len(kb) > 1 else kb[0],
                questions,
                annotations=annotations,
                noise=noise,
                feedback_noise=feedback_noise,
                iterations=iterations,
                unit=unit,  # type: ignore[arg-type]
                chunking=chunking,  # type: ignore[arg-type]
                seed=seed,
                seeds=seeds,
                sample=sample,
                split=split,  # type: ignore[arg-type]
                modes=tuple(m.strip() for m in modes.split(",") if m.strip()),  # type: ignore[arg-type]
                progress=progress,
                train_refresh=not repeat_train,
            )
    except TriageError as exc:
        _fail(str(exc))
    render_evolve_bench(result, console)
    if json_out is not None:
        _save(json_out, json.dumps(result.to_dict(), indent=1, default=str), "results")


@app.command("plugins")
def plugins_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the loaded plugins (default plugins and entry points) and the hooks each implements."""
    from triage_plugins.runtime.manager import TriageManager

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
    path: Annotated[str, typer.Argument(help="Store path, sqlite:/// or postgresql:// URL.")],
    runs: Annotated[int, typer.Option(help="List at most this many of the latest runs.")] = 10,
) -> None:
    """Show a store's schema version, rows per table and its latest runs with the events each lost.

    The store is opened read-only: nothing is created, migrated or switched (a file on a read-only
    filesystem works too).
    """
    from triage_plugins.apps.store_tools import summarize

    try:
        summary = summarize(path)
    except TriageError as exc:
        _fail(str(exc))
    table = Table(title=Text(f"store {path} (schema {summary.schema_version})"))
    table.add_column("table", style="bold")
    table.add_column("rows", justify="right")
    for name, n in summary.counts.items():
        table.add_row(name, str(n))
    console.print(table)
    if summary.runs and runs > 0:
        _print_runs(summary.runs[-runs:], len(summary.runs))
    dropped, undelivered = summary.lost
    if dropped or undelivered:
        err.print(
            Text(
                f"warning: {dropped + undelivered} events never reached this store "
                f"({dropped} dropped with the queue full, {undelivered} still queued at close)",
                style="yellow",
            ),
            soft_wrap=True,
        )


def _print_runs(runs: list, total: int) -> None:
    import datetime as dt

    def when(ts: float | None) -> str:
        if ts is None:
            return "(running or killed)"
        return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")

    table = Table(title=f"runs (latest {len(runs)} of {total}, UTC)")
    for col in ("id", "kind", "started", "ended", "dropped", "undelivered"):
        table.add_column(col, justify="right" if col in {"dropped", "undelivered"} else "left")
    for r in runs:
        table.add_row(
            Text(r.id), Text(r.kind), when(r.started_at), when(r.ended_at), str(r.dropped), str(r.undelivered)
        )
    console.print(table)


@store_app.command("prune")
def store_prune(
    path: Annotated[str, typer.Argument(help="Store path, sqlite:/// or postgresql:// URL.")],
    older_than: Annotated[
        str | None, typer.Option(help="Delete runs that started longer ago than this: 90s, 30m, 12h, 7d, 2w.")
    ] = None,
    keep_runs: Annotated[int | None, typer.Option(help="Keep only this many most recent runs.")] = None,
) -> None:
    """Delete old runs with their events and metric rows; learned scores and parameters are kept.

    Needs --older-than or --keep-runs (both: a run goes when either says so). A file that is not a
    triage store is refused untouched.
    """
    from triage_plugins.apps.store_tools import parse_age, prune

    if older_than is None and keep_runs is None:
        _fail("say what to delete: --older-than AGE and/or --keep-runs N (nothing is pruned by default)")
    try:
        age = parse_age(older_than) if older_than is not None else None
        deleted = prune(path, older_than=age, keep_runs=keep_runs)
    except TriageError as exc:
        _fail(str(exc))
    console.print(
        Text(
            f"pruned {path}: {deleted.get('runs', 0)} runs, {deleted.get('events', 0)} events, "
            f"{deleted.get('metrics', 0)} metric rows, {deleted.get('blobs', 0)} graph snapshots"
        ),
        soft_wrap=True,
    )


def _load_reference(path: str):
    from triage_plugins.contract.graph_view import GraphView
    from triage_plugins.datasets import load_kb

    return GraphView(load_kb(path))


@app.command("score")
def score_cmd(
    events: Annotated[
        Path,
        typer.Argument(
            help="JSON-lines file of events, from `triage export` or any pipeline (format: `triage schema`)."
        ),
    ],
    ontology: Annotated[
        Path | None, typer.Option("--ontology", help="Ontology file (JSON/YAML) for SC, CVR, LC, OC.")
    ] = None,
    reference: Annotated[
        str | None,
        typer.Option("--reference", help="Reference KG (PathQuestion/MetaQA KB file) for COR and CMP."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the full report as JSON here.")
    ] = None,
    max_queries: Annotated[int, typer.Option(help="Queries to list in the per-query table.")] = 50,
    skip_bad: Annotated[
        bool,
        typer.Option(
            "--skip-bad",
            help="Skip lines that are not events (one warning names how many and the first few) "
            "instead of stopping at the first.",
        ),
    ] = False,
) -> None:
    """Compute every metric the events allow: per phase, per query, and the chain signature per query.

    Fields a pipeline could not supply may be missing: mentions and grounding are then derived with
    the default grounder over the last graph event, and what cannot be computed is shown as N/A
    with the reason. The file is read in two streaming passes, so memory does not grow with its
    length (--json is written as queries are scored).
    """
    from triage_plugins.apps.score import render_score_report
    from triage_plugins.apps.score_file import score_file, write_json_report
    from triage_plugins.kg.ontology import load_ontology

    _check_paths(
        {"events file": events, "ontology file": ontology, "reference KG file": reference},
        {"--json file": json_out},
    )
    try:
        onto = load_ontology(ontology) if ontology else None
        ref = _load_reference(reference) if reference else None
        options = {"ontology": onto, "reference": ref, "keep": max_queries, "skip_bad": skip_bad}
        if json_out is not None:
            report = write_json_report(json_out, events, **options)
        else:
            report = score_file(events, **options)
    except TriageError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot write {json_out}: {exc.strerror or exc}")
    if report.bad_lines is not None and report.bad_lines.count:
        err.print(Text(f"warning: {report.bad_lines.summary(events)}", style="yellow"), soft_wrap=True)
    render_score_report(report, console, max_queries=max_queries)
    if json_out is not None:
        console.print(Text(f"report written to {json_out}", style="dim"), soft_wrap=True)


@app.command("export")
def export_cmd(
    store: Annotated[
        str, typer.Argument(help="Store to read: a SQLite path or a postgresql:// URL (opened read-only).")
    ],
    jsonl: Annotated[Path, typer.Option("--jsonl", help="JSON-lines file to write (one event a line).")],
    run: Annotated[
        str | None, typer.Option("--run", help="Only this run's events (see `triage store info`).")
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            help="Only events of this kind: extraction, graph, retrieval, generation, feedback, "
            "rerank or gate.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the output file if it exists.")] = False,
) -> None:
    """Write a store's events as JSON lines, the input of `triage score` and of other tools.

    Events are streamed in recording order; the file appears complete or not at all (written beside
    it, then renamed). Example: triage export triage-demo.sqlite --jsonl events.jsonl
    """
    from triage_plugins.apps.export import export_events
    from triage_plugins.apps.paths import check_input_file, check_output_file, is_store_url

    try:
        if not is_store_url(store):
            check_input_file(store, "store")
        check_output_file(jsonl, "output file", force=force)
        result = export_events(store, jsonl, run_id=run, kind=kind)
    except TriageError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot write {jsonl}: {exc.strerror or exc}")
    kinds = ", ".join(f"{n} {k}" for k, n in result.kinds.items()) or "none"
    console.print(Text(f"{result.events} events written to {jsonl} ({kinds})"), soft_wrap=True)


@app.command("schema")
def schema_cmd(
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the schema here instead of printing it.")
    ] = None,
) -> None:
    """Print the JSON Schema (draft 2020-12) of an event line, generated from the event classes.

    Validates the lines `triage score` reads and `triage export` writes (types, required fields,
    kinds); the value rules of each event (non-blank ids, ranges) are checked when it is read.
    """
    from triage_plugins.apps.schema import event_schema

    _check_paths(outputs={"schema file": out})
    text = json.dumps(event_schema(), indent=2, ensure_ascii=False) + "\n"
    if out is None:
        print(text, end="")
    else:
        try:
            _save(out, text, "schema")
        except OSError as exc:
            _fail(f"cannot write {out}: {exc.strerror or exc}")


@app.command("explain")
def explain_cmd(
    metric: Annotated[
        str | None, typer.Argument(help="A metric symbol, e.g. ERC, RRS, TCS (any case).")
    ] = None,
    list_all: Annotated[bool, typer.Option("--list", help="List every metric with its name.")] = False,
) -> None:
    """What a metric means: definition, paper section, range, a healthy value and the lever when low.

    The same text as docs/metrics.md, read from the metric registry. Example: triage explain ERC
    """
    from triage_plugins.apps.explain import find_metric, metric_entry
    from triage_plugins.metrics.registry import BUILTIN_METRICS

    if list_all or metric is None:
        for spec in BUILTIN_METRICS:
            console.print(
                Text.assemble((f"{spec.symbol:<10}", "bold"), f" {spec.name} ({spec.phase})"), soft_wrap=True
            )
        return
    try:
        entry = metric_entry(find_metric(metric))
    except TriageError as exc:
        _fail(str(exc))
    console.print(Text(f"{entry.symbol}: {entry.name}", style="bold"), soft_wrap=True)
    for label, value in (
        ("definition", entry.definition),
        ("paper", f"TRIAGE {entry.section} ({entry.phase})"),
        ("range", f"{entry.range}, {entry.direction}"),
        ("healthy", entry.healthy),
        ("when low", entry.lever),
        *(("note", n) for n in entry.notes),
    ):
        console.print(Text.assemble((f"  {label}: ", "dim"), value), soft_wrap=True)


def _rows_from_store(path: str) -> list[dict]:
    from triage_plugins.store import Store

    with Store.open(path, readonly=True) as store:
        rows: dict[tuple, dict] = {}
        for m in store.metrics(scope="query"):
            key = (m.framework, m.retriever, m.scope_id)
            row = rows.setdefault(
                key,
                {
                    "query_id": m.scope_id,
                    "framework": m.framework,
                    "retriever": m.retriever,
                    "query": m.scope_id,
                },
            )
            if m.name == "signature":
                row["signature"] = m.reason
            else:
                row[m.name] = m.value
        return list(rows.values())


def _rows_from_jsonl(path: Path) -> list[dict]:
    from triage_plugins.apps.score import read_events, score_events
    from triage_plugins.contract.events import EVENT_TYPES

    with open(path, encoding="utf-8") as fh:
        first = next((line for line in fh if line.strip()), "")
    if not first:
        return []
    head = json.loads(first)
    if isinstance(head, dict) and head.get("event") in EVENT_TYPES:
        return score_events(read_events(path)).rows()
    rows = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise TriageError(f"{path}, line {number}: not valid JSON ({exc.msg})") from None
    return rows


@app.command("calibrate")
def calibrate_cmd(
    source: Annotated[
        str,
        typer.Argument(
            help="A store (.sqlite / sqlite:/// URL), a JSONL of events, or a JSONL of scored rows."
        ),
    ],
    metric: Annotated[str, typer.Option(help="Predictor metric, e.g. ERC, RRS, QGR.")] = "ERC",
    outcome: Annotated[
        str, typer.Option(help="Outcome column; a row fails when it is below --outcome-threshold.")
    ] = "CC",
    cluster: Annotated[
        str | None, typer.Option(help="Column to resample by (e.g. query) for the clustered bootstrap.")
    ] = "query",
    outcome_threshold: Annotated[float, typer.Option(help="Outcome below this value is a failure.")] = 0.5,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(help="Random seed of the bootstrap.")] = 0,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the result as JSON here.")
    ] = None,
) -> None:
    """Fit the Youden-optimal threshold of a metric for predicting failure, with BCa bootstrap CIs."""
    from triage_plugins.apps.score import calibrate_rows, render_calibration, report_json

    try:
        if source.endswith((".sqlite", ".db", ".sqlite3")) or source.startswith(("sqlite:", "postgres")):
            rows = _rows_from_store(source)
        else:
            _check_paths({"file": source}, {"--json file": json_out})
            rows = _rows_from_jsonl(Path(source))
        if not rows:
            _fail(f"{source} holds no scored queries")
        report = calibrate_rows(
            rows,
            metric,
            outcome,
            cluster,
            outcome_threshold=outcome_threshold,
            n_resamples=resamples,
            seed=seed,
        )
    except TriageError as exc:
        _fail(str(exc))
    render_calibration(report, console)
    if json_out is not None:
        json_out.write_text(report_json(report), encoding="utf-8")


@app.command("compare")
def compare_cmd(
    frameworks: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated frameworks (default: every installed framework); one whose package "
            "is missing is reported, not fatal; an unknown name is an error."
        ),
    ] = None,
    corpus: Annotated[
        str, typer.Option(help="'embedded' (seeded synthetic world) or a folder of .txt/.md files.")
    ] = "embedded",
    questions: Annotated[
        Path | None, typer.Option(help="Questions: JSONL (question, answers) or a PathQuestion/MetaQA file.")
    ] = None,
    modes: Annotated[
        str | None, typer.Option(help="Comma-separated modes (default: every mode of each framework).")
    ] = None,
    feedback_rounds: Annotated[
        int, typer.Option(help="EvoRAG feedback rounds after the first pass (needs gold).")
    ] = 0,
    store: Annotated[
        str | None, typer.Option(help="Record events, metrics and scores in this store.")
    ] = None,
    ontology: Annotated[Path | None, typer.Option(help="Ontology file for OC, LC and SC.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the embedded corpus.")] = 0,
    seeds: Annotated[
        int,
        typer.Option(
            help="Repeat over N embedded corpora (seeds seed .. seed+N-1) and add each row's mean over "
            "seeds with a 95 % interval."
        ),
    ] = 1,
    max_questions: Annotated[int | None, typer.Option(help="Ask at most this many questions.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the result as JSON here.")] = None,
    html_out: Annotated[
        Path | None, typer.Option("--html", help="Write a self-contained HTML report here.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Run one corpus through every requested framework and mode; one row per framework x mode."""
    from triage_plugins.apps.compare import run_compare, run_compare_seeds
    from triage_plugins.report import compare_html, render_compare

    _check_paths(
        {"question file": questions, "ontology file": ontology},
        {"--json file": json_out, "--html file": html_out},
    )
    if corpus != "embedded" and not Path(corpus).is_dir():
        _fail(f"--corpus is 'embedded' or a folder of .txt/.md files; {corpus} is not a folder")
    if seeds < 1:
        _fail(f"--seeds is the number of corpus seeds (at least 1), got {seeds}")
    if seeds > 1 and (corpus != "embedded" or questions is not None):
        _fail("--seeds N > 1 repeats over embedded corpora: use it with --corpus embedded and no --questions")
    try:
        source, asked, seeded = _compare_inputs(corpus, seed, ontology, questions, max_questions)
        with _progress_bars(not quiet) as progress:
            options = dict(
                frameworks=_csv(frameworks), modes=_csv(modes), feedback_rounds=feedback_rounds,
                store=store, progress=progress,
            )  # fmt: skip
            if seeds > 1:
                result = run_compare_seeds(seeded, range(seed, seed + seeds), **options)
            else:
                result = run_compare(source, questions=asked, seed=seed, **options)
    except TriageError as exc:
        _fail(str(exc))
    render_compare(result, console)
    if json_out is not None:
        _save(json_out, result.to_json(), "JSON")
    if html_out is not None:
        _save(html_out, compare_html(result), "HTML report")


def _csv(text: str | None) -> list[str] | None:
    """A comma-separated option as a list (``None`` when not given)."""
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def _compare_inputs(
    corpus: str, seed: int, ontology: Path | None, questions: Path | None, max_questions: int | None
) -> tuple[Any, list, Callable[[int], Any]]:
    """The corpus, the questions asked, and the embedded corpus of any seed (for --seeds)."""
    from dataclasses import replace

    from triage_plugins.apps.compare import embedded_corpus, load_corpus_dir, load_question_file
    from triage_plugins.kg.ontology import load_ontology

    def seeded(s: int) -> Any:  # the embedded corpus of seed s, as asked (ontology, max questions)
        world = embedded_corpus(s)
        world = world if ontology is None else replace(world, ontology=load_ontology(ontology))
        return replace(world, questions=world.questions[:max_questions])

    source = embedded_corpus(seed) if corpus == "embedded" else load_corpus_dir(corpus)
    if ontology is not None:
        source = replace(source, ontology=load_ontology(ontology))
    asked = load_question_file(questions) if questions is not None else source.questions
    if max_questions is not None:
        asked = asked[:max_questions]
    return source, asked, seeded


@app.command("report")
def report_cmd(
    store: Annotated[
        str,
        typer.Argument(
            help="Store of a deployment: a path, sqlite:/// or postgresql:// URL (opened read-only)."
        ),
    ],
    html_out: Annotated[
        Path | None, typer.Option("--html", help="Write a self-contained HTML report here.")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only rows since: 30m, 2h, 7d, an ISO date or epoch seconds.")
    ] = None,
    window: Annotated[
        int, typer.Option(help="Rolling window W (queries) of the means and KG-update triggers.")
    ] = 20,
    statistic: Annotated[
        str, typer.Option(help="Trigger statistic: mean, quantile or failing_rate.")
    ] = "mean",
) -> None:
    """Metrics over rolling windows, fired KG-update triggers, worst queries per signature, score movement."""
    from triage_plugins.report import build_store_report, parse_since, render_store_report, store_html
    from triage_plugins.store import Store

    if "://" not in store and not Path(store).exists():
        _fail(f"no store at {store}")
    try:
        with Store.open(store, readonly=True) as opened:
            report = build_store_report(
                opened, since=parse_since(since), window=window, statistic=statistic,
                detail_queries=500 if html_out is not None else 0,  # per-query panels are HTML only
            )  # fmt: skip
    except TriageError as exc:
        _fail(str(exc))
    render_store_report(report, console)
    if html_out is not None:
        _save(html_out, store_html(report), "HTML report")


feedback_app = typer.Typer(help="Feedback given in other tools, turned into learning.", no_args_is_help=True)
app.add_typer(feedback_app, name="feedback")


@feedback_app.command("pull")
def feedback_pull_cmd(
    store: Annotated[str, typer.Option(help="The store the answering process recorded to (TRIAGE_STORE).")],
    endpoint: Annotated[
        str, typer.Option(help="The Phoenix server.", envvar="PHOENIX_COLLECTOR_ENDPOINT")
    ] = "http://127.0.0.1:6006",
    project: Annotated[str, typer.Option(help="The Phoenix project the spans went to.")] = "default",
    unit: Annotated[str, typer.Option(help="What the learner scores: triple or chunk.")] = "triple",
    name: Annotated[
        list[str] | None, typer.Option(help="Only annotations with this name (repeatable).")
    ] = None,
) -> None:
    """Read span annotations (human or LLM) from Phoenix and learn from them, each one once."""
    from triage_plugins.apps.feedback_pull import pull_into_store

    if "://" not in store and not Path(store).exists():
        _fail(f"no store at {store}")
    try:
        result, changed = pull_into_store(store, endpoint=endpoint, project=project, unit=unit, names=name)
    except TriageError as exc:
        _fail(str(exc))
    console.print(
        f"{len(result.applied)} annotation(s) applied, {result.already} already applied, "
        f"{len(result.skipped)} skipped; {result.spans} span(s) read"
    )
    for pulled in result.applied:
        e = pulled.event
        console.print(
            f"  {e.framework}/{e.query_id}: {pulled.name} = {e.raw!r} -> score {e.score:.2f} ({e.source})"
        )
    for note_id, why in result.skipped:
        err.print(Text(f"  skipped {note_id}: {why}", style="yellow"), soft_wrap=True)
    if changed:
        table = Table(title=f"learned {unit} scores changed")
        table.add_column(unit, style="bold")
        table.add_column("before", justify="right")
        table.add_column("after", justify="right")
        for key, (old, new) in sorted(changed.items(), key=lambda kv: -abs(kv[1][1] - (kv[1][0] or 100.0))):
            table.add_row(key, "-" if old is None else f"{old:.2f}", f"{new:.2f}")
        console.print(table)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
