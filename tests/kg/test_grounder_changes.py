"""Grounder.updated / Gazetteer.updated (issue #31): a changed graph's grounder, refiled only where
the graph changed, grounds and links every text exactly as a grounder built whole."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg import gazetteer as gz
from triage_plugins.kg import grounding
from triage_plugins.kg.grounding import Grounder, shared_grounder


def _worlds():
    path = Path(__file__).with_name("test_gazetteer.py")
    spec = importlib.util.spec_from_file_location("gazetteer_worlds", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


WORLDS = _worlds()


def _changed(graph: GraphView, seed: int) -> GraphView:
    """Nodes removed (one an alias target), relabeled and added; triples removed and added."""
    rng = random.Random(seed)
    nodes = list(graph.nodes)
    new_ids = [f"{WORLDS._phrase(rng)} {i}" for i in range(15)] + ["Christopher Nolan", "The Who"]
    triples = [Triple.of(rng.choice(new_ids), "p", rng.choice(nodes + new_ids)) for _ in range(40)]
    triples += [Triple.of(rng.choice(nodes), "q", rng.choice(nodes)) for _ in range(20)]
    relabel = {n: WORLDS._phrase(rng) for n in rng.sample(nodes, 10)}
    relabel.update({n: WORLDS._phrase(rng) for n in new_ids[:3]})
    return graph.with_changes(
        triples,
        removed=[t.id for t in rng.sample(graph.triples, 30)],
        nodes=["Up", "lonely node"],
        removed_nodes=rng.sample(nodes, 12),
        labels=relabel,
    )


@pytest.mark.parametrize("seed", range(6))
def test_an_updated_grounder_grounds_as_one_built_whole(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    graph, aliases, texts = WORLDS.random_world(seed)
    aliases = {**aliases, "the removed one": graph.nodes[0]}
    bracketed = seed % 2 == 0
    before = Grounder(graph, aliases, bracketed_only=bracketed)
    changed = _changed(graph, seed)
    whole = Grounder(changed, aliases, bracketed_only=bracketed)
    built = []
    monkeypatch.setattr(gz.Gazetteer, "__init__", lambda *a: built.append(a) or pytest.fail("built whole"))
    updated = before.updated(changed)
    assert not built and updated.graph is changed and before.graph is graph
    texts = [*texts, *(f"Did {n} meet {changed.label(n)}?" for n in changed.nodes[-20:])]
    grounded = 0
    for text in texts:
        a, b = updated.ground(text), whole.ground(text)
        assert (a.mentions, a.grounding, a.spans) == (b.mentions, b.grounding, b.spans), text
        grounded += len(a.nodes)
    assert grounded > 50
    surfaces = [*graph.nodes[:60], *changed.nodes[-30:], *changed.labels.values(), *aliases]
    assert [updated.link(s) for s in surfaces] == [whole.link(s) for s in surfaces]
    assert len(updated._gaz) == len(whole._gaz)  # the same rows (removed and relabeled ones gone)


def test_a_graph_not_derived_from_the_grounders_is_built_whole() -> None:
    graph, aliases, _ = WORLDS.random_world(1, n_nodes=40)
    other = GraphView(graph.triples[:10])
    updated = Grounder(graph, aliases).updated(other)
    assert updated.graph is other and updated.aliases == aliases
    assert [updated.link(n) for n in other.nodes] == [Grounder(other, aliases).link(n) for n in other.nodes]


def test_the_shared_grounder_of_a_derived_graph_is_updated(monkeypatch: pytest.MonkeyPatch) -> None:
    base = GraphView([Triple.of("Inception", "directed_by", "Christopher Nolan")])
    first = shared_grounder(base)
    changed = base.with_changes([Triple.of("Tenet", "directed_by", "Christopher Nolan")])
    calls = []
    original = Grounder.updated
    monkeypatch.setattr(Grounder, "updated", lambda self, g: calls.append(self) or original(self, g))
    second = shared_grounder(changed)
    assert calls == [first] and second is shared_grounder(changed)
    assert second.ground("Did Christopher Nolan direct Tenet?").nodes == ("Christopher Nolan", "Tenet")
    grounding._SHARED.clear()  # evicted: the previous grounder passed by its owner is used
    again = changed.with_changes(nodes=["Memento"])
    third = shared_grounder(again, previous=second)
    assert calls[-1] is second and third.link("memento") == "Memento"
