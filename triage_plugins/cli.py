"""The ``triage`` command: thin typer layer over the library, rendered with rich.

Everything a command does is a library function a user can call from Python; this module only
parses options, calls it and renders the result.
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from rich.console import Console
from rich.table import Table
from rich.text import Text

from triage_plugins import __version__
from triage_plugins.contract.errors import TriageError


def _reflow(text: str | None) -> str | None:
    """A docstring as typer's rich help should get it: the lines of each paragraph joined (typer keeps
    the line breaks of every paragraph after the first), an indented block (examples) kept as is."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        p if any(line.startswith(" ") for line in p.splitlines()) else " ".join(p.split("\n"))
        for p in paragraphs
    )


def _tidy(params: list[Any]) -> list[Any]:
    """Help shows plain metavars: none after a flag (not ``<bool>``), an option's own ``FILE``/``N``
    (not ``<path>``, ``<list[str]>``), and an argument by its name alone."""
    for param in params:
        if getattr(param, "param_type_name", "") == "argument":
            param.metavar = param.metavar or (param.name or "").upper()
            param.display_type_rich = lambda ctx: None  # the name column already says it
        elif getattr(param, "is_flag", False):
            param.metavar = ""
        elif param.metavar is None:
            param.metavar = (param.name or "value").upper()
    return params


class _Command(typer.core.TyperCommand):
    """A typer command whose help reads at 80 columns: reflowed paragraphs, plain metavars."""

    def __init__(self, *args: Any, help: str | None = None, **kwargs: Any) -> None:  # noqa: A002
        super().__init__(*args, help=_reflow(help), **kwargs)

    def get_params(self, ctx: Any) -> list[Any]:
        return _tidy(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if getattr(param, "param_type_name", "") == "argument":
                pieces.append(param.metavar if param.required else f"[{param.metavar}]")
        return pieces


class _Group(typer.core.TyperGroup):
    """A typer group with the same help conventions as :class:`_Command`."""

    def __init__(self, *args: Any, help: str | None = None, **kwargs: Any) -> None:  # noqa: A002
        super().__init__(*args, help=_reflow(help), **kwargs)

    def get_params(self, ctx: Any) -> list[Any]:
        return _tidy(super().get_params(ctx))


class _App(typer.Typer):
    """``typer.Typer`` whose commands are :class:`_Command` unless told otherwise."""

    def command(self, *args: Any, cls: type[typer.core.TyperCommand] | None = None, **kwargs: Any) -> Any:
        return super().command(*args, cls=cls or _Command, **kwargs)


app = _App(
    name="triage",
    cls=_Group,
    help="""Observe, diagnose and improve graph-RAG pipelines with the TRIAGE metrics.

    Graph-RAG answers a question from a knowledge graph (KG) built from your documents. triage
    measures each stage (extraction, the graph, retrieval, the answer), names the first link of the
    chain that failed for each query, and learns triple scores from feedback (EvoRAG). Everything
    runs offline by default: only triage feedback pull talks to a server, the one you name.

    Examples, to start with (the demo writes triage-demo.sqlite in the current folder):

      triage demo
      triage report triage-demo.sqlite --html report.html
      triage explain ERC

    STORE, wherever it appears, is a SQLite file or a postgresql:// URL. Run triage COMMAND --help
    for each command's inputs, outputs and defaults.
    """,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
store_app = _App(
    cls=_Group,
    help="""Inspect, migrate and prune a triage store (a SQLite file or a PostgreSQL database).

    A store holds what triage recorded: runs, events, metrics, graph snapshots and learned scores.
    info only reads it; migrate brings an older store (or a new PostgreSQL database) to this
    version's schema; prune deletes old runs and keeps the learned scores.

    Examples:

      triage store info triage-demo.sqlite
      triage store migrate postgresql://triage@db.example/triage
      triage store prune triage-demo.sqlite --keep-runs 5
    """,
    no_args_is_help=True,
)
app.add_typer(store_app, name="store")

console = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 1) -> None:
    # Plain text (no markup read from the message) on one line whatever the terminal width.
    err.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)
    raise typer.Exit(code)


#: Upper bounds of the options that multiply a run's work (said in their --help).
MAX_ROUNDS = 100
MAX_SEEDS = 100


def _bounded(option: str, value: int, low: int, high: int) -> None:
    """Refuse ``value`` outside [low, high] with a one-line error naming ``option``."""
    if not low <= value <= high:
        _fail(f"{option} must be between {low} and {high}, got {value}")


def _check_paths(
    inputs: dict[str, Path | str | None] = {},  # noqa: B006 - read only
    outputs: dict[str, tuple[Path | None, str]] = {},  # noqa: B006 - read only
    *,
    stores: dict[str, str | None] = {},  # noqa: B006 - read only
    new_store: str | None = None,
    force: bool = False,
) -> None:
    """Fail now, before any long work, when an input file is missing or an output cannot be written,
    is one of the inputs (``stores`` too) or another output, or would replace a file the command did
    not write (without ``--force``): :func:`triage_plugins.apps.paths.check_outputs`.

    :param outputs: ``{what: (path, kind)}``; kind ``"html"``, ``"new"`` (only ``--force`` replaces an
        existing file) or a command whose JSON output it is (``"demo"``, ``"compare"`` ...).
    :param new_store: a ``--store`` the command writes: when it is a file that does not exist yet,
        its folder must exist and be writable (an existing one is the store's to accept or refuse).
    """
    from triage_plugins.apps.paths import (
        HTML_REPORT,
        NEW_FILE_ONLY,
        check_input_file,
        check_output_file,
        check_outputs,
        is_store_url,
        json_output,
    )

    def kind_of(name: str):  # noqa: ANN202
        return HTML_REPORT if name == "html" else NEW_FILE_ONLY if name == "new" else json_output(name)

    try:
        for what, path in inputs.items():
            if path is not None and not (isinstance(path, str) and is_store_url(path)):
                check_input_file(path, what)
        if (created := _store_file(new_store)) is not None:
            check_output_file(created, "--store file")
        check_outputs(
            {what: (path, kind_of(kind)) for what, (path, kind) in outputs.items()},
            {
                what: path
                for what, path in inputs.items()
                if not (isinstance(path, str) and is_store_url(path))
            },
            stores=stores,
            force=force,
        )
    except TriageError as exc:
        _fail(str(exc))


_FORCE_HELP = (
    "Replace an existing output file that is not a previous output of this command (how one is "
    "recognised: docs/cli.md); an input of the command is never replaced."
)


def _kb_inputs(kb: list[str]) -> dict[str, str]:
    """The ``--kb`` files as ``_check_paths`` inputs ("KB file", "KB file 2", ...)."""
    return {("KB file" if i == 0 else f"KB file {i + 1}"): path for i, path in enumerate(kb)}


def _refuse_questions_as_kb(kb: list[str]) -> None:
    """Fail when a ``--kb`` file reads as a question file (its first fields are questions): loaded as
    a KB it would give a meaningless graph and a confident-looking result."""
    for path in kb:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                heads = [line.split("\t")[0] for _, line in zip(range(50), fh, strict=False) if line.strip()]
        except OSError as exc:
            _fail(f"cannot read KB file {path}: {exc.strerror or exc}")
        asked = [h for h in heads if h.rstrip().endswith("?") or ("[" in h and "]" in h)]
        if heads and len(asked) * 2 > len(heads):
            _fail(
                f"{path} looks like a question file, not a KB (its lines start with questions): "
                "pass it as --questions and the KB file (subject, relation, object) as --kb"
            )


def _store_file(store: str | None) -> Path | None:
    """A ``--store`` file that does not exist yet, to check as an output (its folder exists and is
    writable); an existing path is the store's to accept or refuse untouched."""
    return None if store is None or "://" in store or Path(store).exists() else Path(store)


def _save(path: Path, text: str, what: str) -> None:
    """Write an output file the user asked for and say where it went (checked up front with
    :func:`_check_paths`; a failure now, e.g. a full disk, is still one line)."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write {what} to {path}: {exc.strerror or exc}")
    console.print(Text(f"{what} written to {path}", style="dim"), soft_wrap=True)


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
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Show the INFO logs of triage and the frameworks (default: warnings only).",
        ),
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
            task, done = bars.add_task(label, total=total), 0

            def tick() -> None:  # a finished stage leaves the display: one live bar, not a pile
                nonlocal done
                done += 1
                bars.update(task, advance=1, visible=done < total)

            return tick

        yield factory


@app.command("demo")
def demo_cmd(
    seed: Annotated[
        int,
        typer.Option(metavar="SEED", help="Seed of the generated world; the same seed gives the same run."),
    ] = 0,
    store: Annotated[
        str,
        typer.Option(
            metavar="STORE",
            help="Where the trace and the learned scores go: a SQLite file or a postgresql:// URL. A "
            "file that is not a triage store is refused, never overwritten.",
        ),
    ] = "triage-demo.sqlite",
    feedback_rounds: Annotated[
        int,
        typer.Option(
            metavar="N", help="Rounds of EvoRAG learning from gold feedback (0: none; at most 100)."
        ),
    ] = 3,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="OUT", help="Also write everything measured to this JSON file."),
    ] = None,
    fresh: Annotated[
        bool | None,
        typer.Option(
            "--fresh/--no-fresh",
            help="--fresh (the default for a file) empties an existing store file first, so it holds "
            "this run only: only a store that is empty or holds nothing but demo runs, unless --force; "
            "never a store of another schema version. --no-fresh (the default for a postgresql:// "
            "URL) adds the run to what is there.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Let --fresh reset a store that holds more than demo runs (a deployment's, say: its "
            "runs, events and learned scores are deleted), and replace a --json file that is not a "
            "previous demo JSON.",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
    seeds: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="Run on N worlds (seeds SEED to SEED+N-1, at most 100) and report held-out accuracy "
            "before and after learning as a mean with a 95% interval over the seeds (one world "
            "alone gives no interval). Only the first seed is shown in full and written to --store.",
        ),
    ] = 5,
) -> None:
    """Run the whole loop offline on a built-in world: extract, build, measure, diagnose, learn.

    Generates a small world of people, organisations, places and films (documents with realistic
    extraction noise), extracts triples with the rule-based extractor, builds the knowledge graph,
    computes the extraction and graph metrics, answers every question with each of the six
    built-in retrievers, names the first failing link of the diagnostic chain for each query, then
    learns triple scores from gold feedback (EvoRAG) and reports accuracy on held-out questions
    before and after, over five worlds with a 95 % interval (--seeds). Takes 15–30 seconds; reads
    no file and needs no network.

    Writes the store (default triage-demo.sqlite in the current folder, reset first if it holds
    only demo runs) and, with --json, a JSON file. Look at the store with triage report or triage
    store info.

    Examples:

      triage demo
      triage demo --seeds 1 --json demo.json
      triage report triage-demo.sqlite --html report.html
    """
    from triage_plugins.apps.demo import run_demo, run_demo_seeds
    from triage_plugins.apps.paths import store_file
    from triage_plugins.apps.store_tools import reset_demo_store
    from triage_plugins.report.demo_view import render_demo, render_demo_seeds

    _bounded("--feedback-rounds", feedback_rounds, 0, MAX_ROUNDS)
    _bounded("--seeds", seeds, 1, MAX_SEEDS)
    if feedback_rounds == 0:
        seeds = 1  # the worlds are repeated for the learning interval; without rounds there is none
    _check_paths(
        outputs={"--json file": (json_out, "demo")}, stores={"--store": store}, new_store=store, force=force
    )
    path = store_file(store)
    if fresh and path is None:
        _fail(f"--fresh resets only a store file, not {store}; leave it out to add this run to it")
    try:
        if fresh is not False and path is not None and (held := reset_demo_store(path, force=force)):
            how = "--fresh" if held.only("demo") else "--force"
            notice = f"{how}: reset the triage store {store} ({held.describe()})"
            err.print(Text(notice, style="dim"), soft_wrap=True)
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
        typer.Option(
            metavar="FILE",
            help="Knowledge-graph file, one triple a line: PathQuestion (subject, relation, object "
            "separated by tabs) or MetaQA (separated by |). Repeat for a KB in several files.",
        ),
    ],
    questions: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A question file (PathQuestion or MetaQA): the probe then asks about the entities its "
            "questions mention (default: entities drawn from the whole KB).",
        ),
    ] = None,
    per_category: Annotated[
        int, typer.Option(metavar="N", help="Probe questions per category (9 categories).")
    ] = 12,
    seed: Annotated[int, typer.Option(metavar="SEED", help="Seed of the question sampling.")] = 0,
    reader: Annotated[
        str,
        typer.Option(
            metavar="extractive",
            help="The reader that answers from the retrieved context (for Hits@1); only the offline "
            "extractive reader ships.",
        ),
    ] = "extractive",
    resamples: Annotated[
        int, typer.Option(metavar="N", help="Bootstrap resamples of the 95% intervals.")
    ] = 1000,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="OUT", help="Also write every observation to this JSON file."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help=_FORCE_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Test on your KB whether the retrieval metrics predict answer failure (TRIAGE paper, §5.1).

    Builds "How are X and Y related?" questions about entities at controlled distances in the
    graph (9 categories: 1 to 4 hops apart, disconnected, three or four entities on a path, half or
    wholly fictional), retrieves with the five built-in retrievers and answers with the offline
    reader. Prints the paper's Table 5: context coverage (CC: every gold answer retrieved) and
    Hits@1 (the first answer is a gold answer) for strata of ERC (entity retrieval coverage) and
    RRS (reasoning readiness), with bootstrap 95% intervals, and the ERC threshold that best
    separates failures (Youden's J). triage explain ERC says more.

    Reads the KB file(s) and the optional question file; writes only the --json file.

    Examples:

      triage probe --kb 2H-kb.txt
      triage probe --kb kb.txt --questions qa_test.txt --json probe.json
    """
    from triage_plugins.apps.probe import run_probe
    from triage_plugins.contract.graph_view import GraphView
    from triage_plugins.datasets import load_kb, load_questions
    from triage_plugins.report.probe_view import render_probe

    if reader != "extractive":
        _fail(f"unknown reader {reader!r}: only 'extractive' (answers from the retrieved context) ships")
    _check_paths(
        {**_kb_inputs(kb), "question file": questions}, {"--json file": (json_out, "probe")}, force=force
    )
    _refuse_questions_as_kb(kb)
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
        list[str],
        typer.Option(
            metavar="FILE",
            help="Knowledge-graph file (PathQuestion or MetaQA); repeat for a KB in several files.",
        ),
    ],
    questions: Annotated[
        str,
        typer.Option(metavar="FILE", help="Test questions: a PathQuestion file or MetaQA's qa_test.txt."),
    ],
    annotations: Annotated[
        str | None,
        typer.Option(
            metavar="FILE",
            help="For MetaQA: the JSON lines giving each question's gold reasoning path (default: "
            "the matching file in the derived folder beside the question folder).",
        ),
    ] = None,
    noise: Annotated[
        float,
        typer.Option(
            metavar="SHARE", help="Share of the test questions' reasoning steps given a conflicting fact."
        ),
    ] = 0.2,
    feedback_noise: Annotated[
        float,
        typer.Option(metavar="P", help="Probability that each training feedback is flipped."),
    ] = 0.0,
    iterations: Annotated[
        int, typer.Option(metavar="N", help="Feedback iterations after the static baseline.")
    ] = 6,
    unit: Annotated[
        str, typer.Option(metavar="triple|chunk", help="What the learner scores: triples or chunks.")
    ] = "triple",
    chunking: Annotated[
        str,
        typer.Option(
            metavar="source|subject",
            help="With --unit chunk: source puts the injected facts in a chunk of their own (as if "
            "from another document); subject puts every fact about a subject in one chunk.",
        ),
    ] = "source",
    seed: Annotated[int, typer.Option(metavar="SEED", help="First seed.")] = 0,
    seeds: Annotated[int, typer.Option(metavar="N", help="Seeds to average over (SEED, SEED+1, ...).")] = 1,
    sample: Annotated[
        int | None, typer.Option(metavar="N", help="Test questions to sample (default: all).")
    ] = None,
    split: Annotated[
        str,
        typer.Option(
            metavar="all|dev|test",
            help="Questions used: all, or a fixed 1-in-5 dev part or the other 4-in-5 (test).",
        ),
    ] = "all",
    modes: Annotated[
        str,
        typer.Option(
            metavar="MODES",
            help="Comma-separated α modes (α weighs a triple's chunk score in its priority): learned "
            "(α learned from feedback) and fixed (α = 0.5).",
        ),
    ] = "learned,fixed",
    repeat_train: Annotated[
        bool,
        typer.Option(
            "--repeat-train",
            help="Ask the same training questions every iteration (default: a fresh set each time).",
        ),
    ] = False,
    framework: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Run the protocol through this framework's adapter (a --frameworks name of triage "
            "compare; PathQuestion only): it indexes documents made from the noisy KB with its "
            "offline stand-in models; the test questions are held out, generated training "
            "questions are rated. Default: the built-in pipeline.",
        ),
    ] = None,
    framework_mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            metavar="MODE",
            help="With --framework: its query mode (default: its first mode, as in triage compare).",
        ),
    ] = None,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="OUT", help="Also write every iteration to this JSON file."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help=_FORCE_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Replay the EvoRAG feedback-learning experiment offline on a KGQA dataset.

    KGQA: question answering over a knowledge graph; EvoRAG: learning which triples help answers
    from feedback on them.

    Adds a conflicting fact (a wrong object that continues the reasoning path) and irrelevant
    facts to a share of the test questions' reasoning steps, asks training questions in the same
    parts of the graph, feeds their gold feedback (flipped with --feedback-noise) to the learner,
    evolves the graph, and prints test accuracy (ACC, exact match, F1), α and the share of
    problematic triples per iteration, the static baseline first.

    Reads the KB and question files (PathQuestion or MetaQA, the public KGQA benchmarks); writes
    only the --json file. A full PathQuestion run takes minutes; --sample makes it shorter.

    Examples:

      triage evolve-bench --kb 2H-kb.txt --questions PQ-2H.txt --sample 200
      triage evolve-bench --kb 3H-kb.txt --questions PQ-3H.txt --feedback-noise 0.2
      triage evolve-bench --kb 2H-kb.txt --questions PQ-2H.txt --framework NAME --sample 100
    """
    from triage_plugins.apps.evolve import render_evolve_bench, run_evolve_bench

    if unit not in ("triple", "chunk"):
        _fail(f"--unit must be 'triple' or 'chunk', got {unit!r}")
    if chunking not in ("source", "subject") or split not in ("all", "dev", "test"):
        _fail("--chunking takes 'source' or 'subject'; --split takes 'all', 'dev' or 'test'")
    _check_paths(
        {**_kb_inputs(kb), "question file": questions, "annotations file": annotations},
        {"--json file": (json_out, "evolve-bench")},
        force=force,
    )
    _refuse_questions_as_kb(kb)
    if framework is not None:
        _framework_bench(framework, framework_mode, kb, questions, noise, iterations, sample, seed, seeds,
                         json_out, quiet, feedback_noise=feedback_noise, unit=unit)  # fmt: skip
        return
    if framework_mode is not None:
        _fail("--mode needs --framework")
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


def _framework_bench(
    framework: str,
    mode: str | None,
    kb: list[str],
    questions: str,
    noise: float,
    iterations: int,
    sample: int | None,
    seed: int,
    seeds: int,
    json_out: Path | None,
    quiet: bool,
    *,
    feedback_noise: float,
    unit: str,
) -> None:
    """``evolve-bench --framework``: the protocol through a real adapter (apps/evolve_frameworks)."""
    from triage_plugins.apps.evolve_frameworks import render_framework_bench, run_framework_bench

    if feedback_noise or unit != "triple" or len(kb) != 1:
        _fail("--framework runs one PathQuestion KB file at the triple unit with exact feedback")
    try:
        with _progress_bars(not quiet) as progress:
            result = run_framework_bench(
                framework, kb[0], questions, mode=mode, noise=noise, iterations=iterations,
                sample=sample or 100, seed=seed, seeds=seeds, progress=progress,
            )  # fmt: skip
    except TriageError as exc:
        _fail(str(exc))
    render_framework_bench(result, console)
    if json_out is not None:
        _save(json_out, json.dumps(result.to_dict(), indent=1, default=str), "results")


@app.command("plugins")
def plugins_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the loaded plugins and the hooks each implements.

    Shows the default plugins (recorder, implementation and usage metrics, gate, feedback) and
    those other packages install under the "triage" entry-point group, with their versions; a
    plugin that failed to load is listed with its error on stderr. TRIAGE_DISABLE_PLUGINS=a,b
    blocks plugins by name. Reads and writes nothing.

    Examples:

      triage plugins
      triage plugins --json
    """
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
        from triage_plugins.report.terminal import matrix_table

        rows = [
            (Text(p.name, style="bold"), [p.version or "-", p.source, ", ".join(p.hooks) or "(none)"])
            for p in infos
        ]
        columns = [("version", "left"), ("source", "left"), ("hooks", "left")]
        console.print(matrix_table(console, "triage plugins", ("name", "plugin"), rows, columns))
        for e in manager.load_errors:
            err.print(f"[yellow]not loaded:[/] {e.name} ({e.source}): {e.error}")
    finally:
        manager.close()


@store_app.command("info")
def store_info(
    path: Annotated[
        str, typer.Argument(metavar="STORE", help="The store: a SQLite file or a postgresql:// URL.")
    ],
    runs: Annotated[int, typer.Option(metavar="N", help="List at most the N latest runs.")] = 10,
) -> None:
    """Show a store's schema version, rows per table and its latest runs.

    Each run (one recording session: a demo stage, a comparison, a served process) is listed
    with its kind, start and end time, and the events it lost (dropped with the queue full, or
    still queued at exit). The store is opened read-only: nothing is created, migrated or changed
    (a file on a read-only filesystem works too).

    Examples:

      triage store info triage-demo.sqlite
      triage store info postgresql://triage@db.example/triage --runs 3
    """
    from triage_plugins.apps.store_tools import summarize
    from triage_plugins.report.terminal import fold_table

    try:
        summary = summarize(path)
    except TriageError as exc:
        _fail(str(exc))
    table = Table(title=Text(f"store {path} (schema {summary.schema_version})"))
    table.add_column("table", style="bold")
    table.add_column("rows", justify="right")
    for name, n in summary.counts.items():
        table.add_row(name, str(n))
    console.print(fold_table(table, console))
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
    _warn_store_faults(summary.runs)
    _warn_killed_runs(summary.runs)
    if summary.unattributed:
        causes = ", ".join(f"{cause}: {n}" for cause, n in summary.unattributed.items())
        console.print(Text(f"feedback the learner could not attribute (changed no score): {causes}"))


def _warn_store_faults(runs: list) -> None:
    """One warning line with the runs' failed store writes by cause (none: nothing printed)."""
    from triage_plugins.store.guard import describe_faults, sum_faults

    text = describe_faults(sum_faults(getattr(r, "faults", None) or {} for r in runs))
    if text:
        err.print(Text(f"warning: {text}", style="yellow"), soft_wrap=True)


def _warn_killed_runs(runs: list) -> None:
    """One warning line per run found killed (its lease expired without ``end_run``), with the
    queries whose events it lost (``faults["killed"]``, written by a server adapter's worker lease)."""
    for r in runs:
        killed = (getattr(r, "faults", None) or {}).get("killed")
        if isinstance(killed, dict):
            n = int(killed.get("queries_unanswered", 0) or 0)
            err.print(
                Text(
                    f"warning: run {r.id} (pid {killed.get('pid')}) was killed: {n} "
                    f"{'query' if n == 1 else 'queries'} in flight lost their events; "
                    f"{int(killed.get('queued_at_last_heartbeat', 0) or 0)} events were queued at its last heartbeat",
                    style="yellow",
                ),
                soft_wrap=True,
            )


def _print_runs(runs: list, total: int) -> None:
    import datetime as dt

    from triage_plugins.report.terminal import matrix_table

    def when(ts: float | None) -> str:
        if ts is None:
            return "(running or killed)"
        return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")

    rows = [
        (Text(r.id), [Text(r.kind), when(r.started_at), when(r.ended_at), str(r.dropped), str(r.undelivered)])
        for r in runs
    ]
    columns = [("kind", "left"), ("started", "left"), ("ended", "left"), ("dropped", "right")]
    title = f"runs (latest {len(runs)} of {total}, UTC)"
    console.print(matrix_table(console, title, ("id", "run"), rows, [*columns, ("undelivered", "right")]))


@store_app.command("prune")
def store_prune(
    path: Annotated[
        str, typer.Argument(metavar="STORE", help="The store: a SQLite file or a postgresql:// URL.")
    ],
    older_than: Annotated[
        str | None,
        typer.Option(
            metavar="AGE", help="Delete runs that started more than AGE ago: 90s, 30m, 12h, 7d, 2w."
        ),
    ] = None,
    keep_runs: Annotated[
        int | None, typer.Option(metavar="N", help="Keep only the N most recent runs.")
    ] = None,
) -> None:
    """Delete old runs with their events and metric rows; learned scores are kept.

    Needs --older-than or --keep-runs (with both, a run goes when either says so); nothing is
    deleted by default. Learned triple and chunk scores and learner parameters stay. A file that
    is not a triage store is refused untouched. Prints how many runs, events, metric rows, graph
    snapshots and retrieved triples and chunks (stored once, shared by events) were deleted.

    Examples:

      triage store prune triage-demo.sqlite --keep-runs 5
      triage store prune triage.sqlite --older-than 7d
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
            f"{deleted.get('metrics', 0)} metric rows, {deleted.get('blobs', 0)} graph snapshots, "
            f"{deleted.get('parts', 0)} retrieved triples and chunks no event names any more"
        ),
        soft_wrap=True,
    )
    if "bytes_freed" in deleted:
        console.print(f"compacted the file (VACUUM): {deleted['bytes_freed']:,} bytes freed on disk", soft_wrap=True)
    else:
        console.print(
            "PostgreSQL reuses the freed rows' space (autovacuum); VACUUM FULL returns it to the OS and is optional",
            soft_wrap=True,
        )


@store_app.command("migrate")
def store_migrate(
    path: Annotated[
        str, typer.Argument(metavar="STORE", help="The store: a SQLite file or a postgresql:// URL.")
    ],
) -> None:
    """Bring a store to this triage-plugins' schema: migrate an older one, set up a new database.

    Read-only commands (report, store info) never migrate; when they say a store has an older
    schema, this is the command to run. A SQLite STORE must be an existing triage store (a missing
    path or a file of another application is refused untouched); a PostgreSQL STORE may be a new,
    empty database, whose triage tables are created. A store of a newer schema is refused. Running
    it on a current store changes nothing.

    Examples:

      triage store migrate triage.sqlite
      triage store migrate postgresql://triage@db.example/triage
    """
    from triage_plugins.apps.store_tools import migrate

    try:
        done = migrate(path)
    except TriageError as exc:
        _fail(str(exc))
    if not done.changed:
        console.print(
            Text(f"{path} is at store schema {done.after} already: nothing to migrate"), soft_wrap=True
        )
    elif done.before == 0:
        console.print(Text(f"created the triage store in {path} (schema {done.after})"), soft_wrap=True)
    else:
        console.print(
            Text(f"migrated {path} from store schema {done.before} to {done.after}"), soft_wrap=True
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
            metavar="EVENTS",
            help="A JSON-lines file of events: from triage export, or written by any pipeline "
            "(the format: triage schema).",
        ),
    ],
    ontology: Annotated[
        Path | None,
        typer.Option(
            "--ontology",
            metavar="FILE",
            help="Ontology (JSON or YAML: entity types, relations, domains and ranges) for the "
            "schema metrics SC, CVR, LC and OC.",
        ),
    ] = None,
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            metavar="FILE",
            help="A reference KG (PathQuestion or MetaQA KB file) for correctness COR and completeness CMP.",
        ),
    ] = None,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="OUT", help="Also write the full report to this JSON file."),
    ] = None,
    max_queries: Annotated[
        int, typer.Option(metavar="N", help="Queries listed in the per-query table.")
    ] = 50,
    skip_bad: Annotated[
        bool,
        typer.Option(
            "--skip-bad",
            help="Skip lines that are not valid events and score the rest (a warning gives how many "
            "and the first line numbers); by default the first bad line stops the command.",
        ),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help=_FORCE_HELP)] = False,
) -> None:
    """Compute every metric a file of events allows: per stage, per query, and each query's signature.

    The signature is the first failing link of the diagnostic chain (e.g. retrieval_gap: the
    question's entities are in the KG but were not retrieved). Fields a pipeline could not supply
    may be missing: entity mentions and their grounding are then derived from the last graph
    event, and what cannot be computed is shown as N/A with the reason. triage explain METRIC
    defines each metric.

    Reads EVENTS in two streaming passes (memory does not grow with its length), and the optional
    ontology and reference files; writes only the --json file. EVENTS may be a pipe (/dev/stdin,
    <(cmd)): it is copied once to a temporary file; a named pipe must get its writer within 10 s.

    Examples:

      triage export triage-demo.sqlite --jsonl events.jsonl
      triage score events.jsonl --json report.json
    """
    from triage_plugins.apps.score import render_score_report
    from triage_plugins.apps.score_file import score_file, write_json_report
    from triage_plugins.kg.ontology import load_ontology

    _check_paths(
        {"events file": events, "ontology file": ontology, "reference KG file": reference},
        {"--json file": (json_out, "score")},
        force=force,
    )
    # score_file refuses a SQLite store, and reads a pipe (/dev/stdin, <(cmd)) once into a copy.
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
        str,
        typer.Argument(
            metavar="STORE", help="The store to read: a SQLite file or a postgresql:// URL (read-only)."
        ),
    ],
    jsonl: Annotated[
        Path, typer.Option("--jsonl", metavar="OUT", help="The JSON-lines file to write, one event a line.")
    ],
    run: Annotated[
        str | None,
        typer.Option("--run", metavar="RUN_ID", help="Only this run's events (ids: triage store info)."),
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            metavar="KIND",
            help="Only events of this kind: extraction, graph, retrieval, generation, feedback, "
            "rerank or gate.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace OUT if it exists (never the store it reads).")
    ] = False,
) -> None:
    """Write a store's events as JSON lines, the input of triage score and of other tools.

    Events are written in recording order, every run by default. OUT appears complete or not at
    all (written beside it, then renamed) and an existing OUT is never replaced without --force.
    The store is opened read-only.

    Examples:

      triage export triage-demo.sqlite --jsonl events.jsonl
      triage export triage.sqlite --jsonl retrievals.jsonl --kind retrieval
    """
    from triage_plugins.apps.export import export_events

    _check_paths({"store": store}, {"output file": (jsonl, "new")}, stores={"STORE": store}, force=force)
    try:
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
        Path | None,
        typer.Option("--out", metavar="OUT", help="Write the schema to this file instead of printing it."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help=_FORCE_HELP)] = False,
) -> None:
    """Print the JSON Schema (draft 2020-12) of an event line, generated from the event classes.

    It describes the lines triage score reads and triage export writes: the kinds of event, their
    fields, types and required fields. The value rules of each event (non-blank ids, ranges) are
    checked when a line is read. Reads nothing; writes stdout or the --out file.

    Examples:

      triage schema --out events.schema.json
      triage schema | python -m json.tool
    """
    from triage_plugins.apps.schema import event_schema

    _check_paths(outputs={"schema file": (out, "schema")}, force=force)
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
        str | None,
        typer.Argument(metavar="METRIC", help="A metric symbol such as ERC, RRS or TCS (any case)."),
    ] = None,
    list_all: Annotated[bool, typer.Option("--list", help="List every metric with its name.")] = False,
) -> None:
    """Explain a metric: definition, paper section, range, a healthy value, the lever when it is low.

    The text is read from the metric registry, the same as docs/metrics.md; without METRIC, every
    metric is listed. Reads and writes nothing.

    Examples:

      triage explain ERC
      triage explain --list
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
    grid = Table.grid(padding=(0, 1))  # values wrap at words under themselves, at any width
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    for label, value in (
        ("definition", entry.definition),
        ("paper", f"TRIAGE {entry.section} ({entry.phase})"),
        ("range", f"{entry.range}, {entry.direction}"),
        ("healthy", entry.healthy),
        ("when low", entry.lever),
        *(("note", n) for n in entry.notes),
    ):
        grid.add_row(f"  {label}:", Text(value))
    console.print(grid)


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

    rows = []
    try:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TriageError(f"{path}, line {number}: not valid JSON ({exc.msg})") from None
                if not rows and isinstance(row, dict) and row.get("event") in EVENT_TYPES:
                    return score_events(read_events(path)).rows()
                if not isinstance(row, dict):
                    raise TriageError(f"{path}, line {number}: expected a JSON object of metric values")
                rows.append(row)
    except UnicodeDecodeError as exc:
        raise TriageError(
            f"{path}: not UTF-8 text ({exc.reason}); a store must end in .sqlite or .db"
        ) from None
    return rows


def _require_columns(rows: list[dict], source: str, wanted: dict[str, str | None]) -> None:
    """Fail when an option names a column no row has, with the close matches."""
    import difflib

    columns = sorted({k for row in rows for k in row})
    for option, name in wanted.items():
        if name is None or name in columns:
            continue
        close = [c for c in columns if c.casefold() == name.casefold()] or difflib.get_close_matches(
            name, columns, n=3, cutoff=0.5
        )
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        _fail(f"{option} {name}: no such column in {source}{hint} (columns: {', '.join(columns)})")


@app.command("calibrate")
def calibrate_cmd(
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="Scored queries: a store (.sqlite file, sqlite:/// or postgresql:// URL), a JSON-lines "
            "file of events, or a JSON-lines file of scored rows (one object of metric values a line).",
        ),
    ],
    metric: Annotated[
        str,
        typer.Option(
            metavar="METRIC", help="The predictor, a metric such as ERC, RRS or QGR (triage explain ERC)."
        ),
    ] = "ERC",
    outcome: Annotated[
        str,
        typer.Option(
            metavar="METRIC",
            help="The outcome column (CC: the gold answer was retrieved); a row fails when it is "
            "below --outcome-threshold.",
        ),
    ] = "CC",
    cluster: Annotated[
        str | None,
        typer.Option(
            metavar="COLUMN",
            help="Rows sharing this column's value are resampled together (one question seen by "
            "several retrievers counts once).",
        ),
    ] = "query",
    outcome_threshold: Annotated[
        float, typer.Option(metavar="VALUE", help="An outcome below this value is a failure.")
    ] = 0.5,
    resamples: Annotated[int, typer.Option(metavar="N", help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(metavar="SEED", help="Seed of the bootstrap.")] = 0,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="OUT", help="Also write the result to this JSON file."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help=_FORCE_HELP)] = False,
) -> None:
    """Find the metric threshold that best predicts failure, with bootstrap confidence intervals.

    The threshold θ maximises Youden's J (sensitivity + specificity - 1) for predicting that the
    outcome fails (TRIAGE paper, §5.2); the 95% intervals of θ and J come from a clustered BCa
    bootstrap (bias-corrected and accelerated). Prints θ, the cut-off to configure, J,
    sensitivity and specificity. Reads SOURCE (a store read-only); writes only the --json file.

    Examples:

      triage calibrate triage-demo.sqlite
      triage calibrate rows.jsonl --metric RRS --outcome Hits@1 --json rrs.json
    """
    from triage_plugins.apps.score import calibrate_rows, render_calibration, report_json

    _check_paths(outputs={"--json file": (json_out, "calibrate")}, stores={"SOURCE": source}, force=force)
    try:
        if source.endswith((".sqlite", ".db", ".sqlite3")) or source.startswith(("sqlite:", "postgres")):
            rows = _rows_from_store(source)
        else:
            _check_paths({"file": source})
            rows = _rows_from_jsonl(Path(source))
        if not rows:
            _fail(f"{source} holds no scored queries")
        _require_columns(rows, source, {"--metric": metric, "--outcome": outcome, "--cluster": cluster})
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
        _save(json_out, report_json(report), "result")


@app.command("compare")
def compare_cmd(
    frameworks: Annotated[
        str | None,
        typer.Option(
            metavar="NAMES",
            help="Comma-separated framework names (default: every installed framework). One whose "
            "package is missing is reported, not fatal; an unknown name is an error that lists the "
            "known ones (reference, the built-in pipelines, is always there).",
        ),
    ] = None,
    corpus: Annotated[
        str,
        typer.Option(
            metavar="NAME|DIR",
            help="The documents: embedded (a generated world with its 60 questions); pq-2h or pq-3h "
            "(300 documents and 200 questions derived from PathQuestion's KB, read from "
            "$TRIAGE_DATA_DIR or ../shared/data; --seed picks the sample); or a folder of .txt/.md "
            "files (then give --questions).",
        ),
    ] = "embedded",
    questions: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help='Questions: JSON lines {"question": ..., "answers": ...} (answers, needed for '
            "accuracy, optional) or a PathQuestion/MetaQA file (default: the embedded world's).",
        ),
    ] = None,
    modes: Annotated[
        str | None,
        typer.Option(
            metavar="MODES",
            help="Comma-separated query modes, e.g. hybrid,local (default: every mode of each framework).",
        ),
    ] = None,
    feedback_rounds: Annotated[
        int,
        typer.Option(
            metavar="N",
            help="Rounds of EvoRAG learning from gold feedback after the first pass (at most 100).",
        ),
    ] = 0,
    store: Annotated[
        str | None,
        typer.Option(
            metavar="STORE",
            help="Also record events, metrics and learned scores here (default: kept in memory).",
        ),
    ] = None,
    ontology: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Ontology file (JSON or YAML) for the schema metrics OC, LC, SC."),
    ] = None,
    seed: Annotated[
        int, typer.Option(metavar="SEED", help="Seed of the embedded world (pq-2h/pq-3h: of the sample).")
    ] = 0,
    seeds: Annotated[
        int,
        typer.Option(
            metavar="N",
            help="Repeat over N seeds of a built-in corpus (SEED to SEED+N-1, at most 100) and add "
            "each row's mean over seeds with a 95% interval.",
        ),
    ] = 1,
    max_questions: Annotated[
        int | None, typer.Option(metavar="N", help="Ask at most N questions, N >= 1 (default: all).")
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", metavar="OUT", help="Write the result to this JSON file.")
    ] = None,
    html_out: Annotated[
        Path | None,
        typer.Option("--html", metavar="OUT", help="Write a self-contained HTML report to this file."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help=_FORCE_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Run one corpus through several graph-RAG frameworks and compare them, one row per mode.

    Every installed framework adapter, and reference (the built-in pipelines), indexes the same
    documents with offline stand-ins for the LLM and the embedder,
    then answers the same questions in each of its query modes. Prints per row the extraction and
    graph metrics, the retrieval metrics per query, answer accuracy (Hits@1, with a 95% interval),
    paired differences, the chain signatures and, with --feedback-rounds, accuracy per round.

    Reads the corpus folder and question file if given; writes only --store, --json and --html
    (paths checked before the run starts). The full default run takes a few minutes.

    Examples:

      triage compare --frameworks reference --html compare.html
      triage compare --feedback-rounds 2 --store cmp.sqlite --json cmp.json
      triage compare --corpus pq-2h --feedback-rounds 1
    """
    from triage_plugins.apps.compare import run_compare, run_compare_seeds
    from triage_plugins.report import compare_html, render_compare

    _check_paths(
        {"question file": questions, "ontology file": ontology},
        {"--json file": (json_out, "compare"), "--html file": (html_out, "html")},
        stores={"--store": store},
        new_store=store,
        force=force,
    )
    if corpus not in _built_in_corpora() and not Path(corpus).is_dir():
        _fail(
            f"--corpus is one of {', '.join(_built_in_corpora())} or a folder of .txt/.md files; "
            f"{corpus} is neither"
        )
    _bounded("--seeds", seeds, 1, MAX_SEEDS)
    _bounded("--feedback-rounds", feedback_rounds, 0, MAX_ROUNDS)
    if max_questions is not None and max_questions < 1:
        _fail(f"--max-questions is a number of questions (1 or more), got {max_questions}")
    if seeds > 1 and (corpus not in _built_in_corpora() or questions is not None):
        _fail(
            "--seeds N > 1 repeats over built-in corpora: use it with --corpus embedded, pq-2h or pq-3h and no --questions"
        )
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


def _built_in_corpora() -> tuple[str, ...]:
    """``--corpus`` names that are not folders: the embedded world and the KGQA-derived corpora."""
    from triage_plugins.apps.kgqa_corpus import KGQA_CORPORA

    return ("embedded", *KGQA_CORPORA)


def _compare_inputs(
    corpus: str, seed: int, ontology: Path | None, questions: Path | None, max_questions: int | None
) -> tuple[Any, list, Callable[[int], Any]]:
    """The corpus, the questions asked, and the built-in corpus of any seed (for --seeds)."""
    from dataclasses import replace

    from triage_plugins.apps.compare import embedded_corpus, load_corpus_dir, load_question_file
    from triage_plugins.apps.kgqa_corpus import pathquestion_corpus
    from triage_plugins.kg.ontology import load_ontology

    def built_in(s: int) -> Any:
        return embedded_corpus(s) if corpus == "embedded" else pathquestion_corpus(corpus, seed=s)

    def seeded(s: int) -> Any:  # the built-in corpus of seed s, as asked (ontology, max questions)
        world = built_in(s)
        world = world if ontology is None else replace(world, ontology=load_ontology(ontology))
        return replace(world, questions=world.questions[:max_questions])

    source = built_in(seed) if corpus in _built_in_corpora() else load_corpus_dir(corpus)
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
            metavar="STORE",
            help="The store of a deployment or a demo: a SQLite file or a postgresql:// URL "
            "(opened read-only).",
        ),
    ],
    html_out: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="OUT",
            help="Also write a self-contained HTML report (no network needed to view it) to this file.",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            metavar="WHEN",
            help="Only rows recorded since: an age (30m, 2h, 7d), an ISO date or epoch seconds "
            "(default: everything).",
        ),
    ] = None,
    window: Annotated[
        int,
        typer.Option(metavar="N", help="Rolling window: means and triggers over the last N queries."),
    ] = 20,
    statistic: Annotated[
        str,
        typer.Option(
            metavar="STAT",
            help="What a trigger compares with its threshold: mean (the window's mean), quantile, "
            "or failing_rate (the share of failing queries).",
        ),
    ] = "mean",
    force: Annotated[bool, typer.Option("--force", help=_FORCE_HELP)] = False,
) -> None:
    """Report on a store: metrics over time, KG-update triggers, worst queries, score movement.

    For each framework and retriever: the chain metrics over rolling windows of queries, the
    triggers that fired (a metric's window statistic crossing its threshold, with the first
    lever to pull), the worst queries per chain signature (the first failing link) traced link by
    link, the latest graph
    metrics, the learned scores that moved most, and any events lost on the way to the store.

    Reads STORE read-only; writes only the --html file. The HTML report has a sortable, filterable
    query table and, per query, the retrieved triples, the answer, the gold answer and a drawing
    of the retrieved subgraph.

    Examples:

      triage report triage-demo.sqlite
      triage report triage.sqlite --since 2h --html report.html
    """
    from triage_plugins.report import build_store_report, parse_since, render_store_report, store_html
    from triage_plugins.store import Store

    _check_paths(outputs={"--html file": (html_out, "html")}, stores={"STORE": store}, force=force)
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


feedback_app = _App(
    cls=_Group,
    help="""Turn feedback given in other tools into learning.

    Ratings of answers given where you already look at traces (Arize Phoenix, a tracing UI) move
    the learned scores of the triples or chunks those answers retrieved (EvoRAG learning).

    Example:

      triage feedback pull --store triage.sqlite --endpoint http://localhost:6006
    """,
    no_args_is_help=True,
)
app.add_typer(feedback_app, name="feedback")


@feedback_app.command("pull")
def feedback_pull_cmd(
    store: Annotated[
        str,
        typer.Option(
            metavar="STORE",
            help="The store the answering process recorded to (its TRIAGE_STORE_URL or TRIAGE_STORE).",
        ),
    ],
    endpoint: Annotated[
        str,
        typer.Option(
            metavar="URL", help="The Phoenix server to read from.", envvar="PHOENIX_COLLECTOR_ENDPOINT"
        ),
    ] = "http://127.0.0.1:6006",
    project: Annotated[
        str, typer.Option(metavar="NAME", help="The Phoenix project the traces were sent to.")
    ] = "default",
    unit: Annotated[
        str, typer.Option(metavar="triple|chunk", help="What the learner scores: triples or chunks.")
    ] = "triple",
    name: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME", help="Only annotations with this name; repeat for several (default: all)."
        ),
    ] = None,
) -> None:
    """Read ratings of answers from Phoenix and learn from each one once.

    Reads the span annotations (human or LLM ratings) of a Phoenix project over HTTP, maps each
    to the query it rates (triage.query_id on the spans triage traced), and delivers it as
    feedback: a score in [0, 1], a 1-5 rating, or a label such as correct or incorrect. Writes the
    feedback and the learned scores into STORE and remembers which annotations it applied, so
    pulling again applies only new ones. Prints the scores that changed.

    Example:

      triage feedback pull --store triage.sqlite --endpoint http://localhost:6006
    """
    from triage_plugins.apps.feedback_pull import pull_into_store

    if "://" not in store and not Path(store).exists():
        _fail(f"no store at {store}")
    try:
        result, changed = pull_into_store(store, endpoint=endpoint, project=project, unit=unit, names=name)
    except TriageError as exc:
        _fail(str(exc))
    from triage_plugins.apps.feedback_pull import printable

    # Annotation text is the server's data: shown as plain Text (no markup), control characters escaped.
    console.print(
        Text(
            f"{len(result.applied)} annotation(s) applied, {result.already} already applied, "
            f"{len(result.skipped)} skipped ({result.malformed} malformed); {result.spans} span(s) read"
        )
    )
    for pulled in result.applied:
        e = pulled.event
        line = f"  {printable(e.framework, 40)}/{printable(e.query_id, 60)}: {printable(pulled.name, 60)}"
        console.print(Text(f"{line} = {printable(e.raw, 40)} -> score {e.score:.2f} ({e.source})"))
    for note_id, why in result.skipped:
        shown = f"  skipped {printable(note_id, 60)}: {printable(why, 200)}"
        err.print(Text(shown, style="yellow"), soft_wrap=True)
    if result.capped:
        capped = f"  {result.capped} over feedback.max_per_query for their query: changed no score"
        err.print(Text(capped, style="yellow"))
    if changed:
        from triage_plugins.report.terminal import matrix_table

        moved = sorted(changed.items(), key=lambda kv: -abs(kv[1][1] - (kv[1][0] or 100.0)))
        rows = [
            (Text(key), ["-" if old is None else f"{old:.2f}", f"{new:.2f}"]) for key, (old, new) in moved
        ]
        title = f"learned {unit} scores changed"
        console.print(
            matrix_table(console, title, (unit, unit), rows, [("before", "right"), ("after", "right")])
        )


#: The one line Ctrl-C prints (exit status 130).
INTERRUPTED = "interrupted: stopped early; what was written before Ctrl-C (store rows, output files) is kept"


def main() -> None:
    """Console-script entry point; Ctrl-C ends it with one line (:data:`INTERRUPTED`) and status 130."""
    try:
        app()
    except SystemExit as exc:
        if exc.code == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into a silent Exit(130)
            print(INTERRUPTED, file=sys.stderr)
        raise
    except KeyboardInterrupt:  # before typer's own handling took over
        print(INTERRUPTED, file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
