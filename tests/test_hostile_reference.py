"""A hostile plugin (raise, SystemExit, garbage, endless iterators, sleeping sync hooks) leaves the
reference pipeline answering exactly as with the default plugins alone, learning included, and
every failure is counted (issue #14). The three adapters have the same suite in their test files."""

from __future__ import annotations

import pytest

from triage_plugins.adapter_kit.hostile import MODES, failures_of, hostile_manager
from triage_plugins.contract.events import Gold
from triage_plugins.offline.extractor import extract_chunk
from triage_plugins.offline.world import generate_world
from triage_plugins.reference.pipeline import ReferencePipeline

WORLD = generate_world(2, n_documents=30, n_questions=24)
OPTIONS = {"gate.mode": "reroute"}  # the default gate acts, so a bad gate answer would show


def _run(mode: str | None) -> tuple[list[tuple], object, object]:
    """Answers of two retrievers over two rounds with gold feedback (reweighting on) in between."""
    manager, hostile = hostile_manager(mode, reweight=True, options=OPTIONS)
    answers: list[tuple] = []
    try:
        pipeline = ReferencePipeline(manager)
        pipeline.index_chunks(WORLD.chunks(), extract_chunk, ontology=WORLD.ontology())
        for round_ in range(2):
            for retriever in ("extracted-entity", "path"):
                for q in WORLD.questions:
                    a = pipeline.ask(
                        q.text, retriever=retriever, query_id=f"{round_}-{retriever}-{q.id}",
                        gold=Gold(q.answers, (), q.topic_entities),
                    )  # fmt: skip
                    answers.append(
                        (a.query_id, a.text, a.entity, a.decision.action, a.retrieval.subgraph.triple_ids)
                    )
                    pipeline.feedback(
                        a.query_id, 1.0 if a.entity in q.answers or a.text in q.answers else 0.0
                    )
            assert manager.flush(timeout=30)
        learned = manager.learned_scores("triple")
    finally:
        left = manager.close(timeout=10)
    assert left == 0
    return answers, learned, (manager, hostile)


@pytest.fixture(scope="module")
def baseline():
    return _run(None)


@pytest.mark.parametrize("mode", MODES)
def test_a_hostile_plugin_changes_no_reference_answer_and_is_counted(baseline, mode):
    answers, learned, (manager, hostile) = _run(mode)
    plain_answers, plain_learned, _ = baseline
    assert answers == plain_answers
    assert learned == plain_learned and learned  # feedback learned the same scores
    assert hostile.calls  # it was asked
    assert failures_of(manager) > 0
    assert manager.dropped == 0
