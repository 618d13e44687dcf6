"""Grounder.ground's fast paths (issue #32 point 5) ground exactly as the algorithm they replaced.

``_Reference`` below is a frozen copy of ``Grounder.ground``, ``_longest``, ``_pick``,
``_capitalized_runs`` and ``_tokenize`` as they were before the fast paths (commit of issue #32 round
4), run over the same gazetteer: every text must give the same mentions, order, grounding and
spans, and every tokenization the same tokens. Texts: PathQuestion and MetaQA questions over their
own graphs (from ``../shared/data``; skipped, saying so, when absent) and hostile strings (unicode,
punctuation, sentence stops, abbreviations, quotes, empty, very long, overlapping names, aliases).
Do not edit the reference to follow future changes of the grounder: it is the old behaviour.
"""

# ruff: noqa: SIM102, PLR0912, C901
from __future__ import annotations

import random
from pathlib import Path

import pytest

from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg import grounding as g
from triage_plugins.kg.gazetteer import KIND_TOKENS, KIND_WEAK
from triage_plugins.kg.gazetteer import Entry as _Entry
from triage_plugins.kg.grounding import Grounder, Grounding, _Found

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
STOP_WORDS, _WEAK_WORDS, _PARTICLES = g.STOP_WORDS, g._WEAK_WORDS, g._PARTICLES
_JOINERS, _ABBREV_MAX, _SENTENCE_END = g._JOINERS, g._ABBREV_MAX, g._SENTENCE_END
_WORD, _WORD_UNI, _Tokens, _fold, normalize_label = (
    g._WORD,
    g._WORD_UNI,
    g._Tokens,
    g._fold,
    g.normalize_label,
)
_zones, EventError = g._zones, g.EventError


# ---------------------------------------------------------------- frozen reference (do not edit)


class _Reference(Grounder):
    """The grounder's matching as it was before the fast paths."""

    def ground(self, text: str) -> Grounding:
        """Extract the mentions M_q of ``text`` and ground each to a node or ``None`` (TRIAGE §4.3.1)."""
        if not isinstance(text, str):
            raise EventError("Grounder", "text", f"must be a string, got {type(text).__name__}")
        zones, brackets = _zones(text)
        found: list[_Found] = []
        if self.bracketed_only and any(brackets):
            for (start, end), bracket in zip(zones, brackets, strict=True):
                if bracket and (hit := self._ground_zone(text, start, end)) is not None:
                    found.append(hit)
            return self._coalesce(text, found)
        toks = _ref_tokenize(text, zones)
        n = len(toks.norm)
        cased = any(not toks.lower[i] and not toks.initial[i] for i in range(n))
        consumed = [False] * n
        zone_seen = [False] * len(zones)
        i = 0
        while i < n:
            z = toks.zone[i]
            if z >= 0:
                zone_seen[z] = True
                if (hit := self._ground_zone(text, *zones[z])) is not None:
                    found.append(hit)
                while i < n and toks.zone[i] == z:
                    consumed[i] = True
                    i += 1
                continue
            hit = self._longest(text, toks, i, cased)
            if hit is None:
                i += 1
                continue
            first, last, node = hit
            found.append((toks.start[first], toks.end[last], node, True))
            for k in range(first, last + 1):
                consumed[k] = True
            i = last + 1
        # Quoted spans without letters or digits ("$") can only name symbolic labels.
        for z, (start, end) in enumerate(zones):
            if not zone_seen[z] and (hit := self._ground_zone(text, start, end)) is not None:
                found.append(hit)
        found.extend(self._capitalized_runs(text, toks, consumed))
        found.sort(key=lambda f: f[:2])
        return self._coalesce(text, found)

    def _longest(self, text: str, toks: _Tokens, i: int, cased: bool) -> tuple[int, int, str | None] | None:
        """Longest gazetteer match starting at token ``i``: (first token, last token, node)."""
        norm, zone = toks.norm, toks.zone
        n = len(norm)
        best: tuple[int, int, str | None] | None = None
        gaz = self._gaz
        if norm[i] not in STOP_WORDS and gaz.has_prefix((norm[i],)):
            key: tuple[str, ...] = (norm[i],)
            j = i
            single = True
            while True:
                entries = gaz.entries(KIND_TOKENS, key)
                if entries and cased and single and toks.lower[i]:
                    entries = tuple(e for e in entries if not e.has_upper)
                if entries:
                    best = self._pick(text, toks, entries, i, j)
                j += 1
                while j < n and zone[j] < 0 and norm[j] in STOP_WORDS:
                    j += 1
                if j >= n or zone[j] >= 0:
                    break
                key = (*key, norm[j])
                if not gaz.has_prefix(key):
                    break
                single = False
        if gaz.weak_max and toks.cap[i]:
            for length in range(min(gaz.weak_max, n - i), 0, -1):
                last = i + length - 1
                if best is not None and last <= best[1]:
                    break
                if (length == 1 and toks.initial[i]) or not toks.cap[last]:
                    continue
                if any(
                    zone[k] >= 0 or not (toks.cap[k] or norm[k] in STOP_WORDS) for k in range(i, last + 1)
                ):
                    continue
                entries = gaz.entries(KIND_WEAK, tuple(norm[i : last + 1]))
                if entries:
                    best = self._pick(text, toks, entries, i, last)
                    break
        return best

    @staticmethod
    def _pick(
        text: str, toks: _Tokens, entries: tuple[_Entry, ...], first: int, last: int
    ) -> tuple[int, int, str | None]:
        """Choose among entries sharing a key (see the module notes); a label's leading stop words
        that precede the match in the text join the span."""
        candidates = []
        for index, e in enumerate(entries):
            start = last + 1 - len(e.full)
            full = (
                0 <= start <= first
                and tuple(toks.norm[start : last + 1]) == e.full
                and all(toks.zone[k] < 0 for k in range(start, first))
            )
            exact = full and text[toks.start[start] : toks.end[last]] == e.surface
            candidates.append(((e.rank, not exact, not full, index), start if full else first, e.node))
        _, start, node = min(candidates)
        return (start, last, node)

    @staticmethod
    def _capitalized_runs(text: str, toks: _Tokens, consumed: list[bool]) -> list[_Found]:
        """Unresolved mentions: runs of capitalized tokens that no gazetteer entry touched."""
        out: list[_Found] = []
        n = len(toks.norm)
        i = 0
        while i < n:
            if toks.zone[i] >= 0 or not toks.cap[i]:
                i += 1
                continue
            run = [i]
            j = i + 1
            while j < n and toks.zone[j] < 0:
                gap = text[toks.end[j - 1] : toks.start[j]].strip()
                if gap not in _JOINERS or (gap == "." and toks.end[j - 1] - toks.start[j - 1] > _ABBREV_MAX):
                    break
                if toks.cap[j] or toks.norm[j].isdigit():
                    run.append(j)
                    j += 1
                    continue
                # lower-case particles inside a name ("Bank of America") when a capital follows
                k = j
                while k < n and toks.zone[k] < 0 and toks.lower[k] and toks.norm[k] in _PARTICLES:
                    k += 1
                if k == j or k >= n or toks.zone[k] >= 0 or not toks.cap[k]:
                    break
                run.extend(range(j, k + 1))
                j = k + 1
            i = j
            if any(consumed[k] for k in run):
                continue
            while run and toks.norm[run[0]] in _WEAK_WORDS:
                run.pop(0)
            while run and toks.norm[run[-1]] in _WEAK_WORDS:
                run.pop()
            if run:
                out.append((toks.start[run[0]], toks.end[run[-1]], None, False))
        return out


def _ref_tokenize(text: str, zones: list[tuple[int, int]]) -> _Tokens:
    """Word tokens of ``text``: normalized forms, offsets, case, sentence and zone flags."""
    toks = _Tokens([], [], [], [], [], [], [])
    pattern = _WORD if text.isascii() else _WORD_UNI
    prev_end = 0
    prev_short_cap = False
    zi = 0
    for m in pattern.finditer(text):
        raw = m.group()
        start, end = m.span()
        norms = [raw.lower()] if raw.isascii() else [_fold(t) for t in normalize_label(raw).split()]
        initial = not toks.norm or (
            _SENTENCE_END.search(text, prev_end, start) is not None and not prev_short_cap
        )
        while zi < len(zones) and zones[zi][1] <= start:
            zi += 1
        zone = zi if zi < len(zones) and zones[zi][0] <= start else -1
        cap = raw[0].isupper()
        lower = raw == raw.lower()
        for t in norms:
            toks.norm.append(t)
            toks.start.append(start)
            toks.end.append(end)
            toks.cap.append(cap)
            toks.lower.append(lower)
            toks.initial.append(initial)
            toks.zone.append(zone)
            initial = False
        prev_end = end
        prev_short_cap = cap and len(raw) <= _ABBREV_MAX
    return toks


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


def _assert_same(new: Grounder, ref: _Reference, texts: list[str]) -> int:
    hits = 0
    for text in texts:
        assert _ref_tokenize(text, _zones(text)[0]) == g._tokenize(text, _zones(text)[0]), text
        a, b = new.ground(text), ref.ground(text)
        assert (a.mentions, a.grounding, a.spans) == (b.mentions, b.grounding, b.spans), text
        hits += len(a.nodes)
    return hits


def _pair(
    graph: GraphView, aliases: dict[str, str | None] | None = None, **kw: bool
) -> tuple[Grounder, _Reference]:
    return Grounder(graph, aliases, **kw), _Reference(graph, aliases, **kw)


@pytest.mark.parametrize("bracketed_only", [True, False])
def test_hostile_texts_ground_as_before(bracketed_only: bool) -> None:
    rng = random.Random(5)
    triples = [Triple.of(rng.choice(NAMES), rng.choice(["p", "q"]), rng.choice(NAMES)) for _ in range(120)]
    graph = GraphView(triples, nodes=NAMES, labels={"the_end": "The End", "x-men": "X-Men"})
    new, ref = _pair(graph, ALIASES, bracketed_only=bracketed_only)
    assert _assert_same(new, ref, _hostile_texts()) > 500


def _data(*parts: str) -> Path:
    path = DATA.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"real KGQA data not found at {path} (../shared/data is absent from a fresh clone)")
    return path


def test_pathquestion_questions_ground_as_before() -> None:
    kb = _data("pathquestion", "2H-kb.txt")
    questions = _data("pathquestion", "PQ-2H.txt")
    triples = [Triple.of(*line.split("\t")) for line in kb.read_text().splitlines() if line.count("\t") == 2]
    new, ref = _pair(GraphView(triples))
    texts = [line.split("\t")[0] for line in questions.read_text().splitlines()]
    assert _assert_same(new, ref, texts) >= len(texts)  # every question names its topic entity


@pytest.mark.parametrize("bracketed_only", [True, False])
def test_metaqa_questions_ground_as_before(bracketed_only: bool) -> None:
    kb = _data("metaqa", "derived", "kb_reconstructed.part1.txt")
    questions = _data("metaqa", "1-hop", "qa_dev.txt")
    with kb.open() as f:
        rows = [line.rstrip("\n").split("|") for _, line in zip(range(40000), f, strict=False)]
    new, ref = _pair(GraphView([Triple.of(*r) for r in rows if len(r) == 3]), bracketed_only=bracketed_only)
    with questions.open() as f:
        lines = [line.rstrip("\n") for _, line in zip(range(3000), f, strict=False)]
    texts = [line.split("\t")[0] for line in lines]
    # answers too: pipe-separated titles, as the scorer grounds them
    texts += [line.split("\t")[-1].replace("|", ", ") for line in lines[:1000]]
    assert _assert_same(new, ref, texts) > 500
