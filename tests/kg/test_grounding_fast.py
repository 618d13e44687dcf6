"""Grounder.ground's fast paths (issue #32 point 5) ground exactly as the reference grounder.

The reference is ``legacy_grounding.py`` beside this file, the frozen grounder the compact gazetteer
test already compares against (issue 20; the grounder before the fast paths grounded every text
below as it does): every text must give the same mentions, order, grounding and spans, and every
tokenization the same tokens. Texts: PathQuestion and MetaQA questions over their own graphs (from
``../shared/data``; skipped, saying so, when absent) and hostile strings (unicode, punctuation,
sentence stops, abbreviations, quotes, empty, very long, overlapping names, aliases).
"""

from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType

import pytest

from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg import grounding as g
from triage_plugins.kg.grounding import Grounder

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

# ---------------------------------------------------------------- texts and graphs

NAMES = ["Christopher Nolan", "Nolan", "Inception", "The Who", "Up", "It", "Her", "Bank of America",
         "America", "Peter Franzén", "Franzen", "Düsseldorf", "The Killing Room", "Killing", "Drama",
         "New York", "New York City", "York", "$", "Mr. Smith", "J. R. R. Tolkien", "van der Berg",
         "東京", "東京タワー", "Zoë Ça", "ﬁlm", "O'Neil", "AT&T", "U.S.", "the_end", "x-men", "42",
         "Nicholas Gallagher", "Northwind Pictures", "Copperfield Media", "Jonathan Whitaker"]  # fmt: skip
ALIASES: dict[str, str | None] = {"Chris Nolan": "Christopher Nolan", "NYC": "New York City",
                                   "the big apple": "New York", "Nobody": None, "Ghost": "not a node",
                                   "Inception": "Up", "up": "It"}  # fmt: skip
HOSTILE = [
    "",
    " ",
    "?",
    "...",
    "\n\n",
    "“”",
    '""',
    "[]",
    "['']",
    "«»",
    "'",
    "Did Christopher Nolan direct Inception?",
    "did christopher nolan direct inception",
    "Who directed The Killing Room? the killing room. THE KILLING ROOM!",
    "Mr. Nolan met J. Smith. Then Dr. Who left. Up! It is up. Her film, Her.",
    "Is Bank of America in New York City or New York? And Steven Spielberg, Jaws and Duel?",
    'He said "Up" and \'It\' and “The Who” and «Her» and [Inception] and [$] and "$".',
    "Peter Franzén, Peter Franzen, PETER FRANZÉN, Düsseldorf and Dusseldorf; ﬁlm ＮＹＣ 東京タワー 東京",
    "Chris Nolan, chris nolan, NYC, nyc, the big apple, Nobody, Ghost; AT&T, U.S. and O'Neil's x-men 42.",
    "New York New York City York New York City City — Nolan Nolan Christopher Christopher Nolan",
    "Zoë Ça va?\tZoe Ca!\u00a0Zoë\u0308 Ça\u0327 e\u0301 ",
    "van der Berg von Der Berg Van Der Berg. the_end The_End [the_end] 'the end'",
    "A? B! C. D\nE Mr. F J. G Dr.H I.J.K. L.",
    "[Nicholas Gallagher] and [Northwind Pictures] are ['Up'] ; [ unclosed \"quote [nested [x] y]",
    "What is the country of citizenship of Nicholas Gallagher? What is Jonathan Whitaker's film?",
    "\u200b\ufeffNolan\u200bInception 𝔑𝔬𝔩𝔞𝔫 Ⅻ ½ ①",
]


def _hostile_texts() -> list[str]:
    rng = random.Random(32)
    words = [w for name in [*NAMES, *ALIASES] for w in name.split()]
    words += [
        "the",
        "of",
        "and",
        "Did",
        "what",
        "?",
        ".",
        "!",
        "Mr.",
        '"',
        "[",
        "]",
        "'",
        "«",
        "»",
        ",",
        "\n",
    ]
    texts = list(HOSTILE)
    for _ in range(400):
        parts = [rng.choice(words) for _ in range(rng.randint(1, 14))]
        if rng.random() < 0.5:
            parts = [p.lower() for p in parts]
        texts.append(rng.choice(["", " ", "Did ", "who "]) + rng.choice([" ", "", "  "]).join(parts))
    every_ascii = "".join(map(chr, range(128)))
    texts += [every_ascii, f"Nolan{every_ascii}Up.{every_ascii[::-1]}Mr.It", every_ascii.replace("U", " Up ")]
    texts.append(" ".join(texts[:200]))  # very long
    texts.append("Nolan " * 2000 + "Christopher Nolan")
    return texts


def _assert_same(
    legacy: ModuleType,
    graph: GraphView,
    texts: list[str],
    aliases: dict[str, str | None] | None = None,
    **kw: bool,
) -> int:
    """Ground ``texts`` with the grounder and the reference over ``graph``: the same zones, tokens,
    mentions, grounding and spans; returns how many nodes were grounded."""
    new, ref = Grounder(graph, aliases, **kw), legacy.Grounder(graph, aliases, **kw)
    hits = 0
    for text in texts:
        zones = g._zones(text)[0]
        assert legacy._zones(text)[0] == zones, text
        assert tuple(legacy._tokenize(text, zones)) == tuple(g._tokenize(text, zones)), text
        a, b = new.ground(text), ref.ground(text)
        assert (a.mentions, a.grounding, a.spans) == (b.mentions, b.grounding, b.spans), text
        hits += len(a.nodes)
    return hits


@pytest.mark.parametrize("bracketed_only", [True, False])
def test_hostile_texts_ground_as_before(bracketed_only: bool, legacy_grounding: ModuleType) -> None:
    rng = random.Random(5)
    triples = [Triple.of(rng.choice(NAMES), rng.choice(["p", "q"]), rng.choice(NAMES)) for _ in range(120)]
    graph = GraphView(triples, nodes=NAMES, labels={"the_end": "The End", "x-men": "X-Men"})
    hits = _assert_same(legacy_grounding, graph, _hostile_texts(), ALIASES, bracketed_only=bracketed_only)
    assert hits > 500


def _data(*parts: str) -> Path:
    path = DATA.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"real KGQA data not found at {path} (../shared/data is absent from a fresh clone)")
    return path


def test_pathquestion_questions_ground_as_before(legacy_grounding: ModuleType) -> None:
    kb = _data("pathquestion", "2H-kb.txt")
    questions = _data("pathquestion", "PQ-2H.txt")
    triples = [Triple.of(*line.split("\t")) for line in kb.read_text().splitlines() if line.count("\t") == 2]
    texts = [line.split("\t")[0] for line in questions.read_text().splitlines()]
    # every question names its topic entity
    assert _assert_same(legacy_grounding, GraphView(triples), texts) >= len(texts)


@pytest.mark.parametrize("bracketed_only", [True, False])
def test_metaqa_questions_ground_as_before(bracketed_only: bool, legacy_grounding: ModuleType) -> None:
    kb = _data("metaqa", "derived", "kb_reconstructed.part1.txt")
    questions = _data("metaqa", "1-hop", "qa_dev.txt")
    with kb.open() as f:
        rows = [line.rstrip("\n").split("|") for _, line in zip(range(40000), f, strict=False)]
    graph = GraphView([Triple.of(*r) for r in rows if len(r) == 3])
    with questions.open() as f:
        lines = [line.rstrip("\n") for _, line in zip(range(3000), f, strict=False)]
    texts = [line.split("\t")[0] for line in lines]
    # answers too: pipe-separated titles, as the scorer grounds them
    texts += [line.split("\t")[-1].replace("|", ", ") for line in lines[:1000]]
    assert _assert_same(legacy_grounding, graph, texts, bracketed_only=bracketed_only) > 500
