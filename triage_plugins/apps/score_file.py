"""Score a trace file of any length in two streaming passes: ``triage score EVENTS.jsonl``.

:func:`~triage_plugins.apps.score.score_events` holds the whole trace in memory. A deployment's trace
can have millions of lines, so :func:`score_file` reads the file twice instead:

1. **Index**: every line is parsed and checked (a bad line stops here, before any output); the
   extraction events and the last graph event are kept (the phases and the grounder need them); the
   line index names the last retrieval, answer and closed-book generation of each
   ``(framework, query_id)`` and the line where each query is complete (see :class:`_Index`).
2. **Score**, a replay (:class:`~triage_plugins.apps.score.Replay`): the lines the index names are
   taken from pass 1's events while their text fits in :data:`CACHE_BYTES` (each line parsed once), the
   rest parsed again, and fed to the replay's scorer, which holds a query in its one per-query map until
   its last line, then scores it once; its record is handed to the JSON writer and dropped. Only queries
   whose parts are still to come are held, so memory follows how far apart a query's events are (plus
   the bounded cache and the line index), not the trace's events.

The result equals :func:`score_events` on the same events, except that queries come in the order
their last event appears in the file.

A pipe (``/dev/stdin``, ``<(cmd)``, a named pipe) cannot be read twice: it is copied once into a
temporary file (:func:`readable`), and a named pipe that no process opens for writing within
:data:`PIPE_OPEN_SECONDS` is an error, not a wait forever.

With ``skip_bad=True`` a line that is not an event is counted, noted and skipped in pass 1 instead of
stopping it; pass 2 reads only the lines pass 1 indexed, so both passes skip the same lines.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from triage_plugins.apps.score import (
    Replay,
    Trace,
    default_grounder,
    parse_line,
    read_lines,
    score_phases,
    summarize_records,
)
from triage_plugins.contract.errors import EventError, TriageError
from triage_plugins.contract.events import (
    Event,
    ExtractionEvent,
    GenerationEvent,
    GraphEvent,
    RetrievalEvent,
    from_json,
)
from triage_plugins.metrics.registry import MetricRegistry
from triage_plugins.report.results import BadLines, QueryScore, ScoreReport, result_dict, rhd_key
from triage_plugins.runtime.registrations import metric_registry

if TYPE_CHECKING:
    from triage_plugins.contract.graph_view import GraphView
    from triage_plugins.contract.records import QueryRecord
    from triage_plugins.kg.ontology import Ontology

__all__ = ["PIPE_OPEN_SECONDS", "readable", "score_file", "write_json_report"]

_RETRIEVAL, _ANSWER, _CLOSED = 0, 1, 2
#: Seconds to wait for a process to open a named pipe for writing before giving up.
PIPE_OPEN_SECONDS = 10.0
#: Allocations between young-generation collections while a file is scored (Python's default: 700).
#: Scoring allocates millions of short-lived, acyclic objects; at the default rate the collector ran
#: often enough to take ~30 % of the CPU, rescanning the graph and the kept events each time.
GC_YOUNG_THRESHOLD = 10_000
#: Characters of query lines whose pass-1 events are kept for pass 2 instead of parsed again (about
#: 2.4 bytes of memory per character: 96 Mi characters, ~230 MB, hold a 100k-line trace's queries).
CACHE_BYTES = 96 << 20
_SQLITE = b"SQLite format 3\x00"


def _open_pipe(path: Path, wait: float) -> BinaryIO:
    """``path``, a named pipe, opened for reading once a writer opens it; at most ``wait`` seconds."""
    opened: dict[str, Any] = {}

    def opener() -> None:
        try:
            opened["file"] = open(path, "rb")  # noqa: SIM115 - handed to the caller
        except OSError as exc:
            opened["error"] = exc

    thread = threading.Thread(target=opener, name="triage-pipe-open", daemon=True)
    thread.start()
    thread.join(wait)
    if thread.is_alive():
        with contextlib.suppress(OSError):  # be the writer for an instant: the blocked open returns
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(1.0)
        if "file" in opened:
            opened["file"].close()
        raise TriageError(
            f"{path} is a named pipe that no process opened for writing within {wait:g} s; "
            "start the writer first, or write the events to a file"
        )
    if "error" in opened:
        raise opened["error"]
    return opened["file"]


def _spool(path: Path, wait: float) -> Path:
    """A temporary file holding everything read from ``path`` (a pipe or a device) until its end."""
    mode = path.stat().st_mode
    source = _open_pipe(path, wait) if stat.S_ISFIFO(mode) else open(path, "rb")  # noqa: SIM115
    with source, tempfile.NamedTemporaryFile(prefix="triage-score-", suffix=".jsonl", delete=False) as copy:
        try:
            shutil.copyfileobj(source, copy, 1 << 20)
        except BaseException:
            Path(copy.name).unlink(missing_ok=True)
            raise
    return Path(copy.name)


@contextmanager
def readable(path: str | Path, *, wait: float | None = None) -> Iterator[Path]:
    """``path`` as a file that can be read twice: itself when it is a regular file (or cannot be
    examined: reading it then says why), else a temporary copy of all it gives, removed on exit.

    :param wait: seconds a named pipe may wait for its writer (default :data:`PIPE_OPEN_SECONDS`).
    :raises TriageError: a named pipe got no writer in time, or the pipe or device cannot be read.
    """
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except OSError:
        mode = stat.S_IFREG
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        yield p
        return
    try:
        copy = _spool(p, PIPE_OPEN_SECONDS if wait is None else wait)
    except OSError as exc:
        raise TriageError(f"cannot read {p}: {exc.strerror or exc}") from None
    try:
        yield copy
    finally:
        copy.unlink(missing_ok=True)


def _refuse_store(source: Path, name: str | Path) -> None:
    """A SQLite store given where events are expected is a clear error (not "line 1 is not JSON")."""
    try:
        with open(source, "rb") as fh:
            head = fh.read(len(_SQLITE))
    except OSError:
        return  # reading it says why
    if head == _SQLITE:
        raise TriageError(
            f"{name} is a SQLite store, not an events file: write its events with "
            f"`triage export {name} --jsonl events.jsonl`, then score events.jsonl"
        )


@dataclass(slots=True)
class _Index:
    """Pass 1: the trace without its queries' events, and the line index pass 2 replays.

    ``lines`` maps each line pass 2 feeds to the replay's scorer (the last retrieval, answer and
    closed-book answer of every query with a retrieval) to whether its query is complete once that
    line is read. It is a streaming line index, not per-query state: line numbers and flags, no events
    and nothing scored; the queries' events are held by the one scorer (its one per-query map) only
    between a query's first wanted line and its last. Building it needs each query's three last line
    numbers during pass 1 (the least a two-pass reader that scores the last of each part can know);
    that table is a local of :func:`_index`, dropped when pass 1 ends.
    """

    trace: Trace = field(default_factory=Trace)
    lines: dict[int, bool] = field(default_factory=dict)  # wanted line -> its query is complete there
    events: dict[int, tuple[Event, int]] = field(default_factory=dict)  # line -> (event, its characters)
    cached: int = 0  # characters of the lines in ``events``
    budget: int = 0

    def keep(self, number: int, event: Event, size: int) -> None:
        """Hold a query line's event for pass 2 while the budget allows."""
        if self.cached + size <= self.budget:
            self.events[number] = (event, size)
            self.cached += size

    def drop(self, number: int) -> None:
        """Forget a line superseded by a later one of the same query part."""
        held = self.events.pop(number, None)
        if held is not None:
            self.cached -= held[1]


def _index(path: str | Path, bad: BadLines | None = None, name: str | Path | None = None) -> _Index:
    """Pass 1 over ``path`` (named ``name`` in messages, default ``path``)."""
    name = path if name is None else name
    index = _Index(budget=CACHE_BYTES)
    trace = index.trace
    retrieved_twice = 0
    parts: dict[tuple[str, str], list[int]] = {}  # query -> its 3 last line numbers (0: none); pass 1 only
    for number, line in read_lines(path, bad, name=name):
        if bad is None:
            event = parse_line(line, name, number)
        else:
            try:
                event = from_json(line)
            except EventError as exc:
                bad.add(number, str(exc))
                continue
        trace.counts[event.kind] += 1
        if isinstance(event, ExtractionEvent):
            trace.extractions.append(event)
        elif isinstance(event, GraphEvent):
            trace.graph_event = event
        elif isinstance(event, RetrievalEvent | GenerationEvent):
            slots = parts.setdefault((event.framework, event.query_id), [0, 0, 0])
            if isinstance(event, RetrievalEvent):
                retrieved_twice += slots[_RETRIEVAL] != 0
                slot = _RETRIEVAL
            else:
                slot = _CLOSED if event.context == "none" else _ANSWER
            if slots[slot]:
                index.drop(slots[slot])
            slots[slot] = number
            index.keep(number, event, len(line))
    if retrieved_twice:
        trace.notes.append(
            f"{retrieved_twice} retrieval event(s) repeat a query id: the last retrieval of each is scored"
        )
    if bad is not None and bad.count:
        trace.notes.append(bad.summary(name))
    if trace.counts["graph"] > 1:
        trace.notes.append(f"{trace.counts['graph']} graph events: the last one is scored")
    orphans = sum(1 for slots in parts.values() if not slots[_RETRIEVAL])
    if orphans:
        trace.notes.append(f"{orphans} generation event(s) without a retrieval event were not scored")
    for slots in parts.values():
        if slots[_RETRIEVAL]:
            last = max(slots)
            index.lines.update((n, n == last) for n in slots if n)
        else:
            for n in slots:
                index.drop(n)
    return index


def _replayed(
    path: str | Path, index: _Index, replay: Replay, name: str | Path | None = None
) -> Iterator[QueryRecord]:
    """Pass 2: feed each indexed line's event to the replay's scorer, which holds its query until the
    query's last line is read and then scores it once; each query's record, in that order."""
    name = path if name is None else name
    lines = index.lines
    for number, event in _wanted_events(path, sorted(lines), index, name):
        assert isinstance(event, RetrievalEvent | GenerationEvent)  # the index names no other line
        replay.feed(event)
        if lines[number]:
            yield from replay.finish(event.framework, event.query_id)


def _wanted_events(
    path: str | Path, numbers: list[int], index: _Index, name: str | Path
) -> Iterator[tuple[int, Event]]:
    """The events on lines ``numbers`` (ascending): pass 1's when it kept them, else parsed again.
    The file is opened only if a wanted line was not kept."""
    cache = index.events
    lines: Iterator[tuple[int, str]] | None = None
    try:
        for number in numbers:
            held = cache.pop(number, None)
            if held is not None:
                yield number, held[0]
                continue
            if lines is None:  # pass 1 already counted the undecodable lines; none of them is wanted
                lines = read_lines(path, BadLines(), name=name)
            event = next((parse_line(text, name, n) for n, text in lines if n == number), None)
            if event is None:
                return  # the file ended early (changed since pass 1): what was not read is not scored
            yield number, event
    finally:
        cache.clear()
        index.cached = 0
        if lines is not None:
            lines.close()  # type: ignore[attr-defined]


def score_file(
    path: str | Path,
    *,
    ontology: Ontology | None = None,
    reference: GraphView | None = None,
    thresholds: Mapping[str, float] | None = None,
    metrics: MetricRegistry | None = None,
    keep: int | None = None,
    json_to: TextIO | None = None,
    skip_bad: bool = False,
) -> ScoreReport:
    """Score a JSON-lines trace file in two streaming passes (see the module docstring).

    :param keep: keep only the worst ``keep`` per-query reports in the result, worst first
        (:func:`~triage_plugins.report.score_order.worst_first`; ``None``: all, in file order); the
        aggregates, RHD and signature counts always cover every query.
    :param json_to: write the full JSON report (every query) here while scoring, in the shape of
        :meth:`ScoreReport.to_dict`.
    :param skip_bad: skip lines that are not events (counted in :attr:`ScoreReport.bad_lines` and
        summed up in one note) instead of raising.
    :raises EventError: a line is not an event (the message names the line), before anything is
        written; not with ``skip_bad``.
    :raises TriageError: the file cannot be read, is a SQLite store, or is a named pipe that got
        no writer within :data:`PIPE_OPEN_SECONDS`.
    """
    with readable(path) as source, _fewer_collections():
        _refuse_store(source, path)
        return _score(source, path, ontology, reference, thresholds, metrics, keep, json_to, skip_bad)


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """The cyclic collector's young threshold raised to :data:`GC_YOUNG_THRESHOLD` (never lowered)
    while scoring, then restored: the same objects are freed, by reference counting, far fewer scans."""
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, GC_YOUNG_THRESHOLD), *older)
    try:
        yield
    finally:
        gc.set_threshold(young, *older)


def _score(
    source: Path,
    path: str | Path,
    ontology: Ontology | None,
    reference: GraphView | None,
    thresholds: Mapping[str, float] | None,
    metrics: MetricRegistry | None,
    keep: int | None,
    json_to: TextIO | None,
    skip_bad: bool,
) -> ScoreReport:
    """:func:`score_file` on ``source``, a regular file, named ``path`` in messages."""
    registry = metric_registry() if metrics is None else metrics
    bad = BadLines() if skip_bad else None
    index = _index(source, bad, path)
    trace = index.trace
    phases = score_phases(trace, ontology, reference, registry)
    grounder = default_grounder(trace)
    from triage_plugins.report.score_order import worst_first

    kept: list[QueryScore] = []
    writer = _JsonWriter(json_to) if json_to is not None else None
    if writer is not None:
        writer.start(dict(trace.counts), {k: v.to_dict() for k, v in phases.items()})

    def sink(score: QueryScore) -> None:
        kept.append(score)
        if keep is not None and len(kept) >= 2 * keep + 64:  # the worst ``keep`` so far, memory bounded
            kept[:] = worst_first(kept)[:keep]
        if writer is not None:
            writer.query(score.to_dict())

    replay = Replay(thresholds, registry)
    try:
        if trace.graph_event is not None:
            replay.use_graph(trace.graph_event)
        records = _replayed(source, index, replay, path)
        summary = summarize_records(records, graph=trace.graph, grounder=grounder, sink=sink)
    finally:
        replay.close()
    if keep is not None:
        kept[:] = worst_first(kept)[:keep]
    report = ScoreReport(
        phases, kept, summary.aggregate, summary.rhd, summary.signatures, dict(trace.counts),
        trace.notes, registry, n_queries=summary.n_queries, bad_lines=bad,
    )  # fmt: skip
    if writer is not None:
        writer.end(report)
    return report


class _JsonWriter:
    """Writes :meth:`ScoreReport.to_dict`'s shape piece by piece: counts and phases, each query as it
    is scored, then the aggregates and notes (JSON readers do not depend on key order)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.first = True

    def _dump(self, value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)

    def start(self, counts: dict[str, int], phases: dict[str, Any]) -> None:
        self.out.write(
            f'{{"counts": {self._dump(counts)},\n "phases": {self._dump(phases)},\n "queries": [\n'
        )

    def query(self, data: dict[str, Any]) -> None:
        self.out.write(("  " if self.first else ",\n  ") + self._dump(data))
        self.first = False

    def end(self, report: ScoreReport) -> None:
        usage = {
            "aggregate": {k: result_dict(v) for k, v in report.aggregate.items()},
            "rhd": {rhd_key(k): v for k, v in report.rhd.items()},
            "signatures": dict(report.signatures),
        }
        self.out.write(f'\n ],\n "usage": {self._dump(usage)},\n "notes": {self._dump(report.notes)}}}\n')


def write_json_report(path: Path, events: str | Path, **options: Any) -> ScoreReport:
    """:func:`score_file` with its JSON report written to ``path`` atomically: into a temporary file
    beside it, renamed over ``path`` only once complete (a failure leaves ``path`` as it was)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            report = score_file(events, json_to=fh, **options)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return report
