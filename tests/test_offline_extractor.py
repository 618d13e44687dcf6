"""The rule-based extractor and the framework-neutral scripted LLM (DESIGN §5).

Each framework's own prompt format lives in its adapter and is checked in ``test_offline_formats.py``.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from triage_plugins.contract.events import Chunk, ExtractionEvent
from triage_plugins.offline.extractor import (
    MODEL_NAME,
    Record,
    extract_chunk,
    extract_records,
    extraction_event,
)
from triage_plugins.offline.llm import ScriptedLLM, entity_rows, find_chunk_text
from triage_plugins.offline.world import NoiseConfig, generate_world

TEXT = (
    "The Glass Orchard was directed by Chris Nolan. It rained all week. Chris Nolan was born in Port Elira."
)
RECORD = Record(
    subject="The Glass Orchard",
    subject_type="Film",
    predicate="directed_by",
    object="Chris Nolan",
    object_type="Person",
    evidence="The Glass Orchard was directed by Chris Nolan.",
    description="The Glass Orchard was directed by Chris Nolan.",
    start=0,
    end=46,
)


def test_extracts_templated_sentences_and_skips_the_rest():
    records = extract_records(TEXT)
    assert records[0] == RECORD
    assert len(records) == 2
    second = records[1]
    assert (second.subject, second.predicate, second.object) == ("Chris Nolan", "born_in", "Port Elira")
    assert (second.subject_type, second.object_type) == ("Person", "City")
    assert TEXT[second.start : second.end] == "Chris Nolan was born in Port Elira."


def test_round_trip_everything_verbalized_is_extracted():
    world = generate_world(
        11, noise=NoiseConfig(aliases=10, dangling=5, outdated=5, irrelevant=5, duplicates=5)
    )
    stated = defaultdict(list)
    for s in world.statements:
        stated[s.chunk_id].append((s.subject, s.predicate, s.object, s.subject_type, s.object_type))
    chunks = world.chunks()
    for chunk in chunks:
        got = [
            (r.subject, r.predicate, r.object, r.subject_type, r.object_type)
            for r in extract_records(chunk.text)
        ]
        assert got == stated[chunk.id], chunk.id
    total = sum(len(extract_records(c.text)) for c in chunks)
    assert total == len(world.statements) == len(world.triples) + 5 + 5 + 5 + 5


def test_aliases_are_kept_as_written_and_outdated_facts_are_marked():
    world = generate_world(3, noise=NoiseConfig(aliases=6, outdated=3))
    texts = {c.id: c.text for c in world.chunks()}
    for record in world.noise_log:
        found = [r for r in extract_records(texts[record.chunk_id]) if r.evidence == record.text]
        assert len(found) == 1
        r = found[0]
        if record.kind == "alias":
            assert record.surface in (r.subject, r.object)
            assert record.entity not in (r.subject, r.object)  # not canonicalized
        elif record.kind == "outdated":
            assert r.qualifier == "former"
            assert r.predicate in world.relations
        else:
            assert r.qualifier is None


def test_extracted_triples_have_evidence_and_no_invented_logprobs():
    chunk = Chunk("d#p0", "d", TEXT, {"paragraph": 0})
    triples = extract_chunk(chunk)
    assert [t.triple.id for t in triples] == [
        "The Glass Orchard|directed_by|Chris Nolan",
        "Chris Nolan|born_in|Port Elira",
    ]
    assert all(t.token_logprobs is None for t in triples)
    assert [t.evidence for t in triples] == [
        "The Glass Orchard was directed by Chris Nolan.",
        "Chris Nolan was born in Port Elira.",
    ]
    event = extraction_event(chunk, "run-1")
    assert isinstance(event, ExtractionEvent)
    assert (event.run_id, event.model, event.temperature, event.chunk) == ("run-1", MODEL_NAME, 0.0, chunk)
    assert event.triples == tuple(triples)


MARKER = re.compile(r"<input>\n(.*?)\n</input>", re.DOTALL)


def _pipes(records) -> str:
    return "\n".join(f"{r.subject}|{r.predicate}|{r.object}" for r in records)


def test_entity_rows_are_distinct_in_first_mention_order_with_their_sentences():
    records = extract_records(TEXT)
    assert entity_rows(records) == [
        ("The Glass Orchard", "Film", "The Glass Orchard (Film). The Glass Orchard was directed by Chris Nolan."),
        (
            "Chris Nolan",
            "Person",
            "Chris Nolan (Person). The Glass Orchard was directed by Chris Nolan. "
            "Chris Nolan was born in Port Elira.",
        ),
        ("Port Elira", "City", "Port Elira (City). Chris Nolan was born in Port Elira."),
    ]
    assert entity_rows([]) == []


def test_find_chunk_text_prefers_the_last_marker_match_then_known_chunks():
    known = [Chunk("a", "d", "Alpha Beta works for Gamma Labs."), "Delta Epsilon was born in Ashford."]
    marked = "example:\n<input>\nan example\n</input>\nreal:\n<input>\n Alpha Beta works for Gamma Labs. \n</input>"
    assert find_chunk_text(marked, known, [MARKER]) == "Alpha Beta works for Gamma Labs."  # the known text
    assert find_chunk_text(marked, (), [MARKER]) == "Alpha Beta works for Gamma Labs."  # the region, stripped
    no_marker = "Please read: Delta Epsilon was born in Ashford. Thanks"
    assert find_chunk_text(no_marker, known, [MARKER]) == "Delta Epsilon was born in Ashford."
    assert find_chunk_text(marked, known) == "Alpha Beta works for Gamma Labs."  # no marker: contained chunk
    assert find_chunk_text("nothing here", known, [MARKER]) is None


def test_scripted_llm_answers_from_the_chunk_in_the_prompt_only():
    llm = ScriptedLLM(formatter=_pipes, markers=[MARKER])
    prompt = "Example:\n<input>\nZed Quill was born in Ashford.\n</input>\nZed Quill|born_in|Ashford\n"
    prompt += "<input>\nAnn Lee works for Bluestone Labs.\n</input>\n"
    assert llm.complete(prompt) == "Ann Lee|works_for|Bluestone Labs"
    assert llm.complete("no input text at all") == ""
    assert llm.calls == 2
    with pytest.raises(TypeError, match="formatter"):
        ScriptedLLM().complete(prompt)
