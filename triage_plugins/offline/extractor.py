"""A rule-based extractor: reads the synthetic world's sentences back into triples (DESIGN §5).

Each sentence is matched against the verbalization templates of
:mod:`triage_plugins.offline.templates` (the regular expressions are derived from the very patterns
the generator renders), so everything the generator wrote is read back; a sentence of no world
template is tried as a KB fact (``"The place of birth of X is Y."``, the sentences of a KB-derived
corpus such as ``triage compare --corpus pq-2h``). Surface forms are kept as
written: an alias stays an alias ("Chris Nolan"), because canonicalization is a later stage whose
quality TRIAGE measures. Outdated sentences ("formerly worked for X") are read as the same predicate
with ``qualifier="former"``, so the conflict with the current fact reaches the graph, as it does with
an LLM extractor.

A rule-based extractor has no token log-probabilities: every :class:`ExtractedTriple` carries
``token_logprobs=None``, and TCS is N/A for it (TRIAGE §4.1, DESIGN §5).
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass

from triage_plugins.contract.events import Chunk, ExtractedTriple, ExtractionEvent, Triple
from triage_plugins.offline.templates import KB_ENTITY_TYPE, TEMPLATES, Template, match_kb_fact

__all__ = [
    "MODEL_NAME",
    "Record",
    "extract_chunk",
    "extract_records",
    "extraction_event",
    "split_sentences",
]

log = logging.getLogger("triage.offline.extractor")

MODEL_NAME = "triage-offline-rules"

_SENTENCE = re.compile(r"[^\s.!?][^.!?]*[.!?]")


@dataclass(frozen=True, slots=True)
class Record:
    """One relation read from text: the "scripted-LLM core" output that adapters format.

    :param evidence: the sentence the relation was read from.
    :param description: a one-sentence description of the relation (the evidence sentence).
    :param start: offset of the evidence in the text given to :func:`extract_records`.
    :param end: end offset (exclusive) of the evidence.
    :param qualifier: ``"former"`` when the sentence states a former value, else ``None``.
    """

    subject: str
    subject_type: str
    predicate: str
    object: str
    object_type: str
    evidence: str
    description: str
    start: int
    end: int
    qualifier: str | None = None

    def triple(self) -> Triple:
        """The record as a :class:`~triage_plugins.contract.events.Triple` (id ``"s|p|o"``, with types)."""
        return Triple.of(
            self.subject,
            self.predicate,
            self.object,
            subject_type=self.subject_type,
            object_type=self.object_type,
        )


def split_sentences(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, sentence)`` for each sentence of ``text`` (names in the world hold no periods)."""
    return [(m.start(), m.end(), m.group()) for m in _SENTENCE.finditer(text)]


def _match(sentence: str) -> tuple[Template, str, str] | None:
    for template in TEMPLATES:
        found = template.match(sentence)
        if found is not None:
            return template, found[0], found[1]
    fact = match_kb_fact(sentence)  # "The <relation> of <S> is <O>." (a KB-derived corpus)
    if fact is not None:
        subject, predicate, obj = fact
        return _kb_template(predicate), subject, obj
    return None


@functools.lru_cache(maxsize=1024)
def _kb_template(predicate: str) -> Template:
    return Template(predicate, "The {p} of {s} is {o}.", KB_ENTITY_TYPE, KB_ENTITY_TYPE)


def extract_records(text: str) -> list[Record]:
    """Every relation stated in ``text``, in text order; sentences matching no template are skipped."""
    records = []
    for start, end, sentence in split_sentences(text):
        found = _match(sentence)
        if found is None:
            log.debug("no template matches %r", sentence)
            continue
        template, subject, obj = found
        records.append(
            Record(
                subject=subject,
                subject_type=template.subject_type,
                predicate=template.predicate,
                object=obj,
                object_type=template.object_type,
                evidence=sentence,
                description=sentence,
                start=start,
                end=end,
                qualifier="former" if template.kind == "outdated" else None,
            )
        )
    return records


def extract_chunk(chunk: Chunk) -> list[ExtractedTriple]:
    """The triples of one chunk with their evidence sentences and no log-probabilities."""
    return [ExtractedTriple(r.triple(), None, r.evidence) for r in extract_records(chunk.text)]


def extraction_event(
    chunk: Chunk, run_id: str, *, framework: str = "offline", model: str = MODEL_NAME
) -> ExtractionEvent:
    """The :class:`~triage_plugins.contract.events.ExtractionEvent` of one extraction run over ``chunk``.

    The extractor is deterministic, so ``temperature`` is 0.
    """
    return ExtractionEvent(framework, run_id, chunk, tuple(extract_chunk(chunk)), model, 0.0)
