"""The compact gazetteer (issue 20): grounding identical to the dict-trie grounder it replaced."""

from __future__ import annotations

import random
from types import ModuleType

import numpy as np
import pytest

from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg import gazetteer as gz
from triage_plugins.kg.grounding import Grounder

WORDS = ["nolan", "Nolan", "Christopher", "Inception", "the", "of", "The", "Who", "Up", "it", "Bank",
         "America", "Franzén", "Franzen", "Düsseldorf", "Killing", "Room", "and", "to", "Drama", "drama",
         "New", "York", "city", "$", "!!", "Mr.", "J.", "van", "der", "Berg", "東京", "a", "Her", "film"]  # fmt: skip


def _phrase(rng: random.Random, low: int = 1, high: int = 4) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def random_world(seed: int, n_nodes: int = 300) -> tuple[GraphView, dict[str, str | None], list[str]]:
    """Nodes with clashing ids and labels (case, stop words, symbols, diacritics), aliases of every
    kind (to ids, to labels, unlinked, to nothing) and texts mixing them with quotes and brackets."""
    rng = random.Random(seed)
    ids = list(dict.fromkeys(_phrase(rng).strip() or "x" for _ in range(n_nodes)))
    ids = [i for i in ids if i.strip()]
    triples = [
        Triple.of(rng.choice(ids), rng.choice(["p", "q"]), rng.choice(ids)) for _ in range(3 * len(ids))
    ]
    labels = {i: _phrase(rng) for i in ids if rng.random() < 0.3}
    graph = GraphView(triples, nodes=ids, labels=labels)
    aliases: dict[str, str | None] = {}
    for _ in range(40):
        kind = rng.random()
        surface = _phrase(rng, 1, 3)
        if kind < 0.4:
            aliases[surface] = rng.choice(ids)
        elif kind < 0.6:
            aliases[surface] = None
        elif kind < 0.8 and labels:
            aliases[surface] = rng.choice(list(labels.values()))
        else:
            aliases[surface] = _phrase(rng)  # may name nothing: unlinked
    texts = []
    for _ in range(150):
        parts = []
        for _ in range(rng.randint(1, 6)):
            r = rng.random()
            piece = rng.choice(ids) if r < 0.4 else _phrase(rng)
            if r > 0.85:
                piece = rng.choice(['"{}"', "[{}]", "“{}”", "'{}'"]).format(piece)
            parts.append(piece)
        texts.append(
            rng.choice(["", "Did ", "what is ", "Who directed "])
            + " ".join(parts)
            + rng.choice(["?", ".", ""])
        )
    return graph, aliases, texts


@pytest.mark.parametrize("seed", range(6))
def test_grounding_identical_to_the_dict_trie_grounder(seed: int, legacy_grounding: ModuleType) -> None:
    graph, aliases, texts = random_world(seed)
    bracketed = seed % 2 == 0
    new = Grounder(graph, aliases, bracketed_only=bracketed)
    old = legacy_grounding.Grounder(graph, aliases, bracketed_only=bracketed)
    grounded = 0
    for text in texts:
        a, b = new.ground(text), old.ground(text)
        assert (a.mentions, a.grounding, a.spans) == (b.mentions, b.grounding, b.spans), text
        grounded += len(a.nodes)
    assert grounded > 50  # the texts do hit the gazetteer
    surfaces = [*graph.nodes[:100], *aliases, *(t.strip("?.") for t in texts[:50])]
    assert [new.link(s) for s in surfaces] == [old.link(s) for s in surfaces]


def test_colliding_hashes_never_match(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key whose hash equals another's is told apart by the recomputed key."""
    graph = GraphView([Triple.of("Inception", "directed_by", "Christopher Nolan")])
    grounder = Grounder(graph)
    gaz = grounder._gaz
    wanted = ("christopher", "nolan")
    h = hash((gz.KIND_TOKENS, *wanted))
    monkeypatch.setattr(gz, "hash", lambda x: h if x == (gz.KIND_TOKENS, "fake") else hash(x), raising=False)
    assert gaz._entries(gz.KIND_TOKENS, ("fake",)) == ()
    assert [e.node for e in gaz._entries(gz.KIND_TOKENS, wanted)] == ["Christopher Nolan"]


def test_memory_is_arrays_not_objects() -> None:
    """Per entry: a hash, a node index, an alias index and ≤ 32 filter bits; per key prefix a hash
    and ≤ 32 filter bits."""
    triples = [Triple.of(f"Entity {i}", "p", f"Entity {i + 1}") for i in range(2000)]
    graph = GraphView(triples)
    gaz = Grounder(graph, {"E one": "Entity 1"})._gaz
    assert len(gaz) == len(graph.nodes) + 1
    prefixes = 1 + len(graph.nodes) + 2  # "entity", "entity 0" ... one per node; "e", "e one"
    assert len(gaz._prefix) == prefixes
    assert gaz.nbytes() <= len(gaz) * (8 + 4 + 4 + 4) + prefixes * (8 + 4)
    assert isinstance(gaz._hash, np.ndarray) and not gaz._hash.flags.writeable


def test_ascii_fast_path_equals_full_normalization() -> None:
    from triage_plugins.contract.graph_view import normalize_label

    for text in ["Christopher_Nolan", "  The  Who!! ", "A.B-C", "$", "x\ty", "MiXeD 42nd"]:
        assert gz.label_tokens(text) == tuple(gz.fold(t) for t in normalize_label(text).split())
