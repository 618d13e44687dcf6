"""The learner's score update and α step in one round trip on PostgreSQL (issue #34, "durable and
fast together"): ``add_scores_and_param`` pipelines the statements ``add_scores`` and ``add_param``
send, so the values learned are bit for bit those of the two separate writes."""

from __future__ import annotations

import sys

import psycopg
import pytest

from triage_plugins.contract.config import TriageConfig
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
    """Count the statements sent, by their first words: those that wait for their answer alone, and
    (``"pipelined …"``) those sent in a pipeline; ``"<pipeline>"`` counts pipelines (one answer each)."""
    counts: dict[str, int] = {}
    execute, pipeline = psycopg.Connection.execute, psycopg.Connection.pipeline

    def counting(self, query, *args, **kwargs):
        key = " ".join(str(query).split()[:3])
        key = key if self._pipeline is None else f"pipelined {key}"
        counts[key] = counts.get(key, 0) + 1
        return execute(self, query, *args, **kwargs)

    def counting_pipelines(self):
        if self._pipeline is None:
            counts["<pipeline>"] = counts.get("<pipeline>", 0) + 1
        return pipeline(self)

    monkeypatch.setattr(psycopg.Connection, "execute", counting)
    monkeypatch.setattr(psycopg.Connection, "pipeline", counting_pipelines)
    return counts


def _sent(counts: dict[str, int], key: str) -> int:
    """Statements starting with ``key`` sent alone or in a pipeline."""
    return counts.get(key, 0) + counts.get(f"pipelined {key}", 0)


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
    # One statement per learned feedback: its cap count, score upserts and α step (``WITH c AS …``; a
    # batch's first one pipelined with the batch's lock); apart, the cap counter and the α step are
    # statements of their own.
    params = "INSERT INTO params"
    assert _sent(answered_one, "WITH c AS") == 30 and _sent(answered_one, params) == 0
    assert _sent(answered_two, "WITH c AS") == 0 and _sent(answered_two, "WITH t(id, d)") == 30
    assert _sent(answered_two, params) == 2 * 30
    # Every pipeline carries the batch's advisory lock and one write: no lock waits for an answer alone.
    for answered in (answered_one, answered_two):
        locks = answered.get("pipelined SELECT pg_advisory_xact_lock(%s)", 0)
        assert locks == answered.get("<pipeline>", 0) > 0
        assert answered.get("SELECT pg_advisory_xact_lock(%s)", 0) <= 1  # the migration's lock


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


#: The score upsert ``add_scores`` sent once per id before it became one statement for all ids.
_ONE_ID_UPSERT = (
    "INSERT INTO scores AS s (unit, id, raw, n_updates, updated_at) VALUES (%s, %s, %s + %s, 1, %s) "
    "ON CONFLICT (unit, id) DO UPDATE SET raw = s.raw + %s, n_updates = s.n_updates + 1, "
    "updated_at = excluded.updated_at RETURNING raw"
)


def test_one_statement_for_all_ids_stores_what_one_upsert_per_id_stored(postgres_url):
    import random

    rng = random.Random(34)
    steps = [
        {f"t{rng.randrange(40)}": rng.uniform(-7.0, 7.0) for _ in range(rng.randrange(1, 9))}
        for _ in range(200)
    ]
    with PostgresStore(postgres_url) as store:
        returned = [store.add_scores("triple", step, init=100.0) for step in steps]
        new = {k: r.raw for k, r in store.get_scores("triple").items()}
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("DELETE FROM scores")
            before = [
                {
                    k: conn.execute(_ONE_ID_UPSERT, ("triple", k, 100.0, d, 0.0, d)).fetchone()[0]
                    for k, d in step.items()
                }
                for step in steps
            ]
        old = {k: r.raw for k, r in store.get_scores("triple").items()}
    assert returned == before and new == old  # bit for bit


def test_a_capped_write_changes_only_the_counter_once_over_the_cap(postgres_url):
    with PostgresStore(postgres_url) as store:
        kwargs = {"init": 100.0, "name": "alpha", "delta": 0.25, "initial": 0.5, "bounds": (0.0, 1.0)}
        first = store.add_scores_and_param("triple", {"a": 1.0, "b": -2.0}, cap=("n/q1", 2), **kwargs)
        second = store.add_scores_and_param("triple", {"a": 1.0}, cap=("n/q1", 2), **kwargs)
        third = store.add_scores_and_param("triple", {"a": 1.0, "c": 5.0}, cap=("n/q1", 2), **kwargs)
        assert first == ({"a": 101.0, "b": 98.0}, 0.75) and second == ({"a": 102.0}, 1.0)
        assert third is None
        assert {k: r.raw for k, r in store.get_scores("triple").items()} == {"a": 102.0, "b": 98.0}
        assert store.get_param("alpha") == 1.0 and store.get_param("n/q1") == 3.0  # clamped at cap + 1
        other = store.add_scores_and_param("triple", {"a": 1.0}, cap=("n/q2", 2), **kwargs)
        assert other == ({"a": 103.0}, 1.0)  # another counter
        only_alpha = {**kwargs, "delta": -0.5}
        assert store.add_scores_and_param("triple", {}, cap=("n/q3", 1), **only_alpha) == ({}, 0.5)
        assert store.add_scores_and_param("triple", {}, cap=("n/q3", 1), **only_alpha) is None
        assert store.get_param("alpha") == 0.5


def test_the_cap_holds_through_the_learner_in_one_statement_per_feedback(postgres_url, tmp_path, monkeypatch):
    counts = _answered(monkeypatch)
    options = {"feedback.max_per_query": 2}
    manager = TriageManager(
        postgres_url, config=TriageConfig(options=options), entry_points=False, spill_dir=tmp_path / "spill"
    )
    try:
        triples = tuple(Triple.of("Inception", f"r{j}", f"O{j}") for j in range(3))
        answer = triples[0].object
        manager.emit_retrieval(
            RetrievalEvent("b", "q", "Who?", subgraph=Subgraph(triples), gold=Gold(answers=(answer,)))
        )
        manager.emit_generation(
            GenerationEvent("b", "q", answer, answer_mentions=(answer,), answer_grounding={answer: answer})
        )
        assert manager.flush(30)
        learned = []
        for _ in range(4):
            assert manager.emit_feedback(FeedbackEvent("b", "q", 1.0), wait=True)
            learned.append(manager.learned_scores("triple"))
        learner = manager.get_plugin("triage.feedback")
        assert learner.unattributed["over the cap per query"] == 2
    finally:
        manager.close()
    assert learned[0] != learned[1] == learned[2] == learned[3]  # the 3rd and 4th changed nothing
    assert _sent(counts, "WITH c AS") == 4  # every feedback counted in its one statement
    assert _sent(counts, "INSERT INTO params") == 2  # the two "over the cap" unattributed counts


def test_a_spilled_capped_write_replays_under_its_cap(postgres_url):
    args = {
        "unit": "triple", "deltas": {"a": 1.25}, "init": 100.0, "name": "alpha", "delta": 0.01,
        "initial": 0.5, "bounds": [0.0, 1.0], "cap": ["n/q", 1],
    }  # fmt: skip
    with PostgresStore(postgres_url) as store:
        _apply(store, "add_scores_and_param", args)
        _apply(store, "add_scores_and_param", args)  # over the cap when replayed: only the counter
        assert {k: r.raw for k, r in store.get_scores("triple").items()} == {"a": 101.25}
        assert store.get_param("alpha") == pytest.approx(0.51) and store.get_param("n/q") == 2.0


def test_a_capped_write_while_the_store_fails_is_spilled_and_replayed_under_its_cap(postgres_url, tmp_path):
    from triage_plugins.contract.errors import StoreError
    from triage_plugins.store.guard import GuardedStore

    class Down(PostgresStore):
        down = False

        def add_scores_and_param(self, *args, **kwargs):
            if self.down:
                raise StoreError("no connection to the server")
            return super().add_scores_and_param(*args, **kwargs)

    store = Down(postgres_url)
    guard = GuardedStore(store, spill_dir=tmp_path / "spill")
    kwargs = {"init": 100.0, "name": "alpha", "delta": 0.125, "initial": 0.5, "bounds": (0.0, 1.0)}
    capped = {"cap": ("n/q", 2), **kwargs}
    try:
        assert guard.add_scores_and_param("triple", {"a": 1.0}, **capped) == ({"a": 101.0}, 0.625)
        assert guard.get_scores("triple", ["a"])["a"].raw == 101.0  # read: a last known score
        store.down = True
        # Failing: answered from the last known values and spilled; the cap as far as this process knows.
        assert guard.add_scores_and_param("triple", {"a": 1.0}, **capped) == ({"a": 102.0}, 0.75)
        assert guard.add_scores_and_param("triple", {"a": 1.0}, **capped) is None
        assert guard.faults.spilled == 2
        store.down = False
        assert guard.replay() and not guard.degraded
        assert store.get_scores("triple")["a"].raw == 102.0  # the third was over the cap when replayed too
        assert store.get_param("alpha") == 0.75 and store.get_param("n/q") == 3.0
    finally:
        guard.close()
