"""A delivery batch's feedback is stepped at the batch's end (issue #34), and learns what learning each
feedback at once learns: the same events and feedback through a synchronous manager and through
background managers of batch size 1, 7 and 256 store bit-identical scores, α and per-query counts,
on a file SQLite store and on PostgreSQL.

The sequence is built to catch a step that reads state left by events after its feedback: feedback on
overlapping triples (multi-hop paths and flat retrievals, gold and answer support), retrievals and
generations of later queries between a query and its feedback, a query id asked again after its
feedback with other triples and answer, feedback over the per-query cap, the framework's S_r
(``triage_rerank``), and a staleness check before every step (``feedback.staleness = 0``), with and
without the host's reranks reading the scores meanwhile (``reweight``). Stepping every feedback of a
batch at its end whole (attribution included) fails it: a query asked again is then credited wrongly.
"""

from __future__ import annotations

import sys

import pytest

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import (
    FeedbackEvent,
    GenerationEvent,
    Gold,
    Path,
    RerankRequest,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.plugins.feedback import PER_QUERY
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import open_store

ALPHA = "evorag.triple.alpha"
MODES = (None, 1, 7, 256)  # None: a synchronous manager; else the background worker's batch size


def _triple(k: int) -> Triple:
    return Triple.of(f"E{k % 7}", f"r{k % 4}", f"E{(k * 3 + 1) % 7}")


def _query(q: int, qid: str, shift: int = 0) -> list[tuple[str, object]]:
    """Query ``q``'s rerank, retrieval and generation (triples overlapping those of its neighbours)."""
    triples = tuple(dict.fromkeys(_triple(q + shift + j) for j in range(5)))
    ids = tuple(t.id for t in triples)
    paths = (Path((ids[0], ids[1])), Path((ids[2],)), Path((ids[3], ids[4]))) if q % 2 else ()
    first = triples[0].subject
    answer = triples[(q + shift) % len(triples)].object
    gold = Gold(answers=(triples[1].object,)) if q % 3 == 0 else None
    items: list[tuple[str, object]] = []
    if not shift:  # a query asked again has no S_r of its own (the first one's is kept)
        relevance = tuple(round(0.1 + 0.8 * ((q * 7 + j) % 10) / 10, 3) for j in range(len(ids)))
        items.append(
            ("rerank", RerankRequest("b", f"What is the r{q % 4} of {first}?", "triple", ids, relevance, qid))
        )
    items.append(
        (
            "retrieval",
            RetrievalEvent(
                "b",
                qid,
                f"What is the r{q % 4} of {first}?",
                mentions=(first,),
                grounding={first: first},
                subgraph=Subgraph(triples),
                paths=paths,
                gold=gold,
            ),
        )
    )
    items.append(
        (
            "generation",
            GenerationEvent("b", qid, answer, answer_mentions=(answer,), answer_grounding={answer: answer}),
        )
    )
    return items


def _sequence(n: int = 24) -> list[tuple[str, object]]:
    """Queries whose feedback arrives two queries later (their retrievals in between), several ratings
    per query (over the cap of 3 for some), and query ``q0`` asked again after its feedback."""
    items: list[tuple[str, object]] = []
    scores = (1.0, 0.0, 0.8, 0.2, 1.0, 0.0)
    for q in range(n):
        items += _query(q, f"q{q}")
        if q >= 2:
            p = q - 2
            for r in range(1 + p % 5):  # 1..5 ratings: 4 and 5 exceed the cap
                items.append(("feedback", FeedbackEvent("b", f"q{p}", scores[(p + r) % len(scores)])))
        if q == 6:  # q0 asked again, with other triples and answer, then rated again
            items += _query(0, "q0", shift=3)
            items.append(("feedback", FeedbackEvent("b", "q0", 0.0, source="llm")))
    for p in (n - 2, n - 1):
        items.append(("feedback", FeedbackEvent("b", f"q{p}", 0.0 if p % 2 else 1.0)))
    return items


def _run(
    store: str, batch_size: int | None, reweight: bool
) -> tuple[dict[str, float], object, dict[str, object]]:
    config = TriageConfig(reweight=reweight, options={"feedback.staleness": 0})
    if batch_size is None:
        manager = TriageManager(store, config=config, entry_points=False, synchronous=True)
    else:
        manager = TriageManager(
            store,
            config=config,
            entry_points=False,
            synchronous=False,
            batch_size=batch_size,
            schedule_delay=0.05,
        )
    emit = {
        "retrieval": manager.emit_retrieval,
        "generation": manager.emit_generation,
        "feedback": manager.emit_feedback,
        "rerank": manager.rerank,
    }
    for kind, item in _sequence():
        emit[kind](item)
    assert manager.flush(60)
    assert not manager.failures, manager.failures
    manager.close()
    with open_store(store, readonly=True) as s:
        scores = {k: r.raw for k, r in s.get_scores("triple").items()}
        alpha = s.get_param(ALPHA)
        counts = {f"q{q}": s.get_param(f"{PER_QUERY}human.b/q{q}") for q in range(24)}
    return scores, alpha, counts


def _same_everywhere(stores: dict[object, str], reweight: bool) -> None:
    results = {mode: _run(url, mode, reweight) for mode, url in stores.items()}
    scores, alpha, counts = results[None]
    assert len(scores) > 20 and alpha is not None and alpha != 0.5  # it learned
    for mode, (s, a, c) in results.items():
        assert s == scores, f"batch size {mode}: scores differ from the synchronous manager's"
        assert a == alpha, f"batch size {mode}: alpha {a!r} != {alpha!r}"
        assert c == counts, f"batch size {mode}: per-query counts differ"


@pytest.mark.parametrize("reweight", [False, True])  # True: the host's reranks read the scores meanwhile
def test_batch_boundaries_change_nothing_learned_on_sqlite(tmp_path, reweight):
    _same_everywhere({mode: str(tmp_path / f"{mode}.db") for mode in MODES}, reweight)


@pytest.mark.parametrize("reweight", [False, True])
def test_batch_boundaries_change_nothing_learned_on_postgres(postgres_server, reweight):
    pg = sys.modules["triage_tests_pgserver"]  # loaded by tests/conftest.py
    made = {mode: pg.fresh_database(postgres_server.url) for mode in MODES}
    try:
        _same_everywhere({mode: url for mode, (url, _) in made.items()}, reweight)
        with open_store(made[None][0], readonly=True) as s:  # the cap was reached: over it, nothing moved
            assert s.get_param(f"{PER_QUERY}human.b/q3") == 4.0
    finally:
        for _, drop in made.values():
            drop()


@pytest.mark.parametrize("batch_size", [7])
def test_batch_end_steps_run_after_the_batch_and_before_flush_returns(tmp_path, batch_size):
    manager = TriageManager(
        str(tmp_path / "s.db"),
        entry_points=False,
        synchronous=False,
        batch_size=batch_size,
        schedule_delay=0.05,
    )
    learner = manager._pm.get_plugin("triage.feedback")  # noqa: SLF001 - the default plugin itself
    for kind, item in _sequence(6):
        {"retrieval": manager.emit_retrieval, "generation": manager.emit_generation}.get(
            kind, manager.emit_feedback if kind == "feedback" else manager.rerank
        )(item)
    assert manager.flush(30)
    assert learner.last_update is not None and not learner._queued  # noqa: SLF001
    manager.close()
