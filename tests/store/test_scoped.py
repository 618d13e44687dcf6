"""Scopes of one store (:mod:`triage_plugins.store.scoped`): one learner per namespace, on every backend.

SQLite (a file) and PostgreSQL (a real server, a fresh database per test; ``tests/store/pgserver.py``).
"""

from __future__ import annotations

import pytest

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.errors import ConfigError
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import is_store, open_store
from triage_plugins.store.scoped import ScopedStore, join_namespaces, scoped, unscoped

BACKENDS = {
    "sqlite": lambda request, tmp_path: open_store(tmp_path / "scoped.sqlite"),
    "postgres": lambda request, tmp_path: open_store(request.getfixturevalue("postgres_url")),
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request, tmp_path):
    opened = BACKENDS[request.param](request, tmp_path)
    yield opened
    opened.close()


def test_two_scopes_keep_their_own_scores_params_and_runs(store):
    a, b = ScopedStore(store, "wa"), ScopedStore(store, "wb")
    assert is_store(a) and a.url == store.url
    a.add_scores("triple", {"x|y": -10.0})
    a.add_score("triple", "y|z", 5.0)
    a.set_score("chunk", "c1", 42.0)
    assert {k: r.raw for k, r in a.get_scores("triple").items()} == {"x|y": 90.0, "y|z": 105.0}
    assert b.get_scores("triple") == {} and b.get_scores("chunk") == {}
    assert store.get_scores("triple") == {}  # the default scope is untouched
    assert set(store.get_scores("wa:triple")) == {"x|y", "y|z"}  # the shared store's key
    assert a.scores_changed_at("triple") is not None and b.scores_changed_at("triple") is None
    a.set_param("feedback.alpha", 0.3)
    assert a.add_param("feedback.steps", 1.0) == 1.0 and b.add_param("feedback.steps", 1.0) == 1.0
    assert a.add_param("feedback.steps", 1.0) == 2.0
    assert (
        a.get_param("feedback.alpha"),
        b.get_param("feedback.alpha"),
        store.get_param("feedback.alpha"),
    ) == (
        0.3,
        None,
        None,
    )
    run_a, run_b, run_default = (
        a.start_run("serve", {"pid": 1}),
        b.start_run("serve"),
        store.start_run("serve"),
    )
    assert [r.id for r in a.runs("serve")] == [run_a] and a.runs()[0].config["pid"] == 1
    assert [r.id for r in b.runs()] == [run_b]
    assert {r.id for r in store.runs()} == {run_a, run_b, run_default}  # the store itself sees every run
    with a.transaction() as tx:  # writes inside a transaction stay in the scope
        tx.add_scores("triple", {"x|y": -10.0})
    assert a.get_scores("triple")["x|y"].raw == 80.0


def test_the_default_scope_is_the_unprefixed_store_no_migration(store):
    """Scores learned before namespaces existed (unprefixed) are the default scope's, as they were."""
    store.add_scores("triple", {"old|edge": -20.0})
    assert scoped(store, None) is store and scoped(store, "") is store
    manager = TriageManager(store, entry_points=False, synchronous=True)
    try:
        assert manager.store.inner is store  # the store itself, behind the manager's circuit breaker
        assert manager.learned_scores("triple") == {"old|edge": 80.0}
    finally:
        manager.close()
    scoped_manager = TriageManager(
        store, config=TriageConfig(namespace="wa"), entry_points=False, synchronous=True
    )
    try:
        assert isinstance(scoped_manager.store, ScopedStore) and unscoped(scoped_manager.store).inner is store
        assert scoped_manager.learned_scores("triple") == {}  # a new scope starts empty
        run = scoped_manager.start_run("serve")
        assert store.runs()[-1].config["namespace"] == "wa" and store.runs()[-1].id == run
    finally:
        scoped_manager.close()
    assert store.get_scores("triple")["old|edge"].raw == 80.0


def test_views_nest_and_names_are_checked(tmp_path):
    with open_store(tmp_path / "n.sqlite") as store:
        nested = ScopedStore(ScopedStore(store, "team"), "wa")
        assert nested.namespace == "team:wa" and nested.inner is store
        nested.add_score("triple", "a|b", 1.0)
        assert set(store.get_scores("team:wa:triple")) == {"a|b"}
        assert join_namespaces("team", None, "wa") == "team:wa" and join_namespaces(None, "") is None
        with pytest.raises(ConfigError, match="whitespace"):
            ScopedStore(store, "two words")
        with pytest.raises(ConfigError, match="non-empty"):
            ScopedStore(store, "")
        with pytest.raises(ConfigError, match="namespace"):
            TriageConfig(namespace="a\nb")
        assert TriageConfig(namespace="").namespace is None
