"""The runner SDK: what a framework's ``triage compare`` runner imports (DESIGN §2).

A runner drives one framework over a :class:`Corpus` in one mode and **emits events through the
manager** — it computes nothing; ``triage compare`` scores what it emitted. An adapter registers its
runner from its ``triage`` entry-point plugin through the hook ``triage_register_runners(register)``::

    @hookimpl
    def triage_register_runners(register):
        from my_adapter.runner import MyRunner   # imports the framework only inside _run()

        register(MyRunner())

    class MyRunner(Runner):
        name, modes, requires = "mine", ("local",), ("my_framework", "mine", "my-framework")

        def _run(self, job: RunJob) -> None:
            ...  # index job.corpus, then run_rounds(self.name, job.mode, job.questions, ask, ...)

Shared here once: the inputs (:class:`Corpus`, :class:`Question`), the compare query ids
(:func:`query_id`), the feedback-rounds loop (:func:`run_rounds` / :func:`arun_rounds`) and **the one
gold-hit rule** (:func:`gold_hit`) by which every runner, the reference runner and ``evolve-bench``
turn a gold answer into feedback. Nothing here imports a framework.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from triage_plugins.contract.events import Chunk, ExtractedTriple, Gold

if TYPE_CHECKING:
    from triage_plugins.kg.ontology import Ontology
    from triage_plugins.runtime.manager import TriageManager

__all__ = [
    "Answered",
    "Corpus",
    "FrameworkRunner",
    "Progress",
    "Question",
    "DEFAULT_SETUP",
    "RunJob",
    "Runner",
    "Setup",
    "arun_rounds",
    "gold_hit",
    "missing_package",
    "no_progress",
    "parse_query_id",
    "query_id",
    "round_label",
    "run_rounds",
    "setup_of",
]


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class Question:
    """A question to ask every framework; ``gold`` enables CC, Hits@1, F1 and feedback rounds.

    :param rated: feedback rounds rate its answers (a *training* question); ``False``: a held-out
        question, asked every round and never rated (``triage compare`` splits them, seeded).
    """

    id: str
    text: str
    gold: Gold | None = None
    rated: bool = True


@dataclass(frozen=True)
class Corpus:
    """Documents as chunks, plus what a runner may use to build its graph.

    :param extract: the extractor the reference pipeline uses (default: the offline rule-based one).
    :param ontology: schema for SC/OC/LC (``--ontology`` or the embedded world's schema).
    """

    name: str
    chunks: tuple[Chunk, ...]
    questions: tuple[Question, ...] = ()
    ontology: Ontology | None = None
    extract: Callable[[Chunk], Sequence[ExtractedTriple]] | None = None


# --------------------------------------------------------------------------- the runner protocol


class Progress(Protocol):
    """``progress(description, total)`` starts a progress bar and returns ``tick()`` (one step done);
    the same shape as the CLI's progress factory."""

    def __call__(self, description: str, total: int) -> Callable[[], None]: ...


def no_progress(description: str, total: int) -> Callable[[], None]:
    """A :class:`Progress` that shows nothing."""
    return lambda: None


def query_id(question_id: str, mode: str, round_: int = 0) -> str:
    """The query id a runner must use: unique per framework across modes and feedback rounds."""
    return f"{question_id}@{mode}" + (f"#r{round_}" if round_ else "")


def parse_query_id(qid: str) -> tuple[str, str | None, int]:
    """``(question id, mode, round)`` of a :func:`query_id`; a foreign id is round 0 with mode ``None``."""
    base, round_ = qid, 0
    head, sep, tail = qid.rpartition("#r")
    if sep and tail.isdigit():
        base, round_ = head, int(tail)
    question, sep, mode = base.rpartition("@")
    return (question, mode, round_) if sep else (base, None, round_)


@runtime_checkable
class FrameworkRunner(Protocol):
    """Drives one framework over a corpus in one mode, emitting events through the manager.

    :attr name: the framework's name in the table, what ``--frameworks`` selects.
    :attr modes: the modes it can run (retrievers / query modes); the first is the default.

    Optional attributes read by ``triage compare``: ``framework`` (the ``framework`` field its events
    carry, default ``name``), ``retriever_of(mode) -> str | None`` (the ``retriever`` field its
    retrieval events carry in that mode, default the mode; ``None`` means do not filter) and
    ``setup_of(mode) -> Setup`` (its query set-up, default the framework default; :func:`setup_of`).
    """

    name: str
    modes: tuple[str, ...]

    def available(self) -> tuple[bool, str]:
        """``(True, "")`` when it can run here, else ``(False, why)`` (not installed ...)."""
        ...

    def run(
        self,
        corpus: Corpus,
        questions: Sequence[Question],
        mode: str,
        manager: TriageManager,
        *,
        feedback_rounds: int,
        seed: int,
        progress: Progress,
    ) -> None:
        """Index ``corpus``, answer ``questions`` (ids from :func:`query_id`), send feedback rounds."""
        ...


DEFAULT_SETUP = "framework default"


@dataclass(frozen=True, slots=True)
class Setup:
    """The query set-up of one runner mode (#18 item 3): what it is, and whether it is the framework's
    own default set-up; a non-default row is labelled ``"(non-default: <description>)"``."""

    description: str = DEFAULT_SETUP
    default: bool = True

    @property
    def label(self) -> str:
        """``""`` for the framework default, else ``"(non-default: <description>)"``."""
        return "" if self.default else f"(non-default: {self.description})"


def setup_of(runner: object, mode: str) -> Setup:
    """The :class:`Setup` of ``runner`` in ``mode``: its ``setup_of(mode)`` when it has one, else the
    framework default (a :class:`FrameworkRunner` need not declare it)."""
    method = getattr(runner, "setup_of", None)
    found = method(mode) if callable(method) else None
    return found if isinstance(found, Setup) else Setup()


@dataclass(frozen=True, slots=True)
class RunJob:
    """One :meth:`FrameworkRunner.run` call: what to index and ask, in which mode, through which manager."""

    corpus: Corpus
    questions: Sequence[Question]
    mode: str
    manager: Any
    feedback_rounds: int = 0
    seed: int = 0
    progress: Progress = no_progress


class Runner(ABC):
    """A convenient base for a :class:`FrameworkRunner`: set ``name``, ``modes`` and ``requires``,
    implement :meth:`_run`.

    :attr requires: ``(module, extra, package)`` that must be importable (:func:`missing_package`), or
        ``None``; :meth:`available` reads it. :meth:`retriever_of` is the mode (override when the
        framework's retrieval events carry another ``retriever``).
    """

    name: ClassVar[str]
    modes: ClassVar[tuple[str, ...]]
    requires: ClassVar[tuple[str, str, str] | None] = None
    #: mode -> its query set-up, when it is not simply the framework default (:meth:`setup_of`)
    setups: ClassVar[Mapping[str, Setup]] = {}

    def available(self) -> tuple[bool, str]:
        missing = missing_package(*self.requires) if self.requires is not None else None
        return missing is None, missing or ""

    def retriever_of(self, mode: str) -> str | None:
        return mode

    def setup_of(self, mode: str) -> Setup:
        """The query set-up of ``mode`` (``setups``; default: the framework default)."""
        return self.setups.get(mode, Setup())

    def run(
        self,
        corpus: Corpus,
        questions: Sequence[Question],
        mode: str,
        manager: TriageManager,
        *,
        feedback_rounds: int = 0,
        seed: int = 0,
        progress: Progress = no_progress,
    ) -> None:
        """Index ``corpus``, answer ``questions`` (ids from :func:`query_id`), send feedback rounds."""
        self._run(RunJob(corpus, questions, mode, manager, feedback_rounds, seed, progress))

    @abstractmethod
    def _run(self, job: RunJob) -> None:
        """Drive the framework through ``job``, emitting events through ``job.manager``."""


def missing_package(module: str, extra: str, package: str | None = None) -> str | None:
    """Why a runner cannot run when ``module`` is not importable, else ``None``.

    :param extra: the project extra that installs it; ``package`` names it in the message (default: ``module``).
    """
    if importlib.util.find_spec(module) is None:
        return f"{package or module} is not installed (pip install 'triage-plugins[{extra}]')"
    return None


# --------------------------------------------------------------------------- the gold-hit rule


def gold_hit(answer: str, gold: Gold | Iterable[str]) -> bool:
    """Whether ``answer`` names a gold answer, by the one gold-hit rule
    (:func:`triage_plugins.metrics.answers.gold_hit`: citations, possessives, case, punctuation and
    articles normalized, a gold answer as a whole phrase; EvoRAG §6.2's ACC). Every runner's gold
    feedback, the reference runner's and ``evolve-bench``'s use it; Hits@1 applies the same rule.
    """
    from triage_plugins.metrics.answers import gold_hit as rule

    return rule(answer, gold)


# --------------------------------------------------------------------------- feedback rounds


@dataclass(frozen=True, slots=True)
class Answered:
    """One asked question of a round: the question, its :func:`query_id` and the answer text."""

    question: Question
    query_id: str
    answer: str


def round_label(name: str, mode: str, round_: int, what: str = "questions") -> str:
    """The progress label of one round: ``"<name>/<mode>: questions (round k)"``."""
    return f"{name}/{mode}: {what}" + (f" (round {round_})" if round_ else "")


def _send_feedback(answered: Sequence[Answered], feedback: Callable[[str, float], object]) -> None:
    """Gold feedback for a round: 1 when :func:`gold_hit`, else 0 (questions without gold, and
    held-out questions, get none)."""
    for a in answered:
        if a.question.gold is not None and a.question.rated:
            feedback(a.query_id, 1.0 if gold_hit(a.answer, a.question.gold) else 0.0)


def run_rounds(
    name: str,
    mode: str,
    questions: Sequence[Question],
    ask: Callable[[Question, str], str],
    feedback: Callable[[str, float], object],
    flush: Callable[[], object],
    *,
    feedback_rounds: int,
    progress: Progress = no_progress,
) -> list[Answered]:
    """Ask every question (round 0), then per feedback round k ≥ 1: send gold feedback for round
    k − 1's rated questions (:func:`gold_hit`; :attr:`Question.rated`), ``flush()``, ask every
    question again under round k's query ids.

    :param ask: ``ask(question, query_id) -> answer text``; it must emit under that query id.
    :param feedback: ``feedback(query_id, score)`` with score 1.0 or 0.0 (source ``"gold"``).
    :return: the last round's answers.
    """
    answered: list[Answered] = []
    for round_ in range(feedback_rounds + 1):
        if round_:
            _send_feedback(answered, feedback)
            flush()
        tick = progress(round_label(name, mode, round_), len(questions))
        answered = []
        for q in questions:
            qid = query_id(q.id, mode, round_)
            answered.append(Answered(q, qid, ask(q, qid)))
            tick()
    return answered


async def arun_rounds(
    name: str,
    mode: str,
    questions: Sequence[Question],
    ask: Callable[[Question, str], Awaitable[str]],
    feedback: Callable[[str, float], object],
    flush: Callable[[], Awaitable[object] | object],
    *,
    feedback_rounds: int,
    progress: Progress = no_progress,
) -> list[Answered]:
    """:func:`run_rounds` for a framework that answers in a coroutine (``ask`` awaited; ``flush``
    awaited when it returns an awaitable)."""
    answered: list[Answered] = []
    for round_ in range(feedback_rounds + 1):
        if round_:
            _send_feedback(answered, feedback)
            flushed = flush()
            if isinstance(flushed, Awaitable):
                await flushed
        tick = progress(round_label(name, mode, round_), len(questions))
        answered = []
        for q in questions:
            qid = query_id(q.id, mode, round_)
            answered.append(Answered(q, qid, await ask(q, qid)))
            tick()
    return answered
