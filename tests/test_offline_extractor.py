"""The rule-based extractor and the scripted-LLM formatters (DESIGN §5).

The framework checks parse the formatted records with the installed parsers of lightrag-hku 1.5.7
(``lightrag.operate._process_extraction_result``, private), graphrag 3.3.0
(``GraphExtractor._process_result``, private) and llama-index-core 0.14
(``default_parse_triplets_fn``, public); each is skipped when its framework is not installed.
"""

from __future__ import annotations

import asyncio
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
from triage_plugins.offline.llm import (
    ScriptedLLM,
    find_chunk_text,
    format_graphrag,
    format_lightrag,
    format_llamaindex,
)
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


def test_lightrag_format():
    assert format_lightrag([RECORD]) == (
        "entity<|#|>The Glass Orchard<|#|>Film<|#|>The Glass Orchard (Film). "
        "The Glass Orchard was directed by Chris Nolan.\n"
        "entity<|#|>Chris Nolan<|#|>Person<|#|>Chris Nolan (Person). The Glass Orchard was directed by Chris Nolan.\n"
        "relation<|#|>The Glass Orchard<|#|>Chris Nolan<|#|>directed_by<|#|>"
        "The Glass Orchard was directed by Chris Nolan.\n"
        "<|COMPLETE|>"
    )
    assert format_lightrag([]) == "<|COMPLETE|>"


def test_graphrag_format():
    assert format_graphrag([RECORD]) == (
        '("entity"<|>The Glass Orchard<|>Film<|>The Glass Orchard (Film). '
        "The Glass Orchard was directed by Chris Nolan.)\n##\n"
        '("entity"<|>Chris Nolan<|>Person<|>Chris Nolan (Person). The Glass Orchard was directed by Chris Nolan.)\n##\n'
        '("relationship"<|>The Glass Orchard<|>Chris Nolan<|>directed_by: '
        "The Glass Orchard was directed by Chris Nolan.<|>1)\n"
        "<|COMPLETE|>"
    )


def test_llamaindex_format_keeps_commas_and_parentheses_out_of_fields():
    odd = Record("Smith, Jr. (II)", "Person", "works_for", "Acme", "Organisation", "e", "e", 0, 1)
    assert (
        format_llamaindex([RECORD, odd])
        == "(The Glass Orchard, directed_by, Chris Nolan)\n(Smith Jr. II, works_for, Acme)"
    )


def test_find_chunk_text_prefers_the_framework_input_marker():
    known = [Chunk("a", "d", "Alpha Beta works for Gamma Labs."), "Delta Epsilon was born in Ashford."]
    lightrag_like = "---Role---\nexamples...\n---Input Text---\n```\nAlpha Beta works for Gamma Labs.\n```"
    assert find_chunk_text(lightrag_like, known) == "Alpha Beta works for Gamma Labs."
    graphrag_like = (
        "Text: an example text\n######################\nOutput:\n"
        "-Real Data-\n######################\nEntity_types: person\nText: Something new.\n"
        "######################\nOutput:"
    )
    assert find_chunk_text(graphrag_like) == "Something new."
    llama_like = "Example:Text: Alice is Bob's mother.\nTriplets:\n(x)\nText: Zed left.\nTriplets:\n"
    assert find_chunk_text(llama_like) == "Zed left."
    no_marker = "Please read: Delta Epsilon was born in Ashford. Thanks"
    assert find_chunk_text(no_marker, known) == "Delta Epsilon was born in Ashford."
    assert find_chunk_text("nothing here", known) is None


def test_scripted_llm_answers_from_the_chunk_in_the_prompt_only():
    llm = ScriptedLLM()
    prompt = "Example:\nText: Zed Quill was born in Ashford.\nTriplets:\n(Zed Quill, born_in, Ashford)\n"
    prompt += "Text: Ann Lee works for Bluestone Labs.\nTriplets:\n"
    assert llm.llamaindex(prompt) == "(Ann Lee, works_for, Bluestone Labs)"
    assert llm.lightrag("no input text at all") == "<|COMPLETE|>"
    assert llm.calls == 2


def test_lightrag_parser_reads_the_scripted_output():
    pytest.importorskip("lightrag", reason="lightrag-hku is not installed")
    from lightrag.operate import _process_extraction_result
    from lightrag.prompt import PROMPTS

    world = generate_world(0)
    chunk = max(world.chunks(), key=lambda c: len(extract_records(c.text)))
    prompt = PROMPTS["entity_extraction_user_prompt"].format(
        max_total_records=40,
        max_entity_records=20,
        completion_delimiter="<|COMPLETE|>",
        language="English",
        heading_context_block="",
        input_text=chunk.text,
    )
    assert find_chunk_text(prompt, world.chunks()) == chunk.text
    output = ScriptedLLM(world.chunks()).lightrag(prompt)
    nodes, edges = asyncio.run(_process_extraction_result(output, chunk.id, 0))
    records = extract_records(chunk.text)
    assert set(edges) == {(r.subject, r.object) for r in records}
    assert {e["keywords"] for rel in edges.values() for e in rel} == {r.predicate for r in records}
    assert set(nodes) == {r.subject for r in records} | {r.object for r in records}


def test_llamaindex_parser_reads_the_scripted_output():
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed")
    from llama_index.core.indices.property_graph.utils import default_parse_triplets_fn
    from llama_index.core.prompts.default_prompts import DEFAULT_KG_TRIPLET_EXTRACT_PROMPT

    world = generate_world(0)
    chunk = world.chunks()[2]
    prompt = DEFAULT_KG_TRIPLET_EXTRACT_PROMPT.format(max_knowledge_triplets=20, text=chunk.text)
    assert find_chunk_text(prompt) == chunk.text
    parsed = default_parse_triplets_fn(ScriptedLLM().llamaindex(prompt))
    # LlamaIndex capitalizes each field (first letter up, the rest lower).
    expected = [
        (r.subject.capitalize(), r.predicate.capitalize(), r.object.capitalize())
        for r in extract_records(chunk.text)
    ]
    assert parsed == expected and parsed


@pytest.mark.slow
def test_graphrag_parser_reads_the_scripted_output(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    pytest.importorskip("graphrag", reason="graphrag is not installed")
    from graphrag.index.operations.extract_graph.graph_extractor import GraphExtractor
    from graphrag.prompts.index.extract_graph import GRAPH_EXTRACTION_PROMPT

    world = generate_world(0)
    chunk = world.chunks()[2]
    prompt = GRAPH_EXTRACTION_PROMPT.format(entity_types="person,film", input_text=chunk.text)
    assert find_chunk_text(prompt) == chunk.text
    extractor = GraphExtractor.__new__(GraphExtractor)
    entities, relationships = extractor._process_result(ScriptedLLM().graphrag(prompt), chunk.id, "<|>", "##")
    records = extract_records(chunk.text)
    assert sorted(relationships["source"]) == sorted(r.subject.upper() for r in records)
    assert [d.split(":")[0] for d in relationships["description"]] == [r.predicate for r in records]
    assert set(entities["title"]) == {r.subject.upper() for r in records} | {
        r.object.upper() for r in records
    }
