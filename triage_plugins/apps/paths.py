"""Up-front checks of the paths a command reads and writes, so a mistake is said before long work.

Each check raises :class:`~triage_plugins.contract.errors.TriageError` with a one-line message the CLI
prints as ``error: ...``.

Outputs never clobber inputs (:func:`check_outputs`): an output that resolves to one of the command's
inputs (its store with the store's ``-wal``/``-shm``/``-journal`` files, its question file, KB...) or to
another of its outputs is refused, ``--force`` or not; an existing file is replaced without ``--force``
only when it is empty or a previous output of the same kind (:class:`OutputKind`): an HTML report
carrying :data:`HTML_MARKER`, a JSON object that starts with the two keys this command writes first.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from triage_plugins.contract.errors import TriageError
from triage_plugins.report.html import HTML_MARKER

__all__ = [
    "HTML_MARKER",
    "HTML_REPORT",
    "JSON_OUTPUTS",
    "NEW_FILE_ONLY",
    "OutputKind",
    "check_input_file",
    "check_output_file",
    "check_outputs",
    "is_store_url",
    "json_output",
    "store_file",
]


HEAD_BYTES = 64 * 1024
"""How much of an existing file is read to recognise a previous output."""

#: The head of the reports written before :data:`HTML_MARKER` existed (``<title>triage report`` or
#: ``triage compare``), still recognised so that re-running a command over its old report works.
_LEGACY_HTML = re.compile(
    r'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" [^<]*'
    r"<meta http-equiv=\"Content-Security-Policy\" [^<]*<title>triage (report|compare)</title>"
)


@dataclass(frozen=True, slots=True)
class OutputKind:
    """What a command writes to an output, to tell a previous output of the same kind from a file
    the command did not create (which only ``--force`` replaces)."""

    #: What the file would have to be, in an error: "an HTML report written by triage" ("": any
    #: existing file needs ``--force``).
    name: str
    #: Whether the first :data:`HEAD_BYTES` bytes of an existing file are a previous output.
    recognise: Callable[[bytes], bool]


def _is_triage_html(head: bytes) -> bool:
    text = head[:4096].decode("utf-8", errors="replace")
    if text.startswith("<!DOCTYPE html>") and HTML_MARKER in text:
        return True
    return _LEGACY_HTML.match(text) is not None


def _first_keys(head: bytes, n: int = 2) -> tuple[str, ...] | None:
    """The first ``n`` keys of the JSON object the text ``head`` starts with (``None`` when it is not
    one, or its first values do not fit in the head)."""
    text = head.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    ws = re.compile(r"\s*")
    i = ws.match(text, 0).end()  # type: ignore[union-attr]
    if not text.startswith("{", i):
        return None
    keys: list[str] = []
    i += 1
    try:
        while len(keys) < n:
            i = ws.match(text, i).end()  # type: ignore[union-attr]
            if keys:
                if not text.startswith(",", i):
                    return None
                i = ws.match(text, i + 1).end()  # type: ignore[union-attr]
            key, i = decoder.raw_decode(text, i)
            if not isinstance(key, str):
                return None
            keys.append(key)
            i = ws.match(text, i).end()  # type: ignore[union-attr]
            if not text.startswith(":", i):
                return None
            i = ws.match(text, i + 1).end()  # type: ignore[union-attr]
            if len(keys) < n:
                _, i = decoder.raw_decode(text, i)
    except (json.JSONDecodeError, ValueError):
        return None
    return tuple(keys)


#: The first two keys of each command's JSON output, which is how a previous output is recognised.
JSON_OUTPUTS: dict[str, tuple[str, str]] = {
    "demo": ("seed", "world"),
    "compare": ("corpus", "questions"),
    "score": ("counts", "phases"),
    "calibrate": ("metric", "outcome"),
    "probe": ("kb", "categories"),
    "evolve-bench": ("settings", "data"),
    "schema": ("$schema", "$id"),
}


def json_output(command: str) -> OutputKind:
    """The JSON output of ``command`` (a key of :data:`JSON_OUTPUTS`)."""
    keys = JSON_OUTPUTS[command]
    return OutputKind(f"a JSON file written by triage {command}", lambda head: _first_keys(head) == keys)


HTML_REPORT = OutputKind("an HTML report written by triage", _is_triage_html)
#: An output that never replaces an existing file without ``--force`` (``export --jsonl``).
NEW_FILE_ONLY = OutputKind("", lambda head: False)


def is_store_url(target: str) -> bool:
    """Whether ``target`` is a URL (``postgresql://``, ``sqlite:///``) rather than a file path."""
    return "://" in target


def store_file(target: str | os.PathLike[str]) -> Path | None:
    """The file a store target names: a path, or a ``sqlite:///`` URL's path (``None`` for another URL,
    such as ``postgresql://``, or ``:memory:``)."""
    text = os.fspath(target)
    if text == ":memory:":
        return None
    if not is_store_url(text):
        return Path(text).expanduser()
    scheme, _, rest = text.partition("://")
    if scheme.lower() != "sqlite" or not rest.startswith("/") or rest in ("/", "/:memory:"):
        return None
    return Path(rest[1:].split("?")[0]).expanduser()


def check_input_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` as a :class:`Path` when it is an existing, readable file."""
    p = Path(path)
    if not p.exists():
        raise TriageError(f"no {what} at {p}")
    if p.is_dir():
        raise TriageError(f"{p} is a folder; {what} must be a file")
    if not os.access(p, os.R_OK):
        raise TriageError(f"cannot read {what} {p}: permission denied")
    return p


def check_output_file(path: str | os.PathLike[str], what: str, *, force: bool = True) -> Path:
    """``path`` as a :class:`Path` when a file can be written there.

    :param force: an existing file may be replaced; with ``False`` it is refused (say ``--force``).
    """
    p = Path(path)
    if p.is_dir():
        raise TriageError(f"{what} {p} is a folder; give a file name")
    if p.exists() and not force:
        raise TriageError(f"{what} {p} exists; pass --force to replace it")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise TriageError(f"cannot write {what} {p}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise TriageError(f"cannot write {what} {p}: permission denied")
    return p


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file: the same resolved path (symbolic links followed, the
    files need not exist), or one existing file under two names (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _previous_output(path: Path, kind: OutputKind) -> bool:
    """Whether the existing file ``path`` may be replaced without ``--force``: ``kind`` recognises its
    head as a previous output, or it is empty (nothing is lost; not for :data:`NEW_FILE_ONLY`)."""
    if kind is NEW_FILE_ONLY:
        return False
    try:
        if path.stat().st_size == 0:
            return True
        with open(path, "rb") as fh:
            return kind.recognise(fh.read(HEAD_BYTES))
    except OSError:
        return False


def check_outputs(
    outputs: Mapping[str, tuple[str | os.PathLike[str] | None, OutputKind]],
    inputs: Mapping[str, str | os.PathLike[str] | None] = {},  # noqa: B006 - read only
    *,
    stores: Mapping[str, str | os.PathLike[str] | None] = {},  # noqa: B006 - read only
    force: bool = False,
) -> None:
    """Check, before any work, that writing ``outputs`` replaces nothing it must not.

    :param outputs: ``{what: (path or None, kind)}``, e.g. ``{"--html file": (path, HTML_REPORT)}``.
    :param inputs: ``{what: path}`` of the files the command reads (``None``: not given).
    :param stores: ``{what: store}`` of the stores it reads or writes: a path or URL, whose file and its
        ``-wal``, ``-shm`` and ``-journal`` files count as inputs (another URL is no file).
    :param force: replace an existing file that is not a previous output of its kind. Never an input,
        nor a file another output of the same command names.
    :raises TriageError: an output is a folder, cannot be written, is an input or another output, or
        is an existing file that is not a previous output of its kind (without ``force``).
    """
    read = [(f"{what} {p}", Path(p)) for what, p in inputs.items() if p is not None]
    for what, target in stores.items():
        path = None if target is None else store_file(target)
        if path is not None:
            read.append((f"{what} {path}", path))
            read += [
                (f"the {s} file of {what} {path}", Path(f"{path}{s}")) for s in ("-wal", "-shm", "-journal")
            ]
    written: list[tuple[str, Path]] = []
    for what, (target, kind) in outputs.items():
        if target is None:
            continue
        path = check_output_file(target, what)
        for source_is, source in read:
            if _same_file(path, source):
                raise TriageError(
                    f"{what} {path} is also {source_is}, which this command reads: give another file "
                    "name (--force never replaces an input)"
                )
        for other_what, other in written:
            if _same_file(path, other):
                raise TriageError(f"{other_what} and {what} are the same file {path}: give each its own")
        written.append((what, path))
        if path.exists() and not force and not _previous_output(path, kind):
            what_it_is = f" and is not {kind.name}" if kind.name else ""
            raise TriageError(f"{what} {path} exists{what_it_is}; pass --force to replace it")
