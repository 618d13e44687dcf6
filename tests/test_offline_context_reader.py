"""The shared offline reader answers a framework's text context from that context only."""

from __future__ import annotations

from triage_plugins.offline.context_reader import NOTHING_FOUND, answer_from_context, context_triples
from triage_plugins.offline.world import generate_world


def test_reads_arrow_lines_and_tuples():
    context = "Triplets:\nInception -> directed_by -> Christopher Nolan\n(Christopher Nolan, born_in, London)"
    ids = {t.id for t in context_triples(context)}
    assert ids == {"Inception|directed_by|Christopher Nolan", "Christopher Nolan|born_in|London"}
    assert answer_from_context("Who directed Inception?", context) == "Christopher Nolan"
    # two hops through the context, direction from the question's entity
    assert answer_from_context("Where was the director of Inception born?", context) == "London"


def test_reads_sentences_of_the_world_and_cannot_answer_what_is_absent():
    world = generate_world(0)
    stated = {s.fact_id: s.text for s in world.statements if s.kind == "fact"}  # not via an alias
    q = next(q for q in world.questions if q.hops == 1 and q.paths[0][0].id in stated)
    sentences = [stated[q.paths[0][0].id]]
    answer = answer_from_context(q.text, " ".join(sentences))
    assert answer in q.answers
    assert answer_from_context(q.text, "Nothing of use here.") == NOTHING_FOUND
    assert answer_from_context(q.text, "") == NOTHING_FOUND
