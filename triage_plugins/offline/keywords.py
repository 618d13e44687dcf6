"""The names a question mentions, as every offline stand-in LLM reads them (DESIGN §5; #18).

Each framework's stand-in LLM answers a keyword prompt (a framework's keyword extraction or
synonym expansion) with the capitalized names of the question. They read them with
this one function, so rows of ``triage compare`` differ by retrieval only: a possessive
(``"Jonathan Dunmore's"``, ``"Dunmore’s"``, ``"Jones'"``) names ``Jonathan Dunmore`` / ``Jones``,
and a leading question word (``"Where"``, ``"Who"``) or a lone article (``"The sex of X"``) is
not a name.
"""

from __future__ import annotations

import re

from triage_plugins.offline.templates import NAME

__all__ = ["QUESTION_WORDS", "query_names"]

_NAME = re.compile(NAME.replace(r"[\w'&-]", r"[\w'’&-]"))
_POSSESSIVE = re.compile(r"(?:['’]s|(?<=s)['’])$")
_ARTICLES = frozenset({"a", "an", "the"})  # alone not a name ("The sex of X"); "The Silent Harbour" is
#: words that open a question; dropped from the front of a capitalized run
QUESTION_WORDS = frozenset(
    [
        "who",
        "whom",
        "whose",
        "what",
        "where",
        "when",
        "which",
        "why",
        "how",
        "did",
        "does",
        "do",
        "is",
        "are",
        "was",
        "were",
        "tell",
        "name",
        "list",
    ]
)


def query_names(text: str) -> list[str]:
    """The capitalized names ``text`` mentions, in order, each once, possessives stripped."""
    names: dict[str, None] = {}
    for run in _NAME.findall(text):
        words = [_POSSESSIVE.sub("", w) for w in run.split()]
        while words and words[0].casefold() in QUESTION_WORDS:
            words = words[1:]
        words = [w for w in words if w]
        if words and not (len(words) == 1 and words[0].casefold() in _ARTICLES):
            names.setdefault(" ".join(words))
    return list(names)
