"""``triage export STORE --jsonl OUT``: a store's events as the JSON lines ``triage score`` reads.

The store is opened read-only and its events are written one by one as they are read (the store pages
them), so memory does not grow with the store. The output goes to a temporary file beside ``OUT``,
renamed over it only once complete: an interrupted export leaves ``OUT`` as it was.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from triage_plugins.contract.errors import StoreError
from triage_plugins.contract.events import EVENT_TYPES, Event
from triage_plugins.store import open_store

__all__ = ["ExportResult", "export_events", "write_jsonl"]


@dataclass(slots=True)
class ExportResult:
    """What was written: where, how many events, and how many of each kind."""

    path: Path
    events: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


def write_jsonl(events: Iterable[Event], out: Path) -> ExportResult:
    """Write ``events`` to ``out`` one JSON line each (:meth:`Event.to_json`), atomically."""
    result = ExportResult(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            for event in events:
                fh.write(event.to_json())
                fh.write("\n")
                result.events += 1
                result.kinds[event.kind] = result.kinds.get(event.kind, 0) + 1
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return result


def export_events(
    store: str | os.PathLike[str], out: Path, *, run_id: str | None = None, kind: str | None = None
) -> ExportResult:
    """Export the events of ``store`` (all, or one run's, or one kind's) to the JSON-lines file ``out``.

    :raises StoreError: the store cannot be opened, the kind is unknown or the run is not in the store.
    :raises OSError: ``out`` cannot be written (``out`` is then unchanged).
    """
    if kind is not None and kind not in EVENT_TYPES:
        raise StoreError(f"unknown event kind {kind!r}; expected one of {', '.join(EVENT_TYPES)}")
    with open_store(store, readonly=True) as opened:
        if run_id is not None and run_id not in {r.id for r in opened.runs()}:
            raise StoreError(f"run {run_id!r} is not in {store} (see `triage store info {store}`)")
        return write_jsonl(opened.events(kind, run_id), out)
