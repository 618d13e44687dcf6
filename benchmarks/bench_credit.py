"""Learning speed of the feedback learner under flat retrieval: ``credit="entity"``, ``"path"``, ``"relation"``.

LightRAG, GraphRAG and LlamaIndex report retrieved relationships, not reasoning paths, so the
learner takes each retrieved triple as a one-hop path. With ``credit="entity"`` (the rule before
issue #16 point 3) feedback on an answer credits every retrieved triple that touches the answer
entity; with ``credit="path"`` (the default) only the triples that connect the question's entity
to the answer (:mod:`triage_plugins.feedback.credit`, EvoRAG §3 ➋, §4.2).

Both rules run side by side on the same questions, through a real ``TriageManager`` with the
default plugins, the reference pipeline's grounder and its ``light-relation`` retriever with the
reasoning paths dropped (what a flat adapter reports), S_r = the learner's default token
relevance (sent with ``triage_rerank``, as an adapter does), and a reader that answers with the
far end of the highest-priority retrieved relationship touching the question's entity (a
framework that reads the top of its reranked context). Feedback is the oracle's: 1 when the
answer is right, else 0.

Scenarios:

- ``planted``: a 27-relationship graph (films, directors, writers) with one planted false
  relationship per question that outranks the true one on S_r (``Inception directed by Steven
  Spielberg``); the questions are asked in turn, one feedback each;
- ``planted-bad``: the same graph, each question asked alone until its right relationship ranks
  first, every feedback bad (the answer is wrong until then): the GraphRAG report's setting, with
  the ``light-relation`` retrieval and with all 27 relationships retrieved;
- ``world``: the embedded world of ``triage demo`` (seed 0, graph extracted from its documents),
  its 1-hop questions whose gold triple is retrieved, asked in turn.

"Feedbacks needed" for a question: feedbacks on it (one per round) until its right relationship
(the true / gold triple) ranks first by P(t) among the retrieved relationships that touch the
question's entity (the candidates the reader answers from) and stays first to the end; ``0`` when
it is first before any feedback, ``-`` when it is not first at the end of ``--rounds`` rounds.
Also reported: right answers in the last round, questions whose right relationship is first in
the whole retrieved context at the end, and raw scores of chosen triples.

Run: ``python benchmarks/bench_credit.py [--rounds 30] [--scenario planted|planted-bad|world|all]``
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import (
    FeedbackEvent,
    GenerationEvent,
    Gold,
    RerankRequest,
    Subgraph,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.feedback.priority import token_relevance
from triage_plugins.reference.pipeline import ReferencePipeline
from triage_plugins.runtime.manager import TriageManager

RULES = ("entity", "path", "relation")


@dataclass(frozen=True)
class Question:
    text: str
    answers: tuple[str, ...]
    right: tuple[str, ...]  # triple ids of the right relationship(s)


def _t(s: str, p: str, o: str) -> Triple:
    return Triple.of(s, p, o)


PLANTED_TRIPLES = [
    # question 1: who directed Inception (planted: Spielberg)
    _t("Inception", "director", "Christopher Nolan"),
    _t("Inception", "directed by", "Steven Spielberg"),
    _t("Inception", "starring", "Leonardo DiCaprio"),
    _t("Christopher Nolan", "born in", "London"),
    _t("Christopher Nolan", "director of", "Tenet"),
    # question 2: who directed Jaws
    _t("Jaws", "film by", "Steven Spielberg"),
    _t("Jaws", "directed by", "Ridley Scott"),
    _t("Steven Spielberg", "born in", "Cincinnati"),
    _t("Steven Spielberg", "director of", "E.T."),
    _t("Ridley Scott", "director of", "Alien"),
    # question 3: where did Tolkien teach
    _t("J. R. R. Tolkien", "professor at", "Oxford"),
    _t("J. R. R. Tolkien", "did teach at", "Cambridge"),
    _t("J. R. R. Tolkien", "author of", "The Hobbit"),
    _t("J. R. R. Tolkien", "born in", "Bloemfontein"),
    _t("C. S. Lewis", "friend of", "J. R. R. Tolkien"),
    # question 4: who wrote The Hobbit
    _t("The Hobbit", "book by", "J. R. R. Tolkien"),
    _t("The Hobbit", "written by", "C. S. Lewis"),
    _t("The Hobbit", "published in", "1937"),
    _t("C. S. Lewis", "author of", "Narnia"),
    # question 5: where was Leonardo DiCaprio born
    _t("Leonardo DiCaprio", "native of", "Los Angeles"),
    _t("Leonardo DiCaprio", "was born in", "London"),
    _t("Leonardo DiCaprio", "starred in", "Titanic"),
    _t("Titanic", "director", "James Cameron"),
    _t("James Cameron", "born in", "Kapuskasing"),
    _t("London", "capital of", "United Kingdom"),
    _t("Oxford", "located in", "United Kingdom"),
    _t("Cambridge", "located in", "United Kingdom"),
]
PLANTED_QUESTIONS = [
    Question("Who directed Inception?", ("Christopher Nolan",), (PLANTED_TRIPLES[0].id,)),
    Question("Who directed Jaws?", ("Steven Spielberg",), (PLANTED_TRIPLES[5].id,)),
    Question("Where did J. R. R. Tolkien teach?", ("Oxford",), (PLANTED_TRIPLES[10].id,)),
    Question(
        "Who wrote The Hobbit?", ("J. R. R. Tolkien",), (PLANTED_TRIPLES[15].id, PLANTED_TRIPLES[12].id)
    ),
    Question("Where was Leonardo DiCaprio born?", ("Los Angeles",), (PLANTED_TRIPLES[19].id,)),
]
WATCH = {  # raw scores reported at the end (the examples)
    "Inception|directed by|Steven Spielberg (false)": PLANTED_TRIPLES[1].id,
    "Inception|director|Christopher Nolan (true)": PLANTED_TRIPLES[0].id,
    "J. R. R. Tolkien|professor at|Oxford (true)": PLANTED_TRIPLES[10].id,
}


class Run:
    """One learner (one credit rule) answering questions over one graph."""

    def __init__(
        self, graph: GraphView, credit: str, evaluator: str | None, everything: bool = False
    ) -> None:
        options = {"feedback.credit": credit, "feedback.evaluator": evaluator}
        self.manager = TriageManager(
            ":memory:", config=TriageConfig(reweight=True, options=options), entry_points=False
        )
        self.pipeline = ReferencePipeline(self.manager, graph, retriever="light-relation", top_k=5, hops=1)
        self.learner = self.manager.get_plugin("triage.feedback")
        self.retrieved: dict[str, tuple[list[str], list[float]]] = {}
        self.on_topic: dict[str, set[str]] = {}
        self.feedbacks = 0
        self.first_before = False
        self.everything = everything  # retrieve every relationship (a small graph in full context)

    def ranked(self, q: Question) -> list[str]:
        """Retrieved triple ids of ``q``'s last retrieval by P(t), best first."""
        ids, rel = self.retrieved[q.text]
        p = self.learner.priorities(ids, rel).tolist()
        return [i for _, i in sorted(zip(p, ids, strict=True), key=lambda x: -x[0])]

    def ask(self, q: Question, n: int) -> bool:
        """Retrieve (flat), rerank, answer from the top relationship, give oracle feedback."""
        qid = f"q{n}"
        event = self.pipeline.retrieve(q.text, query_id=qid, gold=Gold(q.answers))
        event = dataclasses.replace(event, paths=())  # what LightRAG / GraphRAG / LlamaIndex report
        if self.everything:
            event = dataclasses.replace(event, subgraph=Subgraph(tuple(self.pipeline.graph.triples)))
        triples = event.subgraph.triples
        ids = [t.id for t in triples]
        rel = token_relevance(q.text, [f"{t.subject} {t.predicate} {t.object}" for t in triples]).tolist()
        self.retrieved[q.text] = (ids, rel)
        topics = {normalize_label(n) for n in event.grounding.values() if n}
        self.on_topic[q.text] = {
            t.id
            for t in triples
            if normalize_label(t.subject) in topics or normalize_label(t.object) in topics
        }
        self.first_before = self.first(q)  # before this query's feedback
        self.manager.emit_retrieval(event)
        self.manager.rerank(
            RerankRequest("reference", q.text, "triple", tuple(ids), tuple(rel), query_id=qid)
        )
        by_id = {t.id: t for t in triples}
        answer = ""
        for i in self.ranked(q):
            t = by_id[i]
            s, o = normalize_label(t.subject), normalize_label(t.object)
            if s in topics or o in topics:
                answer = t.object if s in topics else t.subject
                break
        node = self.pipeline.grounder.link(answer) if answer else None
        self.manager.emit_generation(
            GenerationEvent(
                "reference", qid, answer, (answer,) if answer else (), {answer: node} if answer else {}
            )
        )
        ok = normalize_label(answer) in {normalize_label(a) for a in q.answers}
        self.manager.emit_feedback(FeedbackEvent("reference", qid, 1.0 if ok else 0.0, "gold"))
        self.manager.flush()
        self.feedbacks += 1
        return ok

    def first(self, q: Question, scope: str = "question") -> bool:
        """Whether a right relationship ranks first: among the retrieved relationships that touch
        the question's entity (``"question"``: the candidates the reader answers from) or among all
        retrieved ones (``"context"``)."""
        if q.text not in self.retrieved:
            return False
        ranked = self.ranked(q)
        if scope == "question":
            ranked = [i for i in ranked if i in self.on_topic[q.text]]
        return bool(ranked) and ranked[0] in q.right

    def raw(self, ids: Sequence[str]) -> dict[str, float]:
        return self.manager.learned_scores("triple", list(ids))

    def close(self) -> None:
        self.manager.close()


@dataclass
class Outcome:
    needed: list[
        int | None
    ]  # per question: feedbacks on it until its right relationship ranks first for good
    right_last: int  # questions answered right in the last round
    first_in_context: int  # questions whose right relationship ranks first among all retrieved at the end
    watched: dict[str, float]


def _rotation(
    graph: GraphView, questions: Sequence[Question], credit: str, evaluator: str | None, rounds: int
) -> Outcome:
    """Ask every question in turn for ``rounds`` rounds, one oracle feedback each."""
    run = Run(graph, credit, evaluator)
    since: dict[str, int | None] = {q.text: None for q in questions}
    right_last = 0
    n = 0
    for r in range(1, rounds + 1):
        right_last = 0
        for q in questions:
            n += 1
            right_last += run.ask(q, n)
            if r == 1 and run.first_before:
                since[q.text] = 0  # first before any feedback on it
            if run.first(q):
                since[q.text] = since[q.text] if since[q.text] is not None else r
            else:
                since[q.text] = None
    out = Outcome(
        [since[q.text] for q in questions],
        right_last,
        sum(run.first(q, "context") for q in questions),
        run.raw(list(WATCH.values())),
    )
    run.close()
    return out


def _alone_bad(
    graph: GraphView, questions: Sequence[Question], credit: str, cap: int, everything: bool
) -> dict[str, int | None]:
    """Each question alone, fresh learner: bad feedbacks until its right relationship ranks first."""
    out: dict[str, int | None] = {}
    for q in questions:
        run = Run(graph, credit, None, everything)
        out[q.text] = None
        for n in range(1, cap + 1):
            ok = run.ask(q, n)
            if run.first(q):
                out[q.text] = n if not ok else n - 1  # bad feedbacks given before it rose
                break
            if ok:
                break
        run.close()
    return out


def _spo(t: Triple) -> tuple[str, str, str]:
    return normalize_label(t.subject), normalize_label(t.predicate), normalize_label(t.object)


def _world(seed: int = 0) -> tuple[GraphView, list[Question]]:
    from triage_plugins.offline.extractor import extract_chunk
    from triage_plugins.offline.world import generate_world

    world = generate_world(seed)
    manager = TriageManager(":memory:", config=TriageConfig(), entry_points=False)
    pipeline = ReferencePipeline(manager)
    pipeline.index_chunks(world.chunks(), extract_chunk, ontology=world.ontology())
    graph = pipeline.graph
    by_spo = {_spo(t): t.id for t in graph.triples}
    questions = []
    for q in world.questions:
        if q.hops == 1 and len(q.paths) == 1 and len(q.answers) == 1:
            g = q.paths[0][0]
            right = by_spo.get(_spo(g))
            if right is not None:
                questions.append(Question(q.text, tuple(q.answers), (right,)))
    manager.close()
    return graph, questions


def _fmt(values: Sequence[int | None]) -> str:
    """``values``: per question, feedbacks on it until its right relationship ranked first for good
    (0: first before any feedback; ``None``: not first at the end)."""
    learned = [v for v in values if v is not None and v > 0]
    wrong = sum(1 for v in values if v != 0)
    med = statistics.median(learned) if learned else "-"
    mean = f"{statistics.mean(learned):.1f}" if learned else "-"
    return (
        f"{sum(1 for v in values if v == 0)}/{len(values)} first before feedback; of the {wrong} others "
        f"{len(learned)} first for good after a median {med} (mean {mean}) feedbacks each; "
        + " ".join("-" if v is None else str(v) for v in values)
    )


def _outcome(o: Outcome, n: int) -> str:
    return (
        f"feedbacks needed per question: {_fmt(o.needed)}\n"
        f"                right answers in the last round {o.right_last}/{n}; "
        f"right relationship first in the whole context {o.first_in_context}/{n}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=4, help="worlds (seeds 0..N-1) for the world scenario")
    parser.add_argument("--scenario", default="all", choices=("planted", "planted-bad", "world", "all"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    graph = GraphView(PLANTED_TRIPLES)
    if args.scenario in ("planted", "all"):
        print(
            f"\nplanted: {len(PLANTED_TRIPLES)} relationships, {len(PLANTED_QUESTIONS)} questions in turn, "
            f"{args.rounds} rounds"
        )
        for evaluator in ("answer", "gold"):
            for credit in RULES:
                o = _rotation(graph, PLANTED_QUESTIONS, credit, evaluator, args.rounds)
                print(f"  {evaluator:<6} credit={credit:<6} {_outcome(o, len(PLANTED_QUESTIONS))}")
                watched = "; ".join(f"{k} {o.watched.get(v, 100.0):.1f}" for k, v in WATCH.items())
                print(f"                raw after: {watched}")
    if args.scenario in ("planted-bad", "all"):
        print(
            f"\nplanted-bad: each question alone, bad feedback until its right relationship ranks first (cap {args.rounds})"
        )
        for everything, what in (
            (False, "light-relation retrieval"),
            (True, "all 27 relationships retrieved"),
        ):
            for credit in RULES:
                out = _alone_bad(graph, PLANTED_QUESTIONS, credit, args.rounds, everything)
                print(f"  {what}, credit={credit:<6} bad feedbacks needed: {_fmt(list(out.values()))}")
    if args.scenario in ("world", "all"):
        worlds = [_world(seed) for seed in range(args.seeds)]
        n_q = sum(len(q) for _, q in worlds)
        n_t = "/".join(str(len(g.triples)) for g, _ in worlds)
        print(
            f"\nworld (seeds 0-{args.seeds - 1}): {n_t} relationships, {n_q} 1-hop questions (each world's "
            f"in turn), {args.rounds} rounds"
        )
        for evaluator in ("answer", "gold"):
            for credit in RULES:
                runs = [_rotation(g, q, credit, evaluator, args.rounds) for g, q in worlds]
                o = Outcome(
                    [v for r in runs for v in r.needed],
                    sum(r.right_last for r in runs),
                    sum(r.first_in_context for r in runs),
                    {},
                )
                print(f"  {evaluator:<6} credit={credit:<6} {_outcome(o, n_q)}")
    print(f"\n{time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
