"""The default query/answer grounder: text -> entity mentions -> graph nodes (TRIAGE §4.3.1, DESIGN §4).

TRIAGE §4.3.1 resolves entities in two stages: an extraction step turns free text into candidate
mentions M_q, and a matching step maps each mention to a node or to ⊥ (γ_q); over-segmented
mentions of one entity are coalesced so each real-world entity counts once. Here:

1. **Gazetteer, longest match.** Every node id, display label and alias key is normalized with
   :func:`~triage_plugins.contract.graph_view.normalize_label` (casefold, NFKC, punctuation and underscores to
   spaces), diacritics are folded (``Franzén`` = ``Franzen``) and the :data:`STOP_WORDS` are
   dropped, giving a key of significant tokens (filed in a compact, hash-keyed
   :class:`~triage_plugins.kg.gazetteer.Gazetteer` that answers trie walks). The text is scanned left to
   right; at each token the longest key wins (``Christopher Nolan`` over ``Nolan``). Stop words in
   the text are skipped while matching, so ``the killing room`` finds *The Killing Room*.
2. **Quoted and bracketed spans** (``"Up"``, ``“…”``, ``'…'``, ``«…»``, ``[…]``) of at most 12
   words are one mention each, linked as a whole; they are never split. Square brackets are the
   MetaQA convention for marking the topic entity: when a text has bracketed spans they alone are
   its mentions (``bracketed_only=True``, the default), so ``the director of [Ninja]`` does not
   also ground the tag node *director*.
3. **Capitalized spans that match nothing** (``Steven Spielberg`` when the graph lacks him) become
   unresolved mentions grounded to ``None``, so QGR can fall below 1. :data:`FUNCTION_WORDS`
   (``Did``, ``What``, ``Who`` …) are trimmed from their ends and never a mention on their own.
4. An optional ``matcher(surface) -> node id | None`` (e.g. embedding similarity) is tried on every
   span without an exact match before it is left unresolved.
5. Mentions grounding to the same node are **coalesced**, keeping the first surface form;
   unresolved mentions are coalesced by normalized surface.

Decisions the paper leaves open:

* **Labels made only of stop/function words** (the films *Up*, *It*, *Her*, the band *The Who*)
  would match everywhere; they match only inside quotes/brackets, or when their tokens are
  capitalized and the span is not a lone sentence-initial word. In all-lower-case text
  (PathQuestion) they therefore match only when quoted.
* **Case as evidence.** When the text uses case (an upper-case letter outside sentence-initial
  position, as in ``Did Nolan direct ...``), a *single* lower-case token does not match a label
  only ever written with capitals: ``drama`` there is not the genre node *Drama*. Lower-case text
  (``who directed inception``) matches case-insensitively.
* **Ambiguity** (several entries share a key): explicit aliases come before node ids and labels;
  among either, an entry spelled exactly as the text (case included) wins, then one whose full
  token sequence (stop words included) equals the text's, then the node of higher degree, then the
  lexicographically smallest node id. An alias mapped to ``None`` is "known unlinked": the span is a mention
  grounded to ``None``. An alias whose target is not a node id is resolved through the ids and
  labels, else treated as unlinked.
* A capitalized run touching a matched mention (``Mr.`` in ``Mr. Nolan``) yields no extra
  unresolved mention. Scripts written without spaces (CJK) match only as whole tokens. A label
  with no letters or digits (the film *$*) matches only as a whole quoted/bracketed span.

The gazetteer is built once, in the constructor, as numpy arrays (about 20 bytes per id, label or
alias and no Python object for any; see ``benchmarks/RESULTS.md``, "10M-triple graph", for build
times); reuse one :class:`Grounder` for every text grounded against the same graph, and
:meth:`Grounder.updated` for a graph changed by :meth:`~triage_plugins.contract.graph_view.GraphView.with_changes`
(only the changed nodes are filed again).
"""

from __future__ import annotations

import logging
import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from triage_plugins.contract.errors import EventError
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.kg.citations import strip_citations
from triage_plugins.kg.gazetteer import KIND_SYMBOLIC, KIND_TOKENS, KIND_WEAK, Gazetteer, label_tokens
from triage_plugins.kg.gazetteer import Entry as _Entry
from triage_plugins.kg.gazetteer import fold as _fold

__all__ = ["FUNCTION_WORDS", "STOP_WORDS", "Grounder", "Grounding", "coalesce_mentions", "mention_key"]

log = logging.getLogger("triage.grounding")

#: Dropped from gazetteer keys and skipped in the text while matching.
STOP_WORDS: frozenset[str] = frozenset(
    """a an the of and or in on at to for from by with as into onto upon s""".split()  # noqa: SIM905
)

#: Question, auxiliary and pronoun words: never a mention on their own; a label made only of these
#: and stop words matches only when capitalized or quoted.
FUNCTION_WORDS: frozenset[str] = frozenset(
    """what which who whom whose when where why how whether did do does done doing is are was were be
    been being am has have had having can could will would should shall may might must i me my mine
    you your yours he him his she her hers it its we us our ours they them their theirs this that
    these those there here not no yes also please name list give tell show find if but so than then
    about after before between during over under up down out off both all any each some many much
    more most other such only own same very just t d ll m re ve don""".split()  # noqa: SIM905
)

_WEAK_WORDS = STOP_WORDS | FUNCTION_WORDS
_WORD = re.compile(r"[^\W_]+")
_WORD_ASCII = re.compile(r"[A-Za-z0-9]+")  # _WORD on ASCII text, faster
# Non-ASCII text: keep combining marks inside the word they modify (NFD input).
_WORD_UNI = re.compile(
    r"[^\W_](?:[^\W_]|[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f])*"
)
_QUOTED = re.compile(
    r'\[([^\[\]\n]+)\]|"([^"\n]+)"|“([^”\n]+)”|«([^»\n]+)»'
    r"|(?:^|(?<=[\s(\[{]))['‘]([^'’\s](?:[^'’\n]*[^'’\s])?)['’](?=$|[\s.,;:!?)\]}\"])"
)
_SENTENCE_END = re.compile(r"[.!?\n]")
_QUOTE_CHAR = re.compile("[\"“«\\['‘]")  # a character opening a _QUOTED span
_JOINERS = frozenset({"", "-", ".", "&"})
# Lower-case words that may sit inside a capitalized name; "and"/"or" end it ("Nolan or Jaws").
_PARTICLES = frozenset({"of", "the", "de", "la", "du", "del", "da", "van", "von", "der"})
_MAX_QUOTED_WORDS = 12
_ABBREV_MAX = 3  # a full stop after a capitalized token this short ("Mr.", "J.") ends no sentence

_Found = tuple[int, int, "str | None", bool]  # (start, end, node, resolved)


@dataclass(frozen=True, slots=True)
class Grounding:
    """M_q and γ_q of TRIAGE §4.3.1 for one text.

    :param mentions: coalesced surface mentions, in text order (M_q).
    :param grounding: mention -> node id, or ``None`` for an unresolved mention (γ_q).
    :param spans: ``(start, end)`` character offsets of each mention in the text (end exclusive).
    """

    mentions: tuple[str, ...] = ()
    grounding: dict[str, str | None] = field(default_factory=dict)
    spans: tuple[tuple[int, int], ...] = ()

    @property
    def nodes(self) -> tuple[str, ...]:
        """V_q^g: the distinct grounded node ids, in mention order."""
        return tuple(dict.fromkeys(n for m in self.mentions if (n := self.grounding[m]) is not None))

    @property
    def unresolved(self) -> tuple[str, ...]:
        """The mentions grounded to ⊥."""
        return tuple(m for m in self.mentions if self.grounding[m] is None)


class _Tokens(NamedTuple):
    norm: list[str]
    start: list[int]
    end: list[int]
    cap: list[bool]  # first character upper-case
    lower: list[bool]  # no upper-case character at all
    initial: list[bool]  # first token of a sentence
    zone: list[int]  # index of the quoted/bracketed span holding the token, or -1


def _label_tokens(text: str) -> tuple[str, ...]:
    return label_tokens(text)


def _content(full: tuple[str, ...]) -> tuple[str, ...]:
    return full if STOP_WORDS.isdisjoint(full) else tuple(t for t in full if t not in STOP_WORDS)


def _is_weak(full: tuple[str, ...]) -> bool:
    return _WEAK_WORDS.issuperset(full)


def _slot(full: tuple[str, ...], surface: str) -> tuple[str, tuple[str, ...]]:
    """Where an id, label or alias is filed: a label without letters or digits under its stripped
    surface, one made only of stop/function words under all its tokens, any other under its
    significant tokens (the longest-match keys)."""
    if not full:
        return KIND_SYMBOLIC, (surface.strip(),)
    if _is_weak(full):
        return KIND_WEAK, full
    return KIND_TOKENS, _content(full)


class Grounder:
    """Ground entity mentions in text to nodes of one graph (TRIAGE §4.3.1; see the module notes).

    :param graph: the graph whose node ids and display labels form the gazetteer.
    :param aliases: surface form -> node id, or ``None`` for a form known to be unlinked.
    :param matcher: fallback for spans without an exact match (e.g. embedding similarity); returns
        a node id of ``graph`` or ``None``.
    :param bracketed_only: when a text has ``[bracketed]`` spans, they alone are its mentions.
    """

    def __init__(
        self,
        graph: GraphView,
        aliases: Mapping[str, str | None] | None = None,
        *,
        matcher: Callable[[str], str | None] | None = None,
        bracketed_only: bool = True,
    ) -> None:
        if not isinstance(graph, GraphView):
            raise EventError("Grounder", "graph", f"must be a GraphView, got {type(graph).__name__}")
        if matcher is not None and not callable(matcher):
            raise EventError("Grounder", "matcher", f"must be callable or None, got {type(matcher).__name__}")
        self.graph = graph
        self.matcher = matcher
        self.bracketed_only = bracketed_only
        checked = self._check_aliases(aliases)
        self.aliases: Mapping[str, str | None] = MappingProxyType(checked)
        self._build(checked)

    # ------------------------------------------------------------------ gazetteer

    @staticmethod
    def _check_aliases(aliases: Mapping[str, str | None] | None) -> dict[str, str | None]:
        if aliases is None:
            return {}
        if not isinstance(aliases, Mapping):
            raise EventError("Grounder", "aliases", f"must be a mapping, got {type(aliases).__name__}")
        for key, value in aliases.items():
            if not isinstance(key, str) or not key.strip():
                raise EventError("Grounder", "aliases", f"alias keys must be non-blank strings, got {key!r}")
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise EventError("Grounder", "aliases", f"alias {key!r} must map to a node id or None")
        return dict(aliases)

    def _build(self, aliases: dict[str, str | None]) -> None:
        """File every node id and display label, then the aliases (their targets resolved through
        the ids and labels alone) in a compact :class:`~triage_plugins.kg.gazetteer.Gazetteer`."""
        self._gaz = Gazetteer(self.graph, _slot)
        self._gaz.add_aliases([(surface, self._alias_target(target)) for surface, target in aliases.items()])
        log.debug(
            "gazetteer: %d entries (%d bytes) from %d nodes, %d aliases",
            len(self._gaz),
            self._gaz.nbytes(),
            len(self.graph.nodes),
            len(aliases),
        )

    def updated(self, graph: GraphView) -> Grounder:
        """A grounder of ``graph`` with this one's aliases and settings, grounding as
        ``Grounder(graph, …)`` does. When ``graph`` was made from this one's graph by
        :meth:`~triage_plugins.contract.graph_view.GraphView.with_changes`, only the changed nodes
        are filed again (and the aliases, whose targets may have changed); else it is built whole."""
        if not isinstance(graph, GraphView):
            raise EventError("Grounder", "graph", f"must be a GraphView, got {type(graph).__name__}")
        gaz = self._gaz.updated(graph)
        if gaz is None:
            return Grounder(
                graph, dict(self.aliases), matcher=self.matcher, bracketed_only=self.bracketed_only
            )
        out = object.__new__(Grounder)
        out.graph, out.matcher, out.bracketed_only = graph, self.matcher, self.bracketed_only
        out.aliases = self.aliases
        out._gaz = gaz
        gaz.add_aliases([(surface, out._alias_target(target)) for surface, target in self.aliases.items()])
        log.debug("gazetteer of %r updated from the previous graph's", graph)
        return out

    def _alias_target(self, target: str | None) -> str | None:
        if target is None or self.graph.has_node(target):
            return target
        entry = self._lookup(target)
        if entry is None:
            log.debug("alias target %r is not a node of the graph: treated as unlinked", target)
            return None
        return entry.node

    # ------------------------------------------------------------------ linking

    def _lookup(self, surface: str) -> _Entry | None:
        """Exact normalized match of a whole surface form."""
        surface = surface.strip()
        full = _label_tokens(surface)
        entries = self._gaz.entries(*_slot(full, surface))
        if not entries:
            return None
        return min(
            enumerate(entries),
            key=lambda ie: (ie[1].rank, ie[1].surface != surface, ie[1].full != full, ie[0]),
        )[1]

    def link(self, surface: str, *, use_matcher: bool = False) -> str | None:
        """The node one surface form names: exact normalized match through ids, labels and aliases.

        For answer entities and keyword lists. ``None`` when nothing matches or the form is a
        known-unlinked alias; with ``use_matcher=True`` the matcher is tried before giving up.
        """
        if not isinstance(surface, str):
            raise EventError("Grounder", "surface", f"must be a string, got {type(surface).__name__}")
        entry = self._lookup(surface)
        if entry is not None:
            return entry.node
        return self._match(surface) if use_matcher and surface.strip() else None

    def _match(self, surface: str) -> str | None:
        if self.matcher is None:
            return None
        node = self.matcher(surface)
        if node is not None and not self.graph.has_node(node):
            log.warning("matcher returned %r for %r, which is not a node of the graph", node, surface)
            return None
        return node

    # ------------------------------------------------------------------ grounding

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
        toks = _tokenize(text, zones)
        norm, cap, tzone = toks.norm, toks.cap, toks.zone
        n = len(norm)
        cased = any(not lo and not ini for lo, ini in zip(toks.lower, toks.initial, strict=True))
        consumed = [False] * n
        zone_seen = [False] * len(zones)
        gaz = self._gaz
        has_prefix, weak = gaz.has_prefix, gaz.weak_max
        i = 0
        while i < n:
            z = tzone[i]
            if z < 0:
                # no token key starts here and no weak label can: nothing to look up (as _longest finds)
                t = norm[i]
                if (t in STOP_WORDS or not has_prefix((t,))) and not (weak and cap[i] and t in _WEAK_WORDS):
                    i += 1
                    continue
            else:
                zone_seen[z] = True
                if (hit := self._ground_zone(text, *zones[z])) is not None:
                    found.append(hit)
                while i < n and tzone[i] == z:
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

    def ground_answer(self, text: str) -> Grounding:
        """:meth:`ground` for a generated answer: citation markers and a trailing reference list
        (:mod:`triage_plugins.kg.citations`) are blanked first, so ``[1]`` or a cited document
        title is never an answer mention; spans still index ``text``."""
        if not isinstance(text, str):
            raise EventError("Grounder", "text", f"must be a string, got {type(text).__name__}")
        return self.ground(strip_citations(text))

    def _ground_zone(self, text: str, start: int, end: int) -> _Found | None:
        """A quoted/bracketed span as one mention; ``None`` for a span of symbols naming nothing."""
        surface = text[start:end]
        entry = self._lookup(surface)
        if entry is not None:
            return (start, end, entry.node, True)
        return (start, end, None, False) if _WORD_UNI.search(surface) else None

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
        # a weak key is made only of stop/function words: none starts at any other token
        if gaz.weak_max and toks.cap[i] and norm[i] in _WEAK_WORDS:
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
        if True not in toks.cap:
            return out
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

    def _coalesce(self, text: str, found: list[_Found]) -> Grounding:
        """Fall back to the matcher, then keep one mention per node (first surface form wins)."""
        pairs = [
            (text[start:end], node if resolved else self._match(text[start:end]))
            for start, end, node, resolved in found
        ]
        return coalesce_mentions(pairs, [(start, end) for start, end, _, _ in found])


def mention_key(surface: str, node: str | None) -> tuple[bool, str]:
    """What coalescing compares: the node a mention grounds to, else its normalized surface."""
    return (True, node) if node is not None else (False, normalize_label(surface) or surface)


def coalesce_mentions(
    found: Iterable[tuple[str, str | None]], spans: Sequence[tuple[int, int]] | None = None
) -> Grounding:
    """``(surface, node)`` mentions, from one source or several (a grounder's, a framework's
    keywords), coalesced: one per node, the first surface form kept; unresolved ones by normalized
    surface (TRIAGE §4.3.1). ``spans``, when given, are the mentions' offsets, kept alongside."""
    mentions: list[str] = []
    grounding: dict[str, str | None] = {}
    kept: list[tuple[int, int]] = []
    seen: set[tuple[bool, str]] = set()
    offsets = list(spans) if spans is not None else None
    for i, (surface, node) in enumerate(found):
        key = mention_key(surface, node)
        if key in seen or surface in grounding:
            continue
        seen.add(key)
        mentions.append(surface)
        grounding[surface] = node
        if offsets is not None:
            kept.append(offsets[i])
    return Grounding(tuple(mentions), grounding, tuple(kept))


def _zones(text: str) -> tuple[list[tuple[int, int]], list[bool]]:
    """Character ranges (quotes excluded, whitespace trimmed) of short quoted/bracketed spans, and
    whether each is a square-bracketed one."""
    zones: list[tuple[int, int]] = []
    brackets: list[bool] = []
    if _QUOTE_CHAR.search(text) is None:
        return zones, brackets
    for m in _QUOTED.finditer(text):
        g = next(k for k in range(1, 6) if m.group(k) is not None)
        start, end = m.span(g)
        inner = text[start:end]
        if inner.strip() and len(_WORD_UNI.findall(inner)) <= _MAX_QUOTED_WORDS:
            zones.append((start + len(inner) - len(inner.lstrip()), end - len(inner) + len(inner.rstrip())))
            brackets.append(g == 1)
    return zones, brackets


def _tokenize(text: str, zones: list[tuple[int, int]]) -> _Tokens:
    """Word tokens of ``text``: normalized forms, offsets, case, sentence and zone flags."""
    if text.isascii():
        return _tokenize_ascii(text, zones)
    toks = _Tokens([], [], [], [], [], [], [])
    pattern = _WORD_UNI
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


def _tokenize_ascii(text: str, zones: list[tuple[int, int]]) -> _Tokens:
    """:func:`_tokenize` for ASCII text, where every word is one token, its lower-case form."""
    raws = _WORD_ASCII.findall(text)
    n = len(raws)
    start: list[int] = []
    end: list[int] = []
    pos = 0
    find = text.find
    for raw in raws:
        # only non-word characters lie between the last word and this one: its first occurrence
        pos = find(raw, pos)
        start.append(pos)
        pos += len(raw)
        end.append(pos)
    norm = [raw.lower() for raw in raws]
    cap = [raw[0].isupper() for raw in raws]
    lower = [raw == low for raw, low in zip(raws, norm, strict=True)]
    initial = [False] * n
    if n:
        initial[0] = True
        # A sentence starts after a gap holding one of [.!?\n] (never inside a word), unless the word
        # before the gap is a short capitalized one ("Mr."): mark the token after each such stop.
        for m in _SENTENCE_END.finditer(text):
            k = bisect_right(start, m.start())
            if 0 < k < n and not (cap[k - 1] and len(raws[k - 1]) <= _ABBREV_MAX):
                initial[k] = True
    if zones:
        zone = []
        nz, zi = len(zones), 0
        for s in start:
            while zi < nz and zones[zi][1] <= s:
                zi += 1
            zone.append(zi if zi < nz and zones[zi][0] <= s else -1)
    else:
        zone = [-1] * n
    return _Tokens(norm, start, end, cap, lower, initial, zone)


_SHARED: OrderedDict[tuple[int, tuple[tuple[str, str | None], ...]], tuple[GraphView, Grounder]] = (
    OrderedDict()
)
_SHARED_LOCK = threading.Lock()
_SHARED_SIZE = 4


def shared_grounder(
    graph: GraphView, aliases: Mapping[str, str | None] | None = None, *, previous: Grounder | None = None
) -> Grounder:
    """A :class:`Grounder` for ``graph`` shared by every caller (the default plugins, pipelines).

    Building the gazetteer is a pass over every node id and label; plugins that each need one for the
    same graph event get the same read-only instance. The last few graphs are kept. A graph made by
    :meth:`~triage_plugins.contract.graph_view.GraphView.with_changes` from one whose grounder is
    kept (or is ``previous``, with the same aliases) gets that grounder :meth:`~Grounder.updated`.
    """
    alias_key = tuple(sorted((aliases or {}).items()))
    key = (id(graph), alias_key)
    delta = getattr(graph, "delta", None)  # not a view: the Grounder says so below
    parent = delta.parent if delta is not None else None
    with _SHARED_LOCK:
        hit = _SHARED.get(key)
        if hit is not None and hit[0] is graph:
            _SHARED.move_to_end(key)
            return hit[1]
        bases = [g for (_, a), (_, g) in _SHARED.items() if a == alias_key and g.graph.serial == parent]
    if previous is not None and _is_shared_like(previous, alias_key) and previous.graph.serial == parent:
        bases.append(previous)
    grounder = bases[-1].updated(graph) if bases else Grounder(graph, aliases)
    with _SHARED_LOCK:
        _SHARED[key] = (graph, grounder)
        _SHARED.move_to_end(key)
        while len(_SHARED) > _SHARED_SIZE:
            _SHARED.popitem(last=False)
    return grounder


def _is_shared_like(grounder: Grounder, alias_key: tuple[tuple[str, str | None], ...]) -> bool:
    """``grounder`` has the settings :func:`shared_grounder` builds with, and these aliases."""
    return (
        grounder.matcher is None
        and grounder.bracketed_only
        and tuple(sorted(grounder.aliases.items())) == alias_key
    )
