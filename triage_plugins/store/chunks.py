"""Large JSON texts stored as content-defined chunks: a graph snapshot stored as a delta (issue #34).

A graph event repeats the whole graph, and the next one differs from it by a few documents' triples.
:func:`split_text` cuts a long text into chunks whose boundaries depend only on the bytes around
them (content-defined chunking, as in LBFS or restic): a boundary falls after a ``", "`` (between two
items of a JSON list or object) whose preceding :data:`WINDOW` bytes hash to 0 modulo
:data:`SPACING`. An insertion moves only the boundaries near it, so two snapshots share all chunks
but the few around the changes. Each chunk is a part keyed like the retrieval events' triples
(BLAKE2b-128 of its UTF-8 bytes, :func:`~triage_plugins.contract.events.split_json`), and the text
becomes a skeleton naming them, joined back byte for byte by
:func:`~triage_plugins.contract.events.join_json`. A chunk already stored is not stored again: a
1M-triple graph updated by 10 documents adds its changed chunks and one skeleton
(``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

from hashlib import blake2b

import numpy as np

from triage_plugins.contract.events import PART_MARK

__all__ = ["MIN_CHUNK", "SMALL", "SPACING", "WINDOW", "split_text"]

#: Texts shorter than this (bytes) stay whole.
SMALL = 256 * 1024
#: One candidate boundary in this many is a boundary (on average): ~16-32 kB chunks of graph JSON.
SPACING = 1024
#: Bytes before a candidate boundary that decide whether it is one.
WINDOW = 32
#: No chunk is shorter than this (bytes), but the last.
MIN_CHUNK = 4096
_SEPARATOR = (ord(","), ord(" "))
_PRIME = np.uint64(1099511628211)  # FNV-1a's 64-bit prime


def split_text(text: str) -> tuple[str, dict[str, str]]:
    """``(skeleton, {key: chunk})`` of a long text (module docstring); a short text, or one holding
    :data:`~triage_plugins.contract.events.PART_MARK` (never JSON), is returned whole with no chunks."""
    if len(text) < SMALL or PART_MARK in text:
        return text, {}
    data = text.encode("utf-8", "surrogatepass")
    refs: list[str] = []
    chunks: dict[str, str] = {}
    start = 0
    for end in [*_boundaries(data), len(data)]:
        piece = data[start:end]
        key = blake2b(piece, digest_size=16).hexdigest()
        chunks[key] = piece.decode("utf-8", "surrogatepass")  # cut after ASCII: whole characters
        refs.append(f"{PART_MARK}{key}{PART_MARK}")
        start = end
    return "".join(refs), chunks


def _boundaries(data: bytes) -> list[int]:
    """Byte offsets to cut ``data`` at (after a ``", "`` chosen by the hash of the bytes before it),
    increasing, at least :data:`MIN_CHUNK` apart and from both ends."""
    raw = np.frombuffer(data, dtype=np.uint8)
    after = np.flatnonzero((raw[:-1] == _SEPARATOR[0]) & (raw[1:] == _SEPARATOR[1])) + 2
    after = after[(after >= WINDOW) & (after <= len(data) - MIN_CHUNK)]
    digest = np.zeros(len(after), dtype=np.uint64)
    for back in range(1, WINDOW + 1):
        digest = (digest ^ raw[after - back].astype(np.uint64)) * _PRIME  # wraps modulo 2**64
    chosen = after[(digest >> np.uint64(32)) % np.uint64(SPACING) == 0]
    out: list[int] = []
    last = 0
    for cut in chosen.tolist():
        if cut - last >= MIN_CHUNK:
            out.append(cut)
            last = cut
    return out
