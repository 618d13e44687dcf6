"""The synthetic world generator: size, determinism, exact noise, questions (DESIGN §5)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import Chunk, Gold
from triage_plugins.offline.templates import RELATIONS
from triage_plugins.offline.world import NoiseConfig, World, generate_world


def _digest(world: World) -> str:
    blob = json.dumps(
        [
            [d.text for d in world.documents],
            [(q.text, q.answers) for q in world.questions],
            [t.id for t in world.triples],
            [(r.kind, r.statement_id) for r in world.noise_log],
        ]
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _alias_occurrences(world: World) -> Counter[str]:
    """Occurrences of every alias in the corpus once canonical names are blanked out."""
    names = sorted((e.id for e in world.entities), key=len, reverse=True)
    found: Counter[str] = Counter()
    for doc in world.documents:
        text = doc.text
        for name in names:
            text = re.sub(rf"\b{re.escape(name)}\b", "#", text)
        for e in world.entities:
            for alias in e.aliases:
                found[alias] += len(re.findall(rf"\b{re.escape(alias)}\b", text))
    return +found


def test_default_world_is_small():
    # its generation time is measured in benchmarks/bench_core.py
    world = generate_world(0)
    assert 40 <= len(world.entities) <= 80
    assert 120 <= len(world.triples) <= 250
    assert len(world.documents) == 30
    assert len(world.questions) == 60
    assert Counter(q.hops for q in world.questions) == {1: 20, 2: 20, 3: 20}
    assert {e.type for e in world.entities} >= {"Person", "Organisation", "City", "Country", "Film"}


def test_same_seed_same_world_other_seed_other_world():
    assert generate_world(7) == generate_world(7)
    assert _digest(generate_world(7)) == _digest(generate_world(7))
    assert _digest(generate_world(7)) != _digest(generate_world(8))


def test_world_does_not_depend_on_the_hash_seed():
    code = (
        "import hashlib, json\n"
        "from triage_plugins.offline.world import generate_world\n"
        "w = generate_world(3)\n"
        "blob = json.dumps([[d.text for d in w.documents], [(q.text, q.answers) for q in w.questions],"
        " [t.id for t in w.triples], [(r.kind, r.statement_id) for r in w.noise_log]])\n"
        "print(hashlib.sha256(blob.encode()).hexdigest())\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": root}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, check=True
        )
        digests.add(out.stdout.strip())
    assert digests == {_digest(generate_world(3))}


def test_each_noise_knob_injects_exactly_what_is_asked():
    noise = NoiseConfig(aliases=5, dangling=3, outdated=2, irrelevant=4, duplicates=7)
    world = generate_world(1, noise=noise)
    assert Counter(r.kind for r in world.noise_log) == {
        "alias": 5,
        "dangling": 3,
        "outdated": 2,
        "irrelevant": 4,
        "duplicate": 7,
    }
    kinds = Counter(s.kind for s in world.statements)
    assert kinds["fact"] + kinds["alias"] == len(world.triples)  # every fact written once...
    assert kinds["duplicate"] == 7  # ...plus exactly the duplicates
    assert sum(_alias_occurrences(world).values()) == 5


@pytest.mark.parametrize("knob", ["aliases", "dangling", "outdated", "irrelevant", "duplicates"])
def test_a_knob_at_zero_injects_none_of_that_noise(knob):
    world = generate_world(2, noise=NoiseConfig(**{knob: 0}))
    kind = {"aliases": "alias", "duplicates": "duplicate"}.get(knob, knob)
    assert not [r for r in world.noise_log if r.kind == kind]
    assert not [s for s in world.statements if s.kind == kind]
    if knob == "aliases":
        assert _alias_occurrences(world) == Counter()


def test_clean_world_states_each_fact_exactly_once():
    world = generate_world(4, noise=NoiseConfig.clean())
    assert world.noise_log == ()
    stated = Counter(s.fact_id for s in world.statements)
    assert {s.kind for s in world.statements} == {"fact"}
    assert stated == Counter(t.id for t in world.triples)


def test_noise_log_says_what_was_injected_where():
    world = generate_world(
        5, noise=NoiseConfig(aliases=6, dangling=4, outdated=4, irrelevant=4, duplicates=4)
    )
    by_id = {s.id: s for s in world.statements}
    facts = {t.id: t for t in world.triples}
    origin = {s.fact_id: s.doc_id for s in world.statements if s.kind in ("fact", "alias")}
    for record in world.noise_log:
        stmt = by_id[record.statement_id]
        assert (stmt.doc_id, stmt.paragraph, stmt.sentence, stmt.text) == (
            record.doc_id,
            record.paragraph,
            record.sentence,
            record.text,
        )
        assert record.text in world.documents[int(record.doc_id.split("-")[1])].paragraphs[record.paragraph]
        if record.kind == "alias":
            assert record.surface in world.entity(record.entity).aliases
            assert record.surface in (stmt.subject, stmt.object)
            fact = facts[record.fact_id]
            assert record.entity in (fact.subject, fact.object)
        elif record.kind == "outdated":
            current = facts[record.fact_id]
            assert current.predicate == stmt.predicate
            assert stmt.subject in (current.subject, current.object)
            assert stmt.object not in (current.subject, current.object)
            assert "formerly" in stmt.text or "previously" in stmt.text
        elif record.kind == "dangling":
            assert not world.has_entity(record.surface)
            assert stmt.predicate == "knows"
        elif record.kind == "irrelevant":
            assert stmt.predicate in ("hobby", "has_pet")
            assert stmt.predicate not in world.relations
        else:
            assert record.kind == "duplicate"
            assert stmt.doc_id != origin[record.fact_id]
            fact = facts[record.fact_id]
            assert (stmt.subject, stmt.predicate, stmt.object) == (fact.subject, fact.predicate, fact.object)


def test_too_much_noise_is_an_error_not_a_silent_cap():
    with pytest.raises(ConfigError, match="dangling"):
        generate_world(0, noise=NoiseConfig(dangling=10_000))
    with pytest.raises(ConfigError, match="aliases"):
        NoiseConfig(aliases=-1)
    with pytest.raises(ConfigError, match="n_people"):
        generate_world(0, n_people=2)


def test_one_hop_answers_are_exactly_the_neighbours():
    world = generate_world(6)
    one_hop = [q for q in world.questions if q.hops == 1]
    assert one_hop
    for q in one_hop:
        (relation, direction), topic = q.relations[0], q.topic_entities[0]
        if direction == "+":
            expected = {t.object for t in world.triples if t.subject == topic and t.predicate == relation}
        else:
            expected = {t.subject for t in world.triples if t.object == topic and t.predicate == relation}
        assert set(q.answers) == expected


def test_gold_paths_walk_the_asked_relations_from_the_topic_to_an_answer():
    world = generate_world(0)
    triples = set(world.triples)
    for q in world.questions:
        assert q.hops == len(q.relations)
        assert q.paths and q.text.endswith("?")
        assert q.topic_entities[0] in q.text
        ends = set()
        for path in q.paths:
            node = q.topic_entities[0]
            visited = [node]
            assert len(path) == q.hops
            for t, (relation, direction) in zip(path, q.relations, strict=True):
                assert t in triples and t.predicate == relation
                assert (t.subject if direction == "+" else t.object) == node
                node = t.object if direction == "+" else t.subject
                assert node not in visited
                visited.append(node)
            ends.add(node)
        assert ends == set(q.answers)
        assert isinstance(q.gold(), Gold) and q.gold().entities == q.topic_entities


def test_chunks_are_paragraphs_with_locators():
    world = generate_world(0)
    chunks = world.chunks()
    assert len(chunks) == sum(len(d.paragraphs) for d in world.documents)
    assert all(isinstance(c, Chunk) for c in chunks)
    first = chunks[0]
    assert first.id == "doc-000#p0"
    assert first.doc_id == "doc-000"
    assert first.locator == {"paragraph": 0, "section": world.documents[0].title}
    assert first.text == world.documents[0].paragraphs[0]
    assert len({c.id for c in chunks}) == len(chunks)


def test_facts_respect_the_world_ontology():
    world = generate_world(0)
    onto = world.ontology()
    types = {e.id: e.type for e in world.entities}
    per_subject = Counter((t.subject, t.predicate) for t in world.triples)
    for t in world.triples:
        spec = onto.predicates[t.predicate]
        assert onto.is_a(types[t.subject], spec.domain) and t.subject_type == types[t.subject]
        assert onto.is_a(types[t.object], spec.range) and t.object_type == types[t.object]
        if spec.cardinality_limit is not None:
            assert per_subject[(t.subject, t.predicate)] <= spec.cardinality_limit
    assert set(world.relations) == set(RELATIONS)
    aliases = world.aliases()
    assert aliases and all(
        world.entity(canonical).aliases.count(alias) == 1 for alias, canonical in aliases.items()
    )
    assert not [alias for alias in aliases if world.has_entity(alias)]
