"""Knowledge-base files of KGQA benchmarks: loading and walking (DESIGN §2, ``datasets/``).

Two line formats are read, detected per file from its first non-blank line:

- ``tsv``: ``subject \\t relation \\t object`` (PathQuestion ``2H-kb.txt`` / ``3H-kb.txt``);
- ``pipe``: ``subject|relation|object`` (MetaQA ``kb.txt`` and its reconstructed part files,
  which :func:`load_kb` concatenates when given several paths).

Nothing is dropped silently: a malformed line raises :class:`~triage_plugins.contract.errors.DatasetError`
naming the file, the line number and the reason; with ``strict=False`` it is skipped, counted in the
:class:`LoadReport` and logged. Repeated triples are kept once and counted as duplicates.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from triage_plugins.contract.errors import DatasetError
from triage_plugins.contract.events import Triple

__all__ = [
    "KBIndex",
    "LoadReport",
    "Malformed",
    "TripleList",
    "detect_kb_format",
    "iter_kb",
    "load_kb",
]

log = logging.getLogger("triage.datasets.kb")

KBFormat = Literal["tsv", "pipe"]
PathLike = str | Path


@dataclass(frozen=True, slots=True)
class Malformed:
    """A line that could not be read."""

    file: str
    line: int
    reason: str
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}: {self.text[:120]!r}"


@dataclass(slots=True)
class LoadReport:
    """What a loader read: line counts, duplicates and every malformed line (``strict=False``)."""

    files: list[str] = field(default_factory=list)
    lines: int = 0
    blank: int = 0
    loaded: int = 0
    duplicates: int = 0
    malformed: list[Malformed] = field(default_factory=list)

    def __str__(self) -> str:
        text = (
            f"{self.loaded} loaded from {self.lines} lines of {len(self.files)} file(s) "
            f"({self.blank} blank, {self.duplicates} duplicate, {len(self.malformed)} malformed)"
        )
        if self.malformed:
            text += "; first malformed: " + "; ".join(str(m) for m in self.malformed[:3])
        return text


class TripleList(list[Triple]):
    """A list of triples with the :class:`LoadReport` of how it was loaded."""

    report: LoadReport


def _paths(path_or_paths: PathLike | Iterable[PathLike]) -> list[Path]:
    if isinstance(path_or_paths, str | Path):
        return [Path(path_or_paths)]
    paths = [Path(p) for p in path_or_paths]
    if not paths:
        raise DatasetError("no KB file given")
    return paths


def _first_data_line(path: Path) -> tuple[int, str] | None:
    with path.open(encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if raw.strip():
                return number, raw.rstrip("\r\n")
    return None


def detect_kb_format(path: PathLike) -> KBFormat:
    """``"tsv"`` or ``"pipe"``, from the file's first non-blank line."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    first = _first_data_line(path)
    if first is None:
        raise DatasetError(f"{path}: the file is empty")
    number, line = first
    if line.count("\t") == 2:
        return "tsv"
    if "\t" not in line and line.count("|") == 2:
        return "pipe"
    raise DatasetError(
        f"{path}:{number}: cannot tell the KB format: expected 'subject<TAB>relation<TAB>object' "
        f"or 'subject|relation|object', got {line[:120]!r}"
    )


def _parse(line: str, fmt: KBFormat) -> tuple[str, str, str] | str:
    """The three fields, or the reason the line is malformed."""
    sep = "\t" if fmt == "tsv" else "|"
    fields = [f.strip() for f in line.split(sep)]
    if len(fields) != 3:
        name = "tab" if fmt == "tsv" else "'|'"
        return f"expected 3 {name}-separated fields, got {len(fields)}"
    for name, value in zip(("subject", "relation", "object"), fields, strict=True):
        if not value:
            return f"empty {name}"
    return fields[0], fields[1], fields[2]


def iter_kb(
    path_or_paths: PathLike | Iterable[PathLike],
    *,
    strict: bool = True,
    report: LoadReport | None = None,
    format: KBFormat | None = None,
) -> Iterator[Triple]:
    """Stream the triples of one or more KB files (in file order, duplicates included).

    :param strict: raise on the first malformed line (default); otherwise skip and count it in
        ``report``.
    :param report: filled in while iterating (lines, blanks, malformed lines).
    :param format: ``"tsv"`` or ``"pipe"``; detected per file when ``None``.
    """
    report = report if report is not None else LoadReport()
    for path in _paths(path_or_paths):
        fmt = format or detect_kb_format(path)
        report.files.append(str(path))
        with path.open(encoding="utf-8") as handle:
            for number, raw in enumerate(handle, start=1):
                report.lines += 1
                line = raw.rstrip("\r\n")
                if not line.strip():
                    report.blank += 1
                    continue
                parsed = _parse(line, fmt)
                if isinstance(parsed, str):
                    bad = Malformed(str(path), number, parsed, line)
                    if strict:
                        raise DatasetError(str(bad))
                    report.malformed.append(bad)
                    continue
                s, r, o = parsed
                yield Triple(f"{s}|{r}|{o}", s, r, o)


def load_kb(
    path_or_paths: PathLike | Iterable[PathLike],
    *,
    strict: bool = True,
    format: KBFormat | None = None,
) -> TripleList:
    """All distinct triples of one or more KB files; ``.report`` tells what was read.

    Triple ids are ``"subject|relation|object"`` (as :meth:`Triple.of` makes them).
    """
    report = LoadReport()
    out = TripleList()
    seen: set[str] = set()
    for triple in iter_kb(path_or_paths, strict=strict, report=report, format=format):
        if triple.id in seen:
            report.duplicates += 1
            continue
        seen.add(triple.id)
        out.append(triple)
    report.loaded = len(out)
    out.report = report
    if report.malformed:
        log.warning("KB loaded with malformed lines skipped: %s", report)
    elif report.duplicates:
        log.info("KB: %s", report)
    return out


class KBIndex:
    """Adjacency of a KB for walking relation paths in either direction.

    A step ``(relation, "+")`` follows a triple from its subject to its object, ``"-"`` from its
    object to its subject (the MetaQA annotation convention).
    """

    def __init__(self, triples: Iterable[Triple]) -> None:
        self.out: dict[str, list[Triple]] = {}
        self.inc: dict[str, list[Triple]] = {}
        self.triples: dict[str, Triple] = {}
        for t in triples:
            self.triples[t.id] = t
            self.out.setdefault(t.subject, []).append(t)
            self.inc.setdefault(t.object, []).append(t)

    def __contains__(self, triple_id: object) -> bool:
        return triple_id in self.triples

    def has_node(self, node: str) -> bool:
        return node in self.out or node in self.inc

    def steps(self, node: str, *, directed: bool = True) -> Iterator[tuple[Triple, str, str]]:
        """``(triple, direction, next node)`` for each triple at ``node`` (outgoing only if ``directed``)."""
        for t in self.out.get(node, ()):
            yield t, "+", t.object
        if not directed:
            for t in self.inc.get(node, ()):
                yield t, "-", t.subject

    def walk(
        self,
        start: str,
        relation_path: Sequence[tuple[str, str]],
        *,
        exclude_visited: bool = True,
        limit: int | None = None,
    ) -> list[tuple[Triple, ...]]:
        """Every path from ``start`` following ``relation_path`` (``[(relation, "+"|"-")]``).

        :param exclude_visited: never step back onto a node already on the path (MetaQA's answers
            exclude the topic entity at every hop).
        :param limit: stop after this many paths.
        """
        frontier: list[tuple[tuple[Triple, ...], tuple[str, ...]]] = [((), (start,))]
        for relation, direction in relation_path:
            grown = []
            for path, nodes in frontier:
                here = nodes[-1]
                if direction == "+":
                    options = [(t, t.object) for t in self.out.get(here, ()) if t.predicate == relation]
                else:
                    options = [(t, t.subject) for t in self.inc.get(here, ()) if t.predicate == relation]
                for t, nxt in options:
                    if exclude_visited and nxt in nodes:
                        continue
                    grown.append(((*path, t), (*nodes, nxt)))
            frontier = grown
        paths = [path for path, _ in frontier]
        return paths if limit is None else paths[:limit]

    def paths_from(
        self, start: str, max_hops: int, *, directed: bool = True, limit: int = 10_000
    ) -> list[tuple[Triple, ...]]:
        """Every simple path of 1..``max_hops`` triples from ``start`` (at most ``limit``)."""
        out: list[tuple[Triple, ...]] = []
        frontier: list[tuple[tuple[Triple, ...], tuple[str, ...]]] = [((), (start,))]
        for _ in range(max_hops):
            grown = []
            for path, nodes in frontier:
                for t, _, nxt in self.steps(nodes[-1], directed=directed):
                    if nxt in nodes:
                        continue
                    grown.append(((*path, t), (*nodes, nxt)))
                    out.append((*path, t))
                    if len(out) >= limit:
                        return out
            frontier = grown
        return out
