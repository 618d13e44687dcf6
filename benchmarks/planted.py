"""Planted false facts in the real frameworks: can users trust feedback learning? (issue #30)

A small film corpus of our own, with planted false facts among true ones, and one driver per
framework that runs the *real* LightRAG, Microsoft GraphRAG and LlamaIndex ``PropertyGraphIndex``
offline (only the LLM, the embedder and the tokenizer are the repository's deterministic stand-ins:
``triage_lightrag.testing``, ``triage_graphrag.offline``, ``triage_llamaindex.offline``), instrumented
as their adapter docs say, with reweighting on (``TriageConfig(reweight=True, unit=...)``).

**Corpus** (:data:`DOCUMENTS`). Every sentence is one fact in a shape the offline extractor
(:mod:`triage_plugins.offline.extractor`, shared by the three stand-in LLMs) reads back
("X directed F.", "X starred in F.", "X wrote the screenplay of F.", "F was written by X.",
"X was born in C.", "F was released in Y."); :func:`check_corpus` proves it. Each planted (false)
fact sits in a document of its own, so a *planted chunk* states nothing but falsehood. Some planted
facts have a *true twin* — a true fact on the same entity pair ("Sylvester Stallone wrote the
screenplay of Rocky." beside the planted "Sylvester Stallone directed Rocky.") — and some have none
("Steven Spielberg directed Inception.").

**Questions** (:data:`QUESTIONS`). A training set (rated by the oracle every round) and a held-out
set (never rated): paraphrases and inverse questions of rated ones, and *control* questions of
relation types nobody rated ("Who starred in F?", "When was F released?"). Feedback is the oracle's:
1.0 when the answer names a gold answer (:func:`triage_plugins.metrics.answers.gold_hit`), else 0.0.

**Protocol** (:func:`run`). Round 0 is static: reweighting on, no feedback yet; the training
questions are asked (not rated) and the held-out ones measured. Rounds 1..N: every training
question is asked and rated (feedback right after its answer, then ``flush()``), then the held-out
set is measured. Recorded per round: training / held-out / control accuracy, the learned raw score
(init 100) of every planted unit and of every true twin's unit (facts mapped to the framework's unit
ids by subject, object and predicate text, through the graph and extraction events the adapter
emits), how many true units fell below 100 (collateral), the largest planted score, and how many
answers repeat a planted fact (*misled*: round 0 must have some, or nothing is tested).

**Merged rows.** LightRAG keys a relation by its (sorted) entity pair and GraphRAG by its ordered
pair, so a planted fact and its true twin are *one* unit there (:attr:`Report.shared`): "no planted
fact rises" and "no twin falls" then meet on one score. LlamaIndex keys a triple by
``subject|label|object``: twins are separate units.

**Configurations** (:data:`CONFIGS`): ``lightrag`` (``aquery``, hybrid mode as in the README),
``lightrag-global``, ``graphrag`` (local search), ``llamaindex`` (no cut), ``llamaindex-top3``
(``TriagePostprocessor(top_n=3)``) and ``llamaindex-reader-top3`` (the same with the offline LLM's
relation-aware reader); each driver's docstring says how its stand-in reader picks an answer.
:func:`run_isolated` runs them in a fresh interpreter with ``PYTHONHASHSEED`` fixed (LlamaIndex
orders triplets by iterating a set of strings).

The learner is reached through public APIs only (``TriageManager.learned_scores``, the adapters'
``feedback`` / ``flush``), so a change to its credit rule shows here without touching this file.

Use: ``python benchmarks/bench_planted.py`` (tables), ``tests/adapters/test_planted_learning.py``
(the checks of issue #30), or from Python ``run_isolated(["lightrag"], ("triple",), rounds=3)`` /
``run("lightrag", "triple", rounds=3)`` (this interpreter).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import Chunk, Triple
from triage_plugins.contract.graph_view import normalize_label
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.feedback.statements import chunk_statements, statement_key, statements
from triage_plugins.kg.relations import lower_stems, statement_stems
from triage_plugins.metrics.answers import gold_hit
from triage_plugins.offline.extractor import extract_records
from triage_plugins.runtime.manager import TriageManager

__all__ = [
    "CONFIGS",
    "DOCUMENTS",
    "FACTS",
    "FRAMEWORKS",
    "HELDOUT",
    "INIT",
    "PLANTED",
    "QUESTIONS",
    "TRAIN",
    "TWINS",
    "Checks",
    "Fact",
    "GraphRAGDriver",
    "Isolated",
    "LightRAGDriver",
    "LlamaIndexDriver",
    "Question",
    "Report",
    "RoundRow",
    "check_corpus",
    "checks",
    "framework_available",
    "map_units",
    "misleading_answer",
    "run",
    "run_isolated",
    "twins",
]

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm (GraphRAG) stays offline
os.environ.setdefault("HF_HUB_OFFLINE", "1")

INIT = 100.0
"""The learner's initial raw score (EvoRAG §4)."""

# --------------------------------------------------------------------------- corpus


@dataclass(frozen=True)
class Fact:
    """One sentence of the corpus, read back as ``(subject, predicate, object)`` by the offline extractor.

    :param planted: a false fact (planted); ``False`` for a true one.
    """

    sentence: str
    planted: bool = False

    @property
    def spo(self) -> tuple[str, str, str]:
        records = extract_records(self.sentence)
        if len(records) != 1:
            raise ValueError(f"the offline extractor reads {len(records)} facts from {self.sentence!r}")
        r = records[0]
        return r.subject, r.predicate, r.object

    @property
    def pair(self) -> frozenset[str]:
        s, _, o = self.spo
        return frozenset((normalize_label(s), normalize_label(o)))

    @property
    def label(self) -> str:
        return self.sentence.rstrip(".")


def _true(*sentences: str) -> tuple[Fact, ...]:
    return tuple(Fact(s) for s in sentences)


def _planted(sentence: str) -> tuple[Fact, ...]:
    return (Fact(sentence, planted=True),)


#: The documents, in insertion order; each is a tuple of facts (one sentence each). A planted fact
#: is alone in its document. Some planted documents come before the film's own document, some after
#: (whether the planted statement is read first decides the static answer in some frameworks).
DOCUMENTS: tuple[tuple[Fact, ...], ...] = (
    _planted("Steven Spielberg directed Inception."),  # no twin
    _true(
        "Christopher Nolan directed Inception.",
        "Leonardo DiCaprio starred in Inception.",
        "Inception was released in 2010.",
    ),
    _true(
        "Christopher Nolan directed Interstellar.",
        "Matthew McConaughey starred in Interstellar.",
        "Interstellar was written by Jonathan Nolan.",
    ),
    _true("Christopher Nolan was born in London.", "Emma Thomas was born in London."),
    _planted("Christopher Nolan was born in Paris."),  # no twin
    _planted("Ridley Scott directed Titanic."),  # no twin
    _true(
        "James Cameron directed Titanic.",
        "Kate Winslet starred in Titanic.",
        "Titanic was released in 1997.",
    ),
    _true(
        "James Cameron directed Avatar.",
        "Sam Worthington starred in Avatar.",
        "Avatar was released in 2009.",
    ),
    _true(
        "Ridley Scott directed Alien.",
        "Sigourney Weaver starred in Alien.",
        "Alien was released in 1979.",
    ),
    _planted("Harrison Ford directed Blade Runner."),  # twin: Harrison Ford starred in Blade Runner
    _true(
        "Ridley Scott directed Blade Runner.",
        "Harrison Ford starred in Blade Runner.",
        "Blade Runner was released in 1982.",
    ),
    _true(
        "Ridley Scott directed Gladiator.",
        "Russell Crowe starred in Gladiator.",
        "Ridley Scott was born in South Shields.",
    ),
    _true(
        "Steven Spielberg directed Jaws.",
        "Roy Scheider starred in Jaws.",
        "Jaws was written by Peter Benchley.",
    ),
    _planted("Jaws was written by Michael Crichton."),  # no twin
    _true(
        "Steven Spielberg directed Jurassic Park.",
        "Sam Neill starred in Jurassic Park.",
        "Jurassic Park was written by Michael Crichton.",
    ),
    _planted("Sylvester Stallone directed Rocky."),  # twins: Stallone wrote / starred in Rocky
    _true(
        "John Avildsen directed Rocky.",
        "Sylvester Stallone starred in Rocky.",
        "Sylvester Stallone wrote the screenplay of Rocky.",
    ),
    _true(
        "Gus Van Sant directed Good Will Hunting.",
        "Robin Williams starred in Good Will Hunting.",
        "Ben Affleck wrote the screenplay of Good Will Hunting.",
    ),
    _planted("Ben Affleck directed Good Will Hunting."),  # twin: Affleck wrote Good Will Hunting
    _true(
        "Clint Eastwood directed Unforgiven.",
        "Gene Hackman starred in Unforgiven.",
        "Unforgiven was written by David Peoples.",
    ),
    _planted("Clint Eastwood wrote the screenplay of Unforgiven."),  # twin: Eastwood directed Unforgiven
    _true(
        "Quentin Tarantino directed Pulp Fiction.",
        "John Travolta starred in Pulp Fiction.",
        "Pulp Fiction was released in 1994.",
    ),
    _true(
        "Quentin Tarantino directed Reservoir Dogs.",
        "Harvey Keitel starred in Reservoir Dogs.",
        "Quentin Tarantino was born in Knoxville.",
    ),
    _true("Steven Spielberg was born in Cincinnati.", "James Cameron was born in Kapuskasing."),
    _true("Harrison Ford was born in Chicago.", "Clint Eastwood was born in San Francisco."),
    _true(
        "Martin Scorsese directed Goodfellas.",
        "Ray Liotta starred in Goodfellas.",
        "Goodfellas was released in 1990.",
    ),
    _true(
        "Francis Coppola directed The Godfather.",
        "Marlon Brando starred in The Godfather.",
        "The Godfather was written by Mario Puzo.",
    ),
)

FACTS: tuple[Fact, ...] = tuple(f for doc in DOCUMENTS for f in doc)
TEXTS: tuple[str, ...] = tuple(" ".join(f.sentence for f in doc) for doc in DOCUMENTS)
PLANTED: tuple[Fact, ...] = tuple(f for f in FACTS if f.planted)


def twins(fact: Fact) -> tuple[Fact, ...]:
    """The true facts on the same entity pair as ``fact``."""
    return tuple(f for f in FACTS if not f.planted and f is not fact and f.pair == fact.pair)


TWINS: tuple[Fact, ...] = tuple(dict.fromkeys(t for p in PLANTED for t in twins(p)))


@dataclass(frozen=True)
class Question:
    """A question with its gold answers.

    :param split: ``"train"`` (rated every round) or ``"heldout"`` (never rated).
    :param relation: the relation asked (the offline extractor's predicate).
    :param control: held out *and* of a relation type no training question asks.
    :param about: the planted fact that competes with the gold answer, if any.
    """

    text: str
    gold: tuple[str, ...]
    split: str
    relation: str
    about: str | None = None

    @property
    def control(self) -> bool:
        return self.split == "heldout" and self.relation not in RATED_RELATIONS


def _q(
    text: str, gold: str | tuple[str, ...], split: str, relation: str, about: str | None = None
) -> Question:
    return Question(text, (gold,) if isinstance(gold, str) else gold, split, relation, about)


_D, _W, _B, _S, _R = "directed_by", "written_by", "born_in", "starred_actors", "release_year"

QUESTIONS: tuple[Question, ...] = (
    # ---- training (rated): directed, written, born in
    _q("Who directed Inception?", "Christopher Nolan", "train", _D, "Steven Spielberg directed Inception"),
    _q("Who directed Titanic?", "James Cameron", "train", _D, "Ridley Scott directed Titanic"),
    _q("Who directed Rocky?", "John Avildsen", "train", _D, "Sylvester Stallone directed Rocky"),
    _q("Who directed Blade Runner?", "Ridley Scott", "train", _D, "Harrison Ford directed Blade Runner"),
    _q("Who directed Unforgiven?", "Clint Eastwood", "train", _D),  # true twin of a planted fact
    _q("Who directed Jaws?", "Steven Spielberg", "train", _D),  # the answer a planted fact names
    _q("Who directed Alien?", "Ridley Scott", "train", _D),  # the answer a planted fact names
    _q("Who wrote Rocky?", "Sylvester Stallone", "train", _W),  # true twin of a planted fact
    _q("Who wrote Good Will Hunting?", "Ben Affleck", "train", _W),  # true twin of a planted fact
    _q("Who wrote Unforgiven?", "David Peoples", "train", _W, "Clint Eastwood wrote the screenplay of Unforgiven"),
    _q("Who wrote Jaws?", "Peter Benchley", "train", _W, "Jaws was written by Michael Crichton"),
    _q("Who wrote Jurassic Park?", "Michael Crichton", "train", _W),  # the answer a planted fact names
    _q("Where was Christopher Nolan born?", "London", "train", _B, "Christopher Nolan was born in Paris"),
    _q("Where was Ridley Scott born?", "South Shields", "train", _B),
    # ---- held out: paraphrases and inverse questions of rated ones
    _q("Who was the director of Inception?", "Christopher Nolan", "heldout", _D, "Steven Spielberg directed Inception"),
    _q("Who was the director of Titanic?", "James Cameron", "heldout", _D, "Ridley Scott directed Titanic"),
    _q("Who is the director of Rocky?", "John Avildsen", "heldout", _D, "Sylvester Stallone directed Rocky"),
    _q("Who is the director of Good Will Hunting?", "Gus Van Sant", "heldout", _D, "Ben Affleck directed Good Will Hunting"),
    _q("Which film did Steven Spielberg direct?", ("Jaws", "Jurassic Park"), "heldout", _D, "Steven Spielberg directed Inception"),
    _q("Which film did Ridley Scott direct?", ("Alien", "Blade Runner", "Gladiator"), "heldout", _D, "Ridley Scott directed Titanic"),
    _q("Who was the screenwriter of Unforgiven?", "David Peoples", "heldout", _W, "Clint Eastwood wrote the screenplay of Unforgiven"),
    _q("Who was the writer of Jaws?", "Peter Benchley", "heldout", _W, "Jaws was written by Michael Crichton"),
    _q("What is the birthplace of Christopher Nolan?", "London", "heldout", _B, "Christopher Nolan was born in Paris"),
    # ---- held out, control: relation types nobody rated
    _q("Who starred in Blade Runner?", "Harrison Ford", "heldout", _S),  # the planted fact's twin
    _q("Who starred in Rocky?", "Sylvester Stallone", "heldout", _S),  # the planted fact's twin
    _q("Who starred in Inception?", "Leonardo DiCaprio", "heldout", _S),
    _q("Who starred in Titanic?", "Kate Winslet", "heldout", _S),
    _q("Who starred in Good Will Hunting?", "Robin Williams", "heldout", _S),
    _q("Who starred in Jaws?", "Roy Scheider", "heldout", _S),
    _q("When was Titanic released?", "1997", "heldout", _R),
    _q("When was Blade Runner released?", "1982", "heldout", _R),
)  # fmt: skip

RATED_RELATIONS: frozenset[str] = frozenset(q.relation for q in QUESTIONS if q.split == "train")
TRAIN: tuple[Question, ...] = tuple(q for q in QUESTIONS if q.split == "train")
HELDOUT: tuple[Question, ...] = tuple(q for q in QUESTIONS if q.split == "heldout")


def check_corpus() -> list[str]:
    """Problems with the corpus (empty when sound): every sentence reads back as exactly one fact,
    no sentence twice, every gold answer stated by a true fact, every question's ``about`` a planted
    fact, and every planted fact competing in some question ("Ben Affleck directed Good Will Hunting"
    competes only in a held-out one: training reaches it through its true twin, "Who wrote Good Will
    Hunting?")."""
    problems = []
    for f in FACTS:
        try:
            f.spo  # noqa: B018
        except ValueError as exc:
            problems.append(str(exc))
    stated = {normalize_label(x) for f in FACTS if not f.planted for x in (f.spo[0], f.spo[2])}
    for q in QUESTIONS:
        for g in q.gold:
            if normalize_label(g) not in stated:
                problems.append(f"{q.text!r}: gold {g!r} is stated by no true fact")
        if q.about is not None and q.about not in {p.label for p in PLANTED}:
            problems.append(f"{q.text!r}: {q.about!r} is not a planted fact")
    if len({f.sentence for f in FACTS}) != len(FACTS):
        problems.append("a sentence appears twice")
    asked = {q.about for q in QUESTIONS}
    problems += [f"planted {p.label!r} competes in no question" for p in PLANTED if p.label not in asked]
    return problems


# --------------------------------------------------------------------------- results


def misleading_answer(q: Question) -> str | None:
    """The wrong answer ``q``'s planted fact gives: its endpoint the question does not name."""
    if q.about is None:
        return None
    fact = next(p for p in PLANTED if p.label == q.about)
    s, _, o = fact.spo
    asked = f" {normalize_label(q.text)} "
    return o if f" {normalize_label(s)} " in asked else s


@dataclass
class RoundRow:
    """One round's measurements (round 0: static, before any feedback).

    :param planted: planted fact -> learned raw score of its unit (the largest, when several).
    :param twins: true twin -> learned raw score of its unit (the smallest, when several).
    :param collateral: true units (stating no planted fact) whose score fell below :data:`INIT`.
    :param misled: questions (either set) answered with their planted fact's wrong answer.
    :param answers: question -> answer, the last time it was asked in this round.
    """

    round: int
    train_acc: float
    heldout_acc: float
    control_acc: float
    planted: dict[str, float]
    twins: dict[str, float]
    collateral: int
    max_planted: float
    min_twin: float
    misled: int
    scored: int
    seconds: float
    answers: dict[str, str] = field(default_factory=dict)


@dataclass
class Report:
    """One configuration run with one learner unit.

    :param cut: the configuration cuts the context (top_n / top_k / token budget): the control
        check applies.
    :param units: fact -> the framework's unit ids (planted facts and true twins).
    :param shared: planted facts whose unit also states a true twin (a merged row: the pair is one
        unit in the framework, so "planted never rises" and "twin never falls" meet on one score).
    :param true_units: how many units state no planted fact.
    """

    config: str
    framework: str
    setup: str
    unit: str
    cut: bool
    rows: list[RoundRow]
    units: dict[str, list[str]]
    shared: list[str]
    true_units: int
    notes: list[str]
    build_seconds: float
    seconds: float
    hashseed: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        data = dict(data)
        data["rows"] = [RoundRow(**r) for r in data["rows"]]
        return cls(**data)


@dataclass
class Checks:
    """The "done when" checks of issue #30 over one report (``None``: does not apply).

    - ``planted_never_rises``: no planted unit's score exceeds its initial score, in any round;
    - ``twin_never_falls``: no true twin's unit falls below its initial score, in any round;
    - ``heldout_never_below_round0``: held-out accuracy is never below round 0's;
    - ``control_keeps_round0``: with a cut, control (unrated relation type) accuracy is never below
      round 0's;
    - ``planted_chunks_never_promoted``: chunk unit, no planted chunk's score exceeds its initial one.
    """

    planted_never_rises: bool
    twin_never_falls: bool | None
    heldout_never_below_round0: bool
    control_keeps_round0: bool | None
    planted_chunks_never_promoted: bool | None

    def failed(self) -> list[str]:
        return [name for name, ok in vars(self).items() if ok is False]


EPS = 1e-9


def checks(report: Report) -> Checks:
    """Evaluate :class:`Checks` on a report."""
    rows = report.rows
    base = rows[0]
    planted_ok = all(s <= INIT + EPS for r in rows for s in r.planted.values())
    twin_ok = all(s >= INIT - EPS for r in rows for s in r.twins.values()) if base.twins else None
    heldout_ok = all(r.heldout_acc >= base.heldout_acc - EPS for r in rows)
    control_ok = all(r.control_acc >= base.control_acc - EPS for r in rows) if report.cut else None
    chunks_ok = planted_ok if report.unit == "chunk" else None
    return Checks(planted_ok, twin_ok, heldout_ok, control_ok, chunks_ok)


# --------------------------------------------------------------------------- common machinery


class _Events:
    """Records the extraction and graph events an adapter emits (to map facts to unit ids)."""

    def __init__(self) -> None:
        self.chunks: dict[str, str] = {}  # chunk id -> text
        self.graph: Any = None

    @hookimpl
    def triage_extraction(self, event: Any) -> None:
        self.chunks[event.chunk.id] = event.chunk.text

    @hookimpl
    def triage_graph(self, event: Any) -> None:
        self.graph = event.graph


def _manager(unit: str) -> TriageManager:
    """The learner under the documented switch, delivering synchronously (deterministic scores)."""
    return TriageManager(
        store=None,
        config=TriageConfig(reweight=True, unit=unit),  # type: ignore[arg-type]
        entry_points=False,
        synchronous=True,
        hook_budget=60.0,  # never let a slow machine turn reranking off mid-run
    )


def map_units(unit: str, events: _Events) -> dict[str, list[str]]:
    """Fact label -> the framework's unit ids stating it (triple: the graph's relation on the fact's
    entity pair, by predicate when the pair has several; chunk: the chunks whose text holds it)."""
    out: dict[str, list[str]] = {}
    if unit == "chunk":  # a chunk stating several facts is learned per statement, like a merged row
        for f in FACTS:
            out[f.label] = sorted(
                statement_key(cid, chunk_statements(Chunk(cid, cid, text)), lower_stems(f.sentence))
                for cid, text in events.chunks.items()
                if f.sentence in text
            )
        return out
    triples = list(events.graph.triples) if events.graph is not None else []
    by_pair: dict[frozenset[str], list[Any]] = {}
    for t in triples:
        by_pair.setdefault(frozenset((normalize_label(t.subject), normalize_label(t.object))), []).append(t)
    for f in FACTS:
        found = by_pair.get(f.pair, [])
        if len(found) > 1:
            rel = normalize_label(f.spo[1])
            named = [t for t in found if rel in normalize_label(t.predicate)]
            found = named or found
        s, p, o = f.spo
        out[f.label] = sorted({statement_key(t.id, statements(t), statement_stems(p, s, o)) for t in found})
    return out


def _all_units(unit: str, events: _Events) -> set[str]:
    """Every unit the learner can score: chunks; triples, and a merged row's statements (the learner
    learns a row that merges several statements per statement: ``triage_plugins.feedback.statements``)."""
    out: set[str] = set()
    units = (
        [Chunk(cid, cid, text) for cid, text in events.chunks.items()]
        if unit == "chunk"
        else (events.graph.triples if events.graph is not None else ())
    )
    for t in units:
        said = statements(t) if isinstance(t, Triple) else chunk_statements(t)
        if len(said) > 1:
            out.update(statement_key(t.id, said, stems) for stems in said)
        else:
            out.add(t.id)
    return out


class _Driver:
    """One framework, built and instrumented; asks, rates, flushes, reads learned scores."""

    framework = ""
    setup = ""
    cut = True

    def __init__(self, unit: str, workdir: Path) -> None:
        self.unit = unit
        self.workdir = workdir
        self.manager = _manager(unit)
        self.events = _Events()
        self.manager.register(self.events)
        self.notes: list[str] = []
        self.inst: Any = None  # the framework's instrumentor, set by build()

    def build(self) -> None:
        raise NotImplementedError

    def ask(self, question: str) -> tuple[str, str]:
        """``(answer, query id)``."""
        raise NotImplementedError

    def feedback(self, query_id: str, score: float) -> None:
        self.inst.feedback(query_id, score, source="gold")

    def flush(self) -> None:
        self.inst.flush()

    def scores(self) -> dict[str, float]:
        return self.manager.learned_scores(self.unit)

    def close(self) -> None:
        self.manager.close()


# --------------------------------------------------------------------------- LightRAG


class LightRAGDriver(_Driver):
    """LightRAG 1.5.7 through ``LightRAGInstrumentor`` (``docs/lightrag.md``) with the adapter's offline
    stand-ins (``triage_lightrag.testing.build_rag``: scripted LLM, hashing embedder, byte tokenizer
    passed as ``tokenizer=``), documents inserted one at a time (a deterministic merge order), asked
    with ``rag.aquery``.

    Triple unit: ``QueryParam(mode, max_relation_tokens=1200, enable_rerank=False)``, the learning
    set-up of ``tests/adapters/test_lightrag.py`` (P decides the relation order and which relations
    survive the token cut: local mode through ``edge_degrees_batch``, global mode through
    ``relationships_vdb.query``, hybrid both). Chunk unit: LightRAG's rerank slot
    (``enable_rerank=True``) with ``chunk_top_k=5`` as the cut.

    The stand-in's reader answers from the whole context, relation-aware, ties broken by first
    mention; the context lists entities (whose descriptions restate each sentence that names them,
    in insertion order) before relations, so in local and hybrid mode the first-mentioned statement
    is fixed by the topic entity's description, whatever the relation ranking. In global mode the
    entities shown are those of the reranked relations.
    """

    framework = "lightrag"

    def __init__(
        self,
        unit: str,
        workdir: Path,
        *,
        mode: str = "hybrid",
        max_relation_tokens: int = 1200,
        chunk_top_k: int = 5,
    ) -> None:
        super().__init__(unit, workdir)
        self.mode = mode
        self.setup = f"aquery mode={mode}, " + (
            f"max_relation_tokens={max_relation_tokens}" if unit == "triple" else f"chunk_top_k={chunk_top_k}"
        )
        self.max_relation_tokens = max_relation_tokens
        self.chunk_top_k = chunk_top_k
        self.loop = asyncio.new_event_loop()
        self.rag: Any = None
        self.n = 0

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def build(self) -> None:
        from triage_lightrag import LightRAGInstrumentor
        from triage_lightrag.testing import ScriptedLightRAGLLM, build_rag

        llm = ScriptedLightRAGLLM(TEXTS)
        self.rag = self._run(
            build_rag(
                self.workdir / "rag", TEXTS, workspace=f"p-{uuid.uuid4().hex[:8]}", llm=llm, insert=False
            )
        )
        self.inst = LightRAGInstrumentor().instrument(self.rag, manager=self.manager)
        for i, text in enumerate(TEXTS):  # one at a time: merge order (and descriptions) deterministic
            self._run(self.rag.ainsert(text, ids=f"doc-{i:02d}"))
        self.inst.flush()

    def _param(self) -> Any:
        from lightrag import QueryParam

        if self.unit == "triple":
            return QueryParam(
                mode=self.mode, max_relation_tokens=self.max_relation_tokens, enable_rerank=False
            )
        return QueryParam(mode=self.mode, chunk_top_k=self.chunk_top_k, enable_rerank=True)

    def ask(self, question: str) -> tuple[str, str]:
        self.n += 1
        with self.inst.query(f"planted-{self.n}") as qid:
            answer = self._run(self.rag.aquery(question, self._param()))
        return str(answer), qid

    def close(self) -> None:
        try:
            if self.inst is not None:
                self.inst.uninstrument()
            if self.rag is not None:
                self._run(self.rag.finalize_storages())
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            self._run(asyncio.gather(*pending, return_exceptions=True))
        finally:
            self.loop.close()
            super().close()


# --------------------------------------------------------------------------- GraphRAG


class GraphRAGDriver(_Driver):
    """Microsoft GraphRAG 3.3 local search through ``GraphRAGInstrumentor`` (``docs/graphrag.md``:
    ``observe_index`` then ``inst.local_search``), the offline models of ``triage_graphrag.offline``
    (``offline_config``, its default ``"reader"`` answers). The cut: ``top_k_entities`` and
    ``top_k_relationships``.

    ``cluster_graph.use_lcc=False``: GraphRAG clusters only the largest connected component by
    default, and local search keeps only entities that belong to a community, so the films of this
    corpus outside that component would be unreachable (every answer about them wrong).
    """

    framework = "graphrag"

    def __init__(
        self, unit: str, workdir: Path, *, top_k_entities: int = 3, top_k_relationships: int = 3
    ) -> None:
        super().__init__(unit, workdir)
        self.local = {"top_k_entities": top_k_entities, "top_k_relationships": top_k_relationships}
        self.setup = (
            f"local_search top_k_entities={top_k_entities}, top_k_relationships={top_k_relationships}"
        )
        self.frames: dict[str, Any] = {}

    def build(self) -> None:
        import graphrag.api as api
        import pandas as pd

        from triage_graphrag import GraphRAGInstrumentor
        from triage_graphrag.offline import offline_config

        root = self.workdir / "graphrag"
        (root / "input").mkdir(parents=True)
        for i, text in enumerate(TEXTS):
            (root / "input" / f"doc-{i:02d}.txt").write_text(text, encoding="utf-8")
        self.gconfig = offline_config(root, local_search=self.local, cluster_graph={"use_lcc": False})
        self.inst = GraphRAGInstrumentor().instrument(manager=self.manager)
        obs = self.inst.observe_index(self.gconfig, logprobs=False)
        results = asyncio.run(api.build_index(obs.config, callbacks=obs.callbacks))
        failed = [r.workflow for r in results if r.error is not None]
        if failed:
            raise RuntimeError(f"GraphRAG indexing failed in {failed}")
        names = ("entities", "communities", "community_reports", "text_units", "relationships")
        self.frames = {n: pd.read_parquet(root / "output" / f"{n}.parquet") for n in names}
        self.inst.flush()

    def ask(self, question: str) -> tuple[str, str]:
        f = self.frames
        result = asyncio.run(
            self.inst.local_search(
                self.gconfig, f["entities"], f["communities"], f["community_reports"], f["text_units"],
                f["relationships"], None, 2, "Multiple Paragraphs", question,
            )
        )  # fmt: skip
        return str(result.response), result.query_id

    def close(self) -> None:
        try:
            if self.inst is not None:
                self.inst.uninstrument()
        finally:
            super().close()


# --------------------------------------------------------------------------- LlamaIndex


class LlamaIndexDriver(_Driver):
    """LlamaIndex ``PropertyGraphIndex`` as ``docs/llamaindex.md`` documents it:
    ``from_documents(..., kg_extractors=[TriageLLMPathExtractor(llm), TriageExtractionTap()])`` and
    ``as_query_engine(node_postprocessors=[TriagePostprocessor(top_n=...)])`` (LlamaIndex's defaults,
    ``include_text=True``), with ``OfflineLLM`` and ``OfflineEmbedding``. ``top_n=None``: no cut.

    The chunks are ``TextNode(id_="doc-NN", text=...)`` (one per document, ids kept by the adapter):
    with ``Document(text=...)`` LlamaIndex names chunks with ``uuid4()``, and the text it embeds for an
    entity node includes its ``triplet_source_id``, so the same documents retrieve different contexts
    from run to run.

    ``answer``: the offline LLM's reader — ``"first-line"`` (its default: the other endpoint of the
    first ``s -> p -> o`` line of the context, whatever its relation) or ``"reader"`` (the shared
    relation-aware offline reader, the one LightRAG's and GraphRAG's stand-ins use).
    """

    framework = "llamaindex"

    def __init__(
        self, unit: str, workdir: Path, *, top_n: int | None = None, answer: str = "first-line"
    ) -> None:
        super().__init__(unit, workdir)
        self.top_n = top_n
        self.cut = top_n is not None
        self.answer_style = answer
        self.setup = f"as_query_engine + TriagePostprocessor(top_n={top_n})" + (
            f", answer={answer}" if answer != "first-line" else ""
        )
        self.engine: Any = None
        self._saved: Any = None

    def build(self) -> None:
        from llama_index.core import PropertyGraphIndex, Settings
        from llama_index.core.schema import TextNode

        from triage_llamaindex import (
            LlamaIndexInstrumentor,
            TriageExtractionTap,
            TriageLLMPathExtractor,
            TriagePostprocessor,
        )
        from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM

        llm = OfflineLLM(answer=self.answer_style)
        self._saved = (Settings._llm, Settings._embed_model)
        Settings.llm, Settings.embed_model = llm, OfflineEmbedding()
        self.inst = LlamaIndexInstrumentor().instrument(manager=self.manager)
        index = PropertyGraphIndex(
            nodes=[TextNode(id_=f"doc-{i:02d}", text=t) for i, t in enumerate(TEXTS)],
            kg_extractors=[TriageLLMPathExtractor(llm=llm), TriageExtractionTap()],
        )
        self.inst.emit_graph(index)
        self.engine = index.as_query_engine(node_postprocessors=[TriagePostprocessor(top_n=self.top_n)])
        self.inst.flush()

    def ask(self, question: str) -> tuple[str, str]:
        with self.inst.query() as qid:
            response = self.engine.query(question)
        return str(response.response), qid

    def close(self) -> None:
        try:
            if self.inst is not None:
                self.inst.uninstrument()
            if self._saved is not None:
                from llama_index.core import Settings

                Settings._llm, Settings._embed_model = self._saved
        finally:
            super().close()


# --------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class Config:
    """A named framework configuration: ``make(unit, workdir)`` builds its driver."""

    name: str
    framework: str
    module: str  # what must import for it to run
    make: Callable[..., _Driver]  # (unit, workdir, **options) -> driver
    units: tuple[str, ...] = ("triple", "chunk")


def _with(cls: type[_Driver], **fixed: Any) -> Callable[..., _Driver]:
    return lambda unit, workdir, **options: cls(unit, workdir, **{**fixed, **options})


CONFIGS: dict[str, Config] = {
    c.name: c
    for c in (
        Config("lightrag", "lightrag", "lightrag", _with(LightRAGDriver, mode="hybrid")),
        Config("lightrag-global", "lightrag", "lightrag", _with(LightRAGDriver, mode="global")),
        Config("graphrag", "graphrag", "graphrag.api", _with(GraphRAGDriver)),
        Config("llamaindex", "llamaindex", "llama_index.core", _with(LlamaIndexDriver, top_n=None)),
        Config("llamaindex-top3", "llamaindex", "llama_index.core", _with(LlamaIndexDriver, top_n=3)),
        Config(
            "llamaindex-reader-top3",
            "llamaindex",
            "llama_index.core",
            _with(LlamaIndexDriver, top_n=3, answer="reader"),
        ),
    )
}
FRAMEWORKS: dict[str, tuple[str, ...]] = {
    fw: tuple(name for name, c in CONFIGS.items() if c.framework == fw)
    for fw in ("lightrag", "graphrag", "llamaindex")
}


def framework_available(name: str) -> str | None:
    """``None`` when configuration ``name``'s framework is installed (found, not imported: GraphRAG
    takes seconds to import), else why not."""
    import importlib.util

    module = CONFIGS[name].module
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else f"{module} is not installed"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the frameworks' (and the learner's) logging below ERROR for the run."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


# --------------------------------------------------------------------------- the protocol


def _measure(
    driver: _Driver, questions: Sequence[Question], answers: dict[str, str]
) -> tuple[float, float, int]:
    """Ask ``questions`` (no feedback): (accuracy, control accuracy, misled answers)."""
    hits, control, n_control, misled = 0, 0, 0, 0
    for q in questions:
        answer, _ = driver.ask(q.text)
        answers[q.text] = answer
        ok = gold_hit(answer, q.gold)
        hits += ok
        misled += _misled(q, answer)
        if q.control:
            control += ok
            n_control += 1
    driver.flush()
    return hits / len(questions), (control / n_control if n_control else float("nan")), misled


def _misled(q: Question, answer: str) -> bool:
    wrong = misleading_answer(q)
    return wrong is not None and not gold_hit(answer, q.gold) and gold_hit(answer, (wrong,))


def _row(
    driver: _Driver,
    r: int,
    accuracy: tuple[float, float, float],
    misled: int,
    units: dict[str, list[str]],
    true_units: set[str],
    seconds: float,
    answers: dict[str, str],
) -> RoundRow:
    learned = driver.scores()

    def score(label: str, pick: Callable[[list[float]], float]) -> float:
        ids = units.get(label) or []
        return pick([learned.get(i, INIT) for i in ids]) if ids else INIT

    planted = {f.label: score(f.label, max) for f in PLANTED}
    twin = {f.label: score(f.label, min) for f in TWINS}
    collateral = sum(1 for i in true_units if learned.get(i, INIT) < INIT - EPS)
    return RoundRow(
        round=r,
        train_acc=accuracy[0],
        heldout_acc=accuracy[1],
        control_acc=accuracy[2],
        planted=planted,
        twins=twin,
        collateral=collateral,
        max_planted=max(planted.values()),
        min_twin=min(twin.values()) if twin else INIT,
        misled=misled,
        scored=len(learned),
        seconds=seconds,
        answers=dict(answers),
    )


def run(
    name: str, unit: str = "triple", rounds: int = 3, *, workdir: str | Path | None = None, **options: Any
) -> Report:
    """Run configuration ``name`` (:data:`CONFIGS`) with learner unit ``unit`` for ``rounds`` rounds,
    in this process; ``options`` go to the driver (e.g. ``mode="local"`` for LightRAG, ``top_n=2``
    for LlamaIndex). LlamaIndex orders triplets by iterating a ``set`` of strings, so its answers
    depend on ``PYTHONHASHSEED``: :func:`run_isolated` fixes it."""
    if unit not in CONFIGS[name].units:
        raise ValueError(f"{name} does not support unit {unit!r}")
    problems = check_corpus()
    if problems:
        raise ValueError("corpus: " + "; ".join(problems))
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_quiet())
        wd = (
            Path(workdir) if workdir is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        )
        driver = CONFIGS[name].make(unit, wd, **options)
        stack.callback(driver.close)
        driver.build()
        build_seconds = time.perf_counter() - started
        units = map_units(unit, driver.events)
        planted_ids = {i for f in PLANTED for i in units[f.label]}
        true_units = _all_units(unit, driver.events) - planted_ids
        shared = sorted(
            p.label for p in PLANTED if any(set(units[p.label]) & set(units[t.label]) for t in twins(p))
        )
        notes = list(driver.notes)
        missing = sorted(f.label for f in (*PLANTED, *TWINS) if not units[f.label])
        if missing:
            notes.append(f"no {unit} unit found for: {missing}")
        rows: list[RoundRow] = []
        answers: dict[str, str] = {}
        t0 = time.perf_counter()
        train, _, misled_train = _measure(driver, TRAIN, answers)
        heldout, control, misled_heldout = _measure(driver, HELDOUT, answers)
        rows.append(
            _row(
                driver, 0, (train, heldout, control), misled_train + misled_heldout, units, true_units,
                time.perf_counter() - t0, answers,
            )
        )  # fmt: skip
        for r in range(1, rounds + 1):
            t0 = time.perf_counter()
            hits, misled_train = 0, 0
            for q in TRAIN:
                answer, qid = driver.ask(q.text)
                answers[q.text] = answer
                ok = gold_hit(answer, q.gold)
                hits += ok
                misled_train += _misled(q, answer)
                driver.feedback(qid, 1.0 if ok else 0.0)
                driver.flush()
            heldout, control, misled_heldout = _measure(driver, HELDOUT, answers)
            rows.append(
                _row(
                    driver, r, (hits / len(TRAIN), heldout, control), misled_train + misled_heldout, units,
                    true_units, time.perf_counter() - t0, answers,
                )
            )  # fmt: skip
        report_units = {f.label: units[f.label] for f in (*PLANTED, *TWINS)}
    return Report(
        config=name,
        framework=CONFIGS[name].framework,
        setup=driver.setup,
        unit=unit,
        cut=driver.cut,
        rows=rows,
        units=report_units,
        shared=shared,
        true_units=len(true_units),
        notes=notes,
        build_seconds=build_seconds,
        seconds=time.perf_counter() - started,
        hashseed=os.environ.get("PYTHONHASHSEED"),
    )


@dataclass
class Isolated:
    """What :func:`run_isolated` returns: the reports, or why the framework could not run, and the
    interpreter's wall time (imports included)."""

    reports: list[Report]
    unavailable: str | None = None
    seconds: float = 0.0


def run_isolated(
    names: str | Sequence[str], units: Sequence[str] = ("triple", "chunk"), rounds: int = 3, *,
    hashseed: str = "0", timeout: float = 1800.0,
) -> Isolated:  # fmt: skip
    """Run configurations ``names`` (of one framework: they share its imports) for each unit in a
    fresh interpreter (``PYTHONHASHSEED=hashseed``, the frameworks offline, cwd a temporary
    directory): the frameworks' process-wide state (LlamaIndex ``Settings`` and dispatcher,
    GraphRAG's engine factories) stays apart, and the run is reproducible."""
    names = [names] if isinstance(names, str) else list(names)
    for name in names:
        reason = framework_available(name)
        if reason is not None:
            return Isolated([], reason)
    env = {
        **os.environ,
        "PYTHONHASHSEED": hashseed,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    for var in (
        "TRIAGE_STORE",
        "TRIAGE_STORE_URL",
        "TRIAGE_SYNC",
        "TRIAGE_DISABLE_PLUGINS",
        "TRIAGE_TRACE_PLUGINS",
    ):
        env.pop(var, None)
    args = [sys.executable, str(Path(__file__).resolve()), "--rounds", str(rounds)]
    for name in names:
        args += ["--child", name]
    for unit in units:
        args += ["--unit", unit]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - started
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0 or not last.startswith("{"):
        raise RuntimeError(f"{names} run failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    data = json.loads(last)
    if data.get("unavailable"):
        return Isolated([], data["unavailable"], seconds)
    return Isolated([Report.from_json(r) for r in data["reports"]], None, seconds)


def _child(argv: Sequence[str]) -> int:
    """``planted.py --child NAME [--child NAME ...] [--unit U ...] [--rounds N]``: run in this
    interpreter, print one JSON line ``{"reports": [...]}`` (or ``{"unavailable": why}``)."""
    import argparse
    import importlib

    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="append", required=True, choices=sorted(CONFIGS))
    parser.add_argument("--unit", action="append", choices=("triple", "chunk"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    for name in args.child:
        try:
            importlib.import_module(CONFIGS[name].module)
        except Exception as exc:  # noqa: BLE001 - any import failure: the framework is unavailable
            print(json.dumps({"unavailable": f"{CONFIGS[name].module}: {type(exc).__name__}: {exc}"}))
            return 0
    reports = [
        run(name, unit, args.rounds).to_json() for name in args.child for unit in args.unit or ("triple",)
    ]
    print(json.dumps({"reports": reports}))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
