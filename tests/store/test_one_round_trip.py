"""The learner's score update and α step in one round trip on PostgreSQL (issue #34, "durable and
fast together"): ``add_scores_and_param`` pipelines the statements ``add_scores`` and ``add_param``
send, so the values learned are bit for bit those of the two separate writes."""

from __future__ import annotations

import sys

import psycopg
import pytest

from triage_plugins.contract.events import (
    FeedbackEvent,
    GenerationEvent,
    Gold,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import open_store
from triage_plugins.store.guard import _apply
from triage_plugins.store.postgres import PostgresStore


def _answered(monkeypatch) -> dict[str, int]:
    """Count the statements sent that wait for their answer (not in a pipeline), by their first words."""
    counts: dict[str, int] = {}
    execute = psycopg.Connection.execute

    def counting(self, query, *args, **kwargs):
        if self._pipeline is None:
            key = " ".join(str(query).split()[:3])
            counts[key] = counts.get(key, 0) + 1
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", counting)
    return counts


def _learn(url: str, tmp_path, n: int = 30) -> tuple[dict[str, float], float]:
    manager = TriageManager(url, entry_points=False, spill_dir=tmp_path / "spill", schedule_delay=0.05)
    for i in range(n):
        triples = tuple(Triple.of("Inception", f"r{(i + j) % 7}", f"O{(i + j) % 7}") for j in range(3))
        answer = triples[0].object
        manager.emit_retrieval(
            RetrievalEvent("b", f"q{i}", "Who?", subgraph=Subgraph(triples), gold=Gold(answers=(answer,)))
        )
        manager.emit_generation(
            GenerationEvent(
                "b", f"q{i}", answer, answer_mentions=(answer,), answer_grounding={answer: answer}
            )
        )
        manager.emit_feedback(FeedbackEvent("b", f"q{i}", 1.0 if i % 3 else 0.0))
    assert manager.flush(30)
    manager.close()
    with open_store(url, readonly=True) as store:
        return {k: r.raw for k, r in store.get_scores("triple").items()}, store.get_param(
            "evorag.triple.alpha"
        )


def test_one_round_trip_learns_bit_for_bit_what_two_writes_learn(postgres_server, tmp_path, monkeypatch):
    pg = sys.modules["triage_tests_pgserver"]  # loaded by tests/conftest.py
    one_url, drop_one = pg.fresh_database(postgres_server.url)
    two_url, drop_two = pg.fresh_database(postgres_server.url)
    try:
        counts = _answered(monkeypatch)
        one = _learn(one_url, tmp_path / "one")
        answered_one = dict(counts)
        counts.clear()
        with monkeypatch.context() as m:
            m.setattr(PostgresStore, "add_scores_and_param", None)  # the learner falls back to two writes
            two = _learn(two_url, tmp_path / "two")
        answered_two = dict(counts)
    finally:
        drop_one()
        drop_two()
    assert one[0] and one == two  # same raw scores and α, exactly
    assert one[1] != 0.5  # α was stepped
    # Score upserts are pipelined either way; the α steps no longer wait for an answer of their own
    # (the per-query cap counters still do: one per feedback).
    assert answered_one.get("INSERT INTO scores", 0) == answered_two.get("INSERT INTO scores", 0) == 0
    params = "INSERT INTO params"
    assert answered_one[params] == 30 < answered_two[params]


def test_a_spilled_combined_write_replays_as_the_two_writes(postgres_url):
    args = {
        "unit": "triple", "deltas": {"a": 1.25, "b": -3.5}, "init": 100.0,
        "name": "evorag.triple.alpha", "delta": 0.01, "initial": 0.5, "bounds": [0.05, 0.95],
    }  # fmt: skip
    with PostgresStore(postgres_url) as store:
        _apply(store, "add_scores_and_param", args)
        new, alpha = store.add_scores_and_param(
            "triple", {"a": 1.25}, init=100.0, name="evorag.triple.alpha", delta=-0.02, bounds=(0.05, 0.95)
        )
        assert new == {"a": 102.5}
        assert alpha == pytest.approx(0.49) and store.get_param("evorag.triple.alpha") == alpha
        assert {k: r.raw for k, r in store.get_scores("triple").items()} == {"a": 102.5, "b": 96.5}
