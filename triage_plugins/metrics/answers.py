"""The one answer-correctness rule (the *gold-hit rule*): when does an answer name a gold answer?

Every consumer of gold answers uses it: the gold feedback of every ``triage compare`` runner
(through :func:`triage_plugins.adapter_kit.runner.gold_hit`), ``evolve-bench``'s ACC, the demo, and
the gold usage metrics Hits@1 and F1 (:mod:`triage_plugins.metrics.usage`). Rows of different
frameworks therefore differ by what they retrieved and said, not by how they were judged.

Normalization (:func:`normalize_answer`), applied to both sides:

* citations are ignored (:func:`~triage_plugins.kg.citations.strip_citations`: ``[1]``, ``[^1]``,
  ``[KG]``, a trailing ``### References`` section), so a document title listed as a source is not
  an answer;
* a possessive ``'s`` is dropped (``Dunmore's`` → ``dunmore``);
* case, Unicode form, punctuation and underscores (:func:`~triage_plugins.contract.graph_view.normalize_label`):
  a framework's upper-cased id ``OSTRELIA`` and a reader's ``Port vellan`` equal ``Ostrelia`` and
  ``Port Vellan``;
* the articles *a*, *an*, *the* are dropped as words.

A gold answer (a node id) is named when one of its *forms* — the id, the node's display label and
every alias the graph maps to it — is a whole phrase (word boundaries) of the normalized answer
(EvoRAG §6.2's ACC, "the response contains a gold answer"), or, for entity sets (F1), when a
predicted entity has one of its forms.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from triage_plugins.contract.events import Gold
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.kg.citations import strip_citations
from triage_plugins.kg.grounding import FUNCTION_WORDS, STOP_WORDS

__all__ = ["AnswerRule", "gold_hit", "normalize_answer"]

_ARTICLES = frozenset(("a", "an", "the"))
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b", re.IGNORECASE)


@lru_cache(maxsize=8192)
def _tokens(text: str) -> tuple[str, ...]:
    return tuple(normalize_label(_POSSESSIVE.sub("", text)).split())


@lru_cache(maxsize=8192)
def _normalize(text: str) -> str:
    """Articles dropped, unless what remains is only function or stop words: *The Who* stays
    ``the who`` (else it would be the word "who" of every question)."""
    tokens = _tokens(text)
    kept = [t for t in tokens if t not in _ARTICLES]
    if not kept or all(t in FUNCTION_WORDS or t in STOP_WORDS for t in kept):
        return " ".join(tokens)
    return " ".join(kept)


def normalize_answer(text: str) -> str:
    """``text`` as the gold-hit rule compares it: citations, possessives, case, punctuation and
    articles removed (module docstring)."""
    return _normalize(strip_citations(text))


class AnswerRule:
    """The gold-hit rule over one graph's labels and aliases (both optional).

    :param graph: display labels of the gold nodes (``GraphView.label``).
    :param aliases: surface form -> node id (a ``GraphEvent``'s aliases); forms mapped to ``None``
        are ignored.
    """

    def __init__(
        self, graph: GraphView | None = None, aliases: Mapping[str, str | None] | None = None
    ) -> None:
        self._graph = graph
        self._aliases: dict[str, list[str]] = {}
        for surface, node in (aliases or {}).items():
            if node is not None:
                self._aliases.setdefault(node, []).append(surface)
        self._forms: dict[str, frozenset[str]] = {}

    def forms(self, gold: str) -> frozenset[str]:
        """The normalized forms of the gold answer ``gold``: id, label and aliases (non-empty ones)."""
        out = self._forms.get(gold)
        if out is None:
            surfaces = [gold, *self._aliases.get(gold, ())]
            graph = self._graph
            if graph is not None and graph.has_node(gold):
                surfaces.append(graph.label(gold))
            out = frozenset(f for f in map(_normalize, surfaces) if f)
            self._forms[gold] = out
        return out

    def hits(self, answer: str, gold: Gold | Iterable[str]) -> set[str]:
        """The gold answers that ``answer`` names as a whole phrase of its normalized text."""
        answers = gold.answers if isinstance(gold, Gold) else gold
        clean = strip_citations(answer)
        full = " ".join(_tokens(clean))
        if not full:
            return set()
        # a form matches the answer without its articles, or (for a form that kept its articles,
        # such as "the who") the answer with them
        texts = (f" {' '.join(t for t in full.split() if t not in _ARTICLES)} ", f" {full} ")
        return {g for g in answers if any(f" {f} " in t for f in self.forms(g) for t in texts)}

    def hit(self, answer: str, gold: Gold | Iterable[str]) -> bool:
        """Whether ``answer`` names at least one gold answer (feedback, ACC, Hits@1's text test)."""
        return bool(self.hits(answer, gold))

    def same(self, entity: str, gold: str) -> bool:
        """Whether the entity (a node id or surface) *is* the gold answer: equal ids, or a shared
        normalized form (the entity's own forms against the gold's)."""
        return entity == gold or not self.forms(entity).isdisjoint(self.forms(gold))


_PLAIN = AnswerRule()


def gold_hit(
    answer: str,
    gold: Gold | Iterable[str],
    *,
    graph: GraphView | None = None,
    aliases: Mapping[str, str | None] | None = None,
) -> bool:
    """The gold-hit rule: whether ``answer`` names a gold answer (module docstring)."""
    rule = _PLAIN if graph is None and not aliases else AnswerRule(graph, aliases)
    return rule.hit(answer, gold)
