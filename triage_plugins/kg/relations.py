"""Relation words: which relation a question asks about, and which a triple states (DESIGN §4).

One stemmer and one notion of a relation's content words serve both the ARF metric (TRIAGE
§4.3.3: "relation label matched lexically after normalization") and feedback credit (EvoRAG §4.2,
where the paper is silent on how a relationship is matched to a question; DESIGN §4, "Credit in
the real frameworks").

- :func:`relation_stems` — the content stems of a relation label (``film.film.directed_by`` →
  ``{"direct"}``); a keyword list or a relationship description gives its content words.
- :func:`statement_stems` — a triple's relation stems without the words of its own two entities
  (a description "James Cameron praised Pulp Fiction" states ``{"prais"}``).
- :func:`question_stems` — what a question asks about: its content stems less question and
  function words, stop words, generic type nouns ("film", "person") and the words of its own
  entities ("Who directed Alien?" → ``{"direct"}``).

A triple answers a question's relation when the two sets meet (:func:`asks_about`). The match is
lexical, so a paraphrase ("couple" for ``spouse``) does not match; callers fall back to relation-
blind rules where no retrieved triple matches (see :mod:`triage_plugins.feedback.credit`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from triage_plugins.contract.graph_view import normalize_label

__all__ = [
    "asks_about",
    "lower_stems",
    "question_stems",
    "relation_stems",
    "stem",
    "statement_stems",
    "text_stems",
]

_STOP = frozenset(
    "a an the of by in on at to for with from as is are was were be been has have had its".split()  # noqa: SIM905
)
#: Question, auxiliary and pronoun words, and nouns that name an answer's type, not a relation.
_NOT_RELATION = frozenset(
    """what which who whom whose when where why how whether did do does done doing is are was were be
    been being am has have had having can could will would should shall may might must i me my you your
    he him his she her it its we us our they them their this that these those there here not no also
    please name list give tell show find about and or but so than then one ones s thing things
    film films movie movies person people man woman someone somebody something""".split()  # noqa: SIM905
)
_SEGMENT = re.compile(r"[/.#:]")
_SUFFIXES = (
    "ations",
    "ation",
    "ions",
    "ion",
    "ings",
    "ing",
    "edly",
    "ed",
    "ers",
    "er",
    "ors",
    "or",
    "es",
    "s",
    "ly",
)


#: Irregular verb forms a relation is often stated in, mapped to their base ("wrote" = "written").
_IRREGULAR = {
    "wrote": "write", "written": "write", "writing": "write", "writes": "write", "writer": "write",
    "writers": "write", "sang": "sing", "sung": "sing", "singer": "sing", "made": "make",
    "making": "make", "maker": "make", "built": "build", "won": "win", "winner": "win", "led": "lead",
    "leader": "lead", "taught": "teach", "teacher": "teach", "spoke": "speak", "spoken": "speak",
    "drew": "draw", "drawn": "draw", "grew": "grow", "grown": "grow", "bought": "buy", "sold": "sell",
    "seller": "sell", "gave": "give", "given": "give", "took": "take", "taken": "take", "held": "hold",
    "founder": "found", "married": "marry", "marriage": "marry", "wife": "spouse", "husband": "spouse",
    "starring": "star", "starred": "star", "stars": "star", "birth": "born", "birthplace": "born",
}  # fmt: skip


def stem(token: str) -> str:
    """A tiny suffix-stripping stemmer: 'directed', 'directs', 'director' -> 'direct';
    'release', 'released' -> 'releas'; 'movie', 'movies' -> 'movi'; irregular forms first map to
    their base ('wrote', 'written', 'writer' -> 'writ')."""
    token = _IRREGULAR.get(token, token)
    if token.endswith("ies") and len(token) >= 5:
        token = token[:-3] + "i"
    else:
        for suffix in _SUFFIXES:
            if token.endswith(suffix) and len(token) - len(suffix) >= 3:
                token = token[: -len(suffix)]
                break
    if len(token) > 3 and token[-1] in "ey":
        token = token[:-1] + ("i" if token[-1] == "y" else "")
    return token


@lru_cache(maxsize=4096)
def relation_stems(label: str) -> frozenset[str]:
    """Content stems of a relation label; for 'film.film.directed_by' only the last segment counts."""
    segment = _SEGMENT.split(label.strip("/.#: "))[-1] or label
    tokens = normalize_label(segment).split()
    content = [t for t in tokens if t not in _STOP] or tokens
    return frozenset(stem(t) for t in content)


def text_stems(text: str) -> frozenset[str]:
    """Stems of every word of ``text`` (normalized)."""
    return frozenset(stem(t) for t in normalize_label(text).split())


@lru_cache(maxsize=1 << 16)
def statement_stems(predicate: str, subject: str, object: str) -> frozenset[str]:
    """The relation stems a triple states: its predicate's content stems (words of the whole
    predicate, so a description counts whole) less stop words and the stems of its two entities."""
    entity = text_stems(subject) | text_stems(object)
    words = {stem(t) for t in normalize_label(predicate).split() if t not in _STOP and t not in _NOT_RELATION}
    return frozenset(words - entity) or relation_stems(predicate) - entity


def question_stems(query: str, entities: Iterable[str] = ()) -> frozenset[str]:
    """The relation stems a question asks about (module docstring).

    :param entities: normalized labels of the question's entities; their words are not relation words.
    """
    own = {t for e in entities for t in e.split()}
    return frozenset(
        stem(t)
        for t in normalize_label(query).split()
        if t not in _STOP and t not in _NOT_RELATION and t not in own and not t.isdigit()
    )


_WORDS = re.compile(r"[^\W\d_]+")


def lower_stems(text: str) -> frozenset[str]:
    """Relation stems of raw prose, names left out: the stems of its lower-case words less stop,
    question and function words ("Christopher Nolan directed Inception." → ``{"direct"}``; "Where
    was Christopher Nolan born?" → ``{"born"}``). For text whose entities are not known (a chunk's
    sentence, a question at rerank time): English prose capitalizes names, not relation words."""
    return frozenset(
        stem(w) for w in _WORDS.findall(text) if w.islower() and w not in _STOP and w not in _NOT_RELATION
    )


def asks_about(question: frozenset[str], statement: frozenset[str]) -> bool:
    """Whether a triple stating ``statement`` answers the relation a question asks (``question``)."""
    return not question.isdisjoint(statement)
