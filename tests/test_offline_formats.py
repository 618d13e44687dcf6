"""Each adapter's extraction format for the core's scripted LLM, read back by the framework's parser.

The formats live in the adapters (``triage_lightrag.offline``, ``triage_graphrag.offline``,
``triage_llamaindex.offline``); the parser checks use the installed parsers of lightrag-hku 1.5.7
(``lightrag.operate._process_extraction_result``, private), graphrag 3.3.0
(``GraphExtractor._process_result``, private) and llama-index-core 0.14
(``default_parse_triplets_fn``, public); each is skipped when its framework is not installed.
"""

from __future__ import annotations

import asyncio

import pytest

from triage_graphrag.offline import format_graphrag
from triage_lightrag.offline import INPUT_MARKER as LIGHTRAG_MARKER
from triage_lightrag.offline import format_lightrag, scripted_extractor
from triage_plugins.contract.events import Chunk
from triage_plugins.offline.extractor import Record, extract_records
from triage_plugins.offline.llm import ScriptedLLM, find_chunk_text
from triage_plugins.offline.world import generate_world

# (its fields are checked in test_offline_extractor.py)
RECORD = extract_records("The Glass Orchard was directed by Chris Nolan.")[0]


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
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed")
    from triage_llamaindex.offline import format_llamaindex

    odd = Record("Smith, Jr. (II)", "Person", "works_for", "Acme", "Organisation", "e", "e", 0, 1)
    assert (
        format_llamaindex([RECORD, odd])
        == "(The Glass Orchard, directed_by, Chris Nolan)\n(Smith Jr. II, works_for, Acme)"
    )


def test_each_framework_marker_finds_its_input_text():
    known = [Chunk("a", "d", "Alpha Beta works for Gamma Labs."), "Delta Epsilon was born in Ashford."]
    lightrag_like = "---Role---\nexamples...\n---Input Text---\n```\nAlpha Beta works for Gamma Labs.\n```"
    assert find_chunk_text(lightrag_like, known, [LIGHTRAG_MARKER]) == "Alpha Beta works for Gamma Labs."
    assert scripted_extractor().complete("no input text at all") == "<|COMPLETE|>"
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed")
    from triage_llamaindex.offline import INPUT_MARKER, format_llamaindex

    llama_like = "Example:Text: Alice is Bob's mother.\nTriplets:\n(x)\nText: Zed left.\nTriplets:\n"
    assert find_chunk_text(llama_like, (), [INPUT_MARKER]) == "Zed left."
    prompt = "Example:\nText: Zed Quill was born in Ashford.\nTriplets:\n(Zed Quill, born_in, Ashford)\n"
    prompt += "Text: Ann Lee works for Bluestone Labs.\nTriplets:\n"
    llm = ScriptedLLM(formatter=format_llamaindex, markers=[INPUT_MARKER])
    assert llm.complete(prompt) == "(Ann Lee, works_for, Bluestone Labs)"


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
    assert find_chunk_text(prompt, world.chunks(), [LIGHTRAG_MARKER]) == chunk.text
    output = scripted_extractor(c.text for c in world.chunks()).complete(prompt)
    nodes, edges = asyncio.run(_process_extraction_result(output, chunk.id, 0))
    records = extract_records(chunk.text)
    assert set(edges) == {(r.subject, r.object) for r in records}
    assert {e["keywords"] for rel in edges.values() for e in rel} == {r.predicate for r in records}
    assert set(nodes) == {r.subject for r in records} | {r.object for r in records}


def test_llamaindex_parser_reads_the_scripted_output():
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed")
    from llama_index.core.indices.property_graph.utils import default_parse_triplets_fn
    from llama_index.core.prompts.default_prompts import DEFAULT_KG_TRIPLET_EXTRACT_PROMPT

    from triage_llamaindex.offline import INPUT_MARKER, format_llamaindex

    world = generate_world(0)
    chunk = world.chunks()[2]
    prompt = DEFAULT_KG_TRIPLET_EXTRACT_PROMPT.format(max_knowledge_triplets=20, text=chunk.text)
    assert find_chunk_text(prompt, (), [INPUT_MARKER]) == chunk.text
    parsed = default_parse_triplets_fn(
        ScriptedLLM(formatter=format_llamaindex, markers=[INPUT_MARKER]).complete(prompt)
    )
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

    from triage_graphrag.offline import extraction_answer

    world = generate_world(0)
    chunk = world.chunks()[2]
    prompt = GRAPH_EXTRACTION_PROMPT.format(entity_types="person,film", input_text=chunk.text)
    assert find_chunk_text(prompt, world.chunks()) == chunk.text
    extractor = GraphExtractor.__new__(GraphExtractor)
    output = ScriptedLLM(world.chunks(), formatter=format_graphrag).complete(prompt)
    assert output == extraction_answer(chunk.text)
    entities, relationships = extractor._process_result(output, chunk.id, "<|>", "##")
    records = extract_records(chunk.text)
    assert sorted(relationships["source"]) == sorted(r.subject.upper() for r in records)
    assert [d.split(":")[0] for d in relationships["description"]] == [r.predicate for r in records]
    assert set(entities["title"]) == {r.subject.upper() for r in records} | {
        r.object.upper() for r in records
    }
