"""Statements of a merged relationship: learn per statement, rank by the one a question is about.

Some frameworks keep one relationship per entity pair and merge every statement about the pair
into it (one row, its descriptions or keywords joined): "James Cameron praised Pulp Fiction."
and the planted "James Cameron directed Pulp Fiction." become one row. A score per row would
promote the false statement through the true one: right answers to "Who praised Pulp Fiction?"
raise the row, which then outranks the true director for "Who directed Pulp Fiction?". DESIGN §4
("Credit in the real frameworks") asks for credit per statement; EvoRAG (§4.3) scores triples and
is silent on merged rows.

The rule. A row's *statements* are the sentences of its predicate (split at ``.``, ``;``, line
breaks and ``<SEP>``; a predicate with no full stop is a keyword list, split at commas too), each read as the relation stems it states
(:func:`~triage_plugins.kg.relations.statement_stems`); a row is *merged* when two of them state
different relations. For a question asking about relation stems R, a merged row is learned and
ranked under the key of the statement that shares most stems with R (the first on a tie):
``"<row id>#<its stems, sorted, joined by +>"``. A row that is not merged, or whose statements
share nothing with R, keeps its own id. So feedback on a praised question moves
``CAMERON|PULP FICTION#prais`` and leaves ``CAMERON|PULP FICTION#direct`` — the key a director
question ranks the row by — where it was.

A chunk that states several facts is the same case with the same rule (EvoRAG §6.12 scores chunks):
"Christopher Nolan directed Inception. Inception was released in 2010." promoted for "Who
directed Inception?" would otherwise come first for "When was Inception released?" too. A chunk's
statements are its sentences' lower-case relation words (names are capitalized), and a question's
relation is read the same way (:func:`~triage_plugins.kg.relations.lower_stems`).

The learner knows a row's predicate from the retrievals and graphs it has been sent
(:class:`Statements` remembers them, bounded); a row it has not seen yet is keyed by its id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from triage_plugins.contract.events import Chunk, Triple
from triage_plugins.kg.relations import lower_stems, statement_stems

__all__ = ["SEPARATOR", "Statements", "chunk_statements", "statement_key", "statements"]

#: Between a row id and its statement's stems in a statement key.
SEPARATOR = "#"
_SPLIT = re.compile(r"<SEP>|[.;\n]+")
_KEYWORDS = re.compile(r"<SEP>|[,;\n]+")


def statements(t: Triple) -> tuple[frozenset[str], ...]:
    """The distinct non-empty relation-stem sets of ``t``'s sentences, in order (module docstring)."""
    out: dict[frozenset[str], None] = {}
    split = _SPLIT if "." in t.predicate else _KEYWORDS  # a keyword list: "praised, directed"
    for part in split.split(t.predicate):
        if part.strip():
            stems = statement_stems(part, t.subject, t.object)
            if stems:
                out.setdefault(stems)
    return tuple(out)


def chunk_statements(chunk: Chunk) -> tuple[frozenset[str], ...]:
    """The distinct relation-stem sets of a chunk's sentences (:func:`~triage_plugins.kg.relations.lower_stems`:
    a chunk names no entities, so its names are told by their capitals)."""
    out: dict[frozenset[str], None] = {}
    for part in _SPLIT.split(chunk.text):
        stems = lower_stems(part)
        if stems:
            out.setdefault(stems)
    return tuple(out)


def statement_key(row_id: str, said: Sequence[frozenset[str]], relations: frozenset[str]) -> str:
    """The key a question asking ``relations`` learns and ranks a row by (module docstring)."""
    if len(said) < 2 or not relations:
        return row_id
    best, overlap = None, 0
    for stems in said:
        n = len(stems & relations)
        if n > overlap:
            best, overlap = stems, n
    return row_id if best is None else f"{row_id}{SEPARATOR}{'+'.join(sorted(best))}"


class Statements:
    """The statements of every row seen (bounded: the memo starts afresh past ``limit`` rows)."""

    __slots__ = ("_said", "limit")

    def __init__(self, limit: int = 1 << 18) -> None:
        self._said: dict[str, tuple[frozenset[str], ...]] = {}
        self.limit = limit

    def see(self, units: Iterable[Triple | Chunk]) -> None:
        """Remember the statements of ``units`` (a retrieval's triples or chunks)."""
        said = self._said
        for u in units:
            if u.id not in said:
                if len(said) >= self.limit:
                    said.clear()
                said[u.id] = statements(u) if isinstance(u, Triple) else chunk_statements(u)

    def keys(self, ids: Sequence[str], relations: frozenset[str]) -> list[str]:
        """The key of each row id for a question asking ``relations`` (its id when not merged or unseen)."""
        said = self._said
        if not relations:
            return list(ids)
        return [statement_key(i, said.get(i, ()), relations) for i in ids]
