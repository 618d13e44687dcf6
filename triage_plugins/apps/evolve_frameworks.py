"""``triage evolve-bench --framework``: EvoRAG's protocol through a real framework's adapter (#30).

:mod:`triage_plugins.apps.evolve` runs EvoRAG's experiment (§6.1–6.3) on the reference pipeline,
which searches the KB itself. This module runs the same protocol through any framework runner
``triage compare`` knows (:func:`~triage_plugins.apps.compare.runner_registry`): the framework
indexes *documents* made from the noisy KB with its own (offline stand-in) LLM, retrieves with its
own retriever, and the learner's scores reach it through its adapter — as in a deployment. Per seed:

1. **Test questions**: ``sample`` PathQuestion questions (seeded) whose gold path is in the KB and
   whose entity names read back (:func:`~triage_plugins.apps.kgqa_corpus.display_name`).
2. **Noise**: :func:`~triage_plugins.apps.evolve_noise.inject_noise` adds a conflicting fact (and an
   irrelevant one) on ``noise`` of the test questions' gold steps, as the reference bench does.
3. **Training questions** (EvoRAG §6.1): as many as test questions, generated in the test
   questions' neighbourhood of the noisy graph (1–2 hop walks from a test topic), answered on the
   clean KB; forward steps only (a reverse step has no wording a reader could follow).
4. **Documents**: one per subject, its clean facts as sentences
   (:func:`~triage_plugins.offline.templates.render_kb_fact`); the injected facts about a subject
   in a document of their own (``noise:<subject>``): a conflicting fact comes from another,
   outdated source (EvoRAG §6.1), so a chunk score can separate it from the true one.
5. **Rounds** (:func:`~triage_plugins.apps.compare.run_compare` with the caller's split): round 0 is
   the static baseline (reweighting on, no feedback yet); rounds 1…K rate every training question
   with gold feedback and then ask every question again. The test questions are never rated: their
   Hits@1 per round is the held-out accuracy, and the gain is last round minus round 0.

Departures from :mod:`~triage_plugins.apps.evolve`, each forced by a real framework: one fixed
training set asked every round (each round re-indexes nothing but asks every question, so fresh
sets would multiply the run time); no KG evolution (fusion adds triples to a graph the framework
owns; suppression needs the learner's evolve step, which no adapter runs on its own), so what is
measured is the contribution scores alone, ranking the framework's own context; α at the learner's
default (learned, from 0.5), as a deployment runs it.
"""

from __future__ import annotations

import random
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage_plugins.adapter_kit.runner import (
    Corpus,
    Progress,
    Question,
    gold_hit,
    no_progress,
    parse_query_id,
)
from triage_plugins.apps.evolve_noise import TrainingQuery, inject_noise, relation_path, training_queries
from triage_plugins.apps.kgqa_corpus import display_name, named_question
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import Chunk, Triple
from triage_plugins.datasets.qa import QAItem
from triage_plugins.offline.templates import render_kb_fact

if TYPE_CHECKING:
    from rich.console import Console

    from triage_plugins.report.results import CompareResult
    from triage_plugins.store.base import Store

__all__ = [
    "FrameworkBenchResult",
    "FrameworkRound",
    "SeedKB",
    "noise_answers",
    "retrieved_paths",
    "seed_kb",
    "training_set",
    "render_framework_bench",
    "run_framework_bench",
]


@dataclass(frozen=True)
class FrameworkRound:
    """One round, pooled over seeds: held-out Hits@1 (with its bootstrap 95 % interval over the
    held-out questions, seeds pooled) and the training questions' Hits@1."""

    round: int
    held_out: float | None
    low: float | None
    high: float | None
    rated: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "held_out_hits_at_1": self.held_out,
            "interval": [self.low, self.high],
            "rated_hits_at_1": self.rated,
        }


@dataclass
class FrameworkBenchResult:
    """Rounds of one framework × mode, pooled over seeds, and the held-out gain (last − round 0)."""

    settings: dict[str, Any]
    rounds: list[FrameworkRound]
    gain: float | None
    gain_interval: tuple[float, float] | None
    per_seed: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "rounds": [r.to_dict() for r in self.rounds],
            "gain": self.gain,
            "gain_interval": None if self.gain_interval is None else list(self.gain_interval),
            "per_seed": self.per_seed,
            "notes": self.notes,
            "seconds": self.seconds,
        }


# --------------------------------------------------------------------------- corpus


def _named(item: QAItem) -> bool:
    nodes = {
        *item.topic_entities,
        *item.answers,
        *(n for p in item.gold_paths for t in p for n in (t.subject, t.object)),
    }
    return all(display_name(n) for n in nodes)


def _question(qid: str, text: str, topic: str, answers: Sequence[str], paths: Any, rated: bool) -> Question:
    return replace(named_question(qid, text, (topic,), answers, paths), rated=rated)


def _documents(facts: Sequence[Triple], injected: frozenset[str]) -> tuple[Chunk, ...]:
    """One document per (source, subject): clean facts in ``<subject>``, injected in ``noise:<subject>``."""
    by_doc: dict[str, list[Triple]] = defaultdict(list)
    for t in facts:
        by_doc[("noise:" if t.id in injected else "") + t.subject].append(t)
    chunks = []
    for doc in sorted(by_doc):
        subject = by_doc[doc][0].subject
        name = display_name(subject) or subject
        text = " ".join(
            render_kb_fact(name, t.predicate, display_name(t.object) or t.object) for t in by_doc[doc]
        )
        chunks.append(Chunk(f"{doc}#p0", doc, text, {"paragraph": 0, "section": name}))
    return tuple(chunks)


def noise_answers(facts: Sequence[Triple], injected: frozenset[str], item: QAItem) -> frozenset[str]:
    """The names ``item``'s relation path reaches from its topic in the noisy ``facts`` *only*
    through an injected fact: an answer naming one of them was misled by the noise."""
    out: set[str] = set()
    by_node: dict[str, list[Triple]] = defaultdict(list)
    for t in facts:
        by_node[t.subject].append(t)
        by_node[t.object].append(t)
    topic = item.topic_entities[0]
    for path in item.gold_paths:
        frontier = {(topic, False)}
        for rel, d in relation_path(path, topic):
            frontier = {
                (t.object if d == "+" else t.subject, bad or t.id in injected)
                for node, bad in frontier
                for t in by_node[node]
                if t.predicate == rel and (t.subject if d == "+" else t.object) == node
            }
        out |= {node for node, bad in frontier if bad}
    return frozenset(display_name(n) or n for n in out - set(item.answers))


@dataclass
class SeedKB:
    """One seed's test questions, noisy KB and documents (the corpus before training questions)."""

    seed: int
    test: list[QAItem]
    clean: list[Triple]
    facts: list[Triple]
    injected: frozenset[str]
    chunks: tuple[Chunk, ...]
    note: dict[str, Any]

    def corpus(self, train: Sequence[TrainingQuery] = ()) -> Corpus:
        """The documents with the test questions (held out) and ``train`` (rated)."""
        from triage_plugins.offline.extractor import extract_chunk

        questions = [
            _question(q.id, q.text, q.topic_entities[0], q.answers, q.gold_paths, rated=False)
            for q in self.test
        ] + [_question(t.id, t.text, t.topic, t.answers, t.gold_paths, rated=True) for t in train]
        name = f"PathQuestion evolve-bench (seed {self.seed}, {len(self.chunks)} documents)"
        return Corpus(name, self.chunks, tuple(questions), None, extract_chunk)


def seed_kb(kb: Sequence[Triple], items: Sequence[QAItem], *, seed: int, sample: int, noise: float) -> SeedKB:
    """Seed ``seed``: ``sample`` test questions, the noise injected on their gold steps, and the
    documents of every node on their gold paths and at both ends of an injected fact (the wrong
    entity's own facts continue the path it misleads into); the note holds the sizes and, per test
    question, the wrong names only the noise leads to (:func:`noise_answers`)."""
    usable = [q for q in items if _named(q)]
    rng = random.Random(f"framework-sample-{seed}")
    test = sorted(rng.sample(usable, min(sample, len(usable))), key=lambda q: q.id)
    clean = [t for t in kb if display_name(t.subject) and display_name(t.object)]
    noisy = inject_noise(clean, test, noise, seed=seed)
    noisy_facts = [t for t in noisy.triples if display_name(t.subject) and display_name(t.object)]
    needed = {n for q in test for p in q.gold_paths for t in p for n in (t.subject, t.object)}
    needed |= {n for t in (*noisy.conflicting, *noisy.irrelevant) for n in (t.subject, t.object)}
    facts = [t for t in noisy_facts if t.subject in needed]
    chunks = _documents(facts, noisy.injected_ids)
    note = {
        "seed": seed,
        "test": len(test),
        "documents": len(chunks),
        "facts": len(facts),
        "conflicting": len(noisy.conflicting),
        "noisy_steps": len(noisy.noisy_steps),
        "gold_steps": noisy.n_steps,
        "noise_answers": {
            q.id: sorted(a) for q in test if (a := noise_answers(facts, noisy.injected_ids, q))
        },
    }
    return SeedKB(seed, test, clean, facts, noisy.injected_ids, chunks, note)


def retrieved_paths(store: Store, base: SeedKB, framework: str) -> dict[str, list[list[Triple]]]:
    """Test question id -> the KB paths (1–2 hops from its topic, forward) through the facts the
    framework retrieved for it, best rank first. A retrieved relation is mapped back to the KB facts
    between its two entities (names compared case-insensitively; a framework's predicate is its own
    wording, so every fact on that pair counts)."""
    by_pair: dict[frozenset[str], list[Triple]] = defaultdict(list)
    for t in base.facts:
        by_pair[frozenset(_low(n) for n in (t.subject, t.object))].append(t)
    topics = {q.id: q.topic_entities[0] for q in base.test}
    out: dict[str, list[list[Triple]]] = {}
    for event in store.events("retrieval", framework=framework):
        question, _, round_ = parse_query_id(event.query_id)  # type: ignore[attr-defined]
        if round_ or question not in topics:
            continue
        ranked: list[Triple] = []
        for r in event.subgraph.triples:  # type: ignore[attr-defined]
            ranked.extend(by_pair.get(frozenset((r.subject.lower(), r.object.lower())), ()))
        out[question] = _forward_paths(topics[question], list(dict.fromkeys(ranked)))
    return out


def _low(node: str) -> str:
    return (display_name(node) or node).lower()


def _forward_paths(topic: str, ranked: Sequence[Triple]) -> list[list[Triple]]:
    """1- and 2-hop forward paths from ``topic`` through ``ranked`` facts, by their worse rank."""
    rank = {t.id: k for k, t in enumerate(ranked)}
    first = [t for t in ranked if t.subject == topic]
    paths = [([t], rank[t.id]) for t in first]
    paths += [
        ([a, b], max(rank[a.id], rank[b.id]))
        for a in first
        for b in ranked
        if b.subject == a.object and b != a
    ]
    return [p for p, _ in sorted(paths, key=lambda pr: pr[1])]


def training_set(base: SeedKB, paths: dict[str, list[list[Triple]]], per_test: int = 1) -> list[TrainingQuery]:
    """EvoRAG §6.1: ``per_test`` training questions per test question (fewer when the retrieved
    paths hold fewer distinct ones), sampled in the paths retrieved for the test questions
    (rank-weighted), answered on the clean KB, forward steps only."""
    usable = [q for q in base.test if paths.get(q.id)]
    if not usable:
        return []
    n = per_test * len(base.test)
    pool = training_queries(base.clean, usable, 4 * n, seed=base.seed, paths=paths, max_hops=2)
    return [
        t for t in pool
        if all(d == "+" for _, d in t.rel_path) and all(display_name(n) for n in (t.topic, *t.answers))
    ][:n]  # fmt: skip


# --------------------------------------------------------------------------- run


def run_framework_bench(
    framework: str,
    kb: str | Path,
    questions: str | Path,
    *,
    mode: str | None = None,
    noise: float = 0.2,
    iterations: int = 3,
    sample: int = 100,
    seed: int = 0,
    seeds: int = 1,
    train_per_test: int = 1,
    progress: Progress = no_progress,
) -> FrameworkBenchResult:
    """EvoRAG's protocol (module docstring) through the compare runner ``framework`` in ``mode``
    (default: the runner's first mode, as in ``triage compare``)."""
    from triage_plugins.apps.compare import run_compare, runner_registry
    from triage_plugins.apps.evolve import load_bench_data
    from triage_plugins.store import open_store

    (runner,) = runner_registry().select([framework])  # an unknown name: ConfigError, close matches
    ok, why = runner.available()
    if not ok:
        raise ConfigError(f"{framework} cannot run here: {why}")
    if iterations < 1 or seeds < 1 or sample < 2:
        raise ConfigError("--iterations and --seeds must be at least 1 and --sample at least 2")
    if not 0.0 <= noise <= 1.0:
        raise ConfigError(f"noise must lie in [0, 1], got {noise!r}")
    mode = mode or runner.modes[0]
    if mode not in runner.modes:
        raise ConfigError(f"{framework} has no mode {mode!r}; its modes: {', '.join(runner.modes)}")
    started = time.perf_counter()
    triples, items, load_note = load_bench_data(kb, questions)
    per_question: list[dict[int, dict[str, float]]] = []
    rated: list[dict[int, float | None]] = []
    result = FrameworkBenchResult({}, [], None, None)
    for s in range(seed, seed + seeds):
        base = seed_kb(triples, items, seed=s, sample=sample, noise=noise)
        note = base.note
        with open_store(":memory:") as store:  # the static pass the training questions are drawn from
            run_compare(
                base.corpus(), frameworks=[framework], modes=[mode], seed=s, progress=progress, store=store
            )
            train = training_set(base, retrieved_paths(store, base, framework), per_test=train_per_test)
        note["train"] = len(train)
        corpus = base.corpus(train)
        with open_store(":memory:") as store:
            compared = run_compare(
                corpus, frameworks=[framework], modes=[mode], feedback_rounds=iterations, seed=s,
                progress=progress, split=False, store=store,
            )  # fmt: skip
            held_ids = {q.id for q in corpus.questions if not q.rated}
            held, train_hits = _rounds_of(compared, framework, mode, held_ids)
            note["misled_by_round"] = _misled(store, note["noise_answers"], held)
        note["held_out_by_round"] = {k: _mean(v) for k, v in held.items()}
        result.per_seed.append(note)
        per_question.append({k: {f"{s}/{q}": x for q, x in v.items()} for k, v in held.items()})
        rated.append(train_hits)
    result.rounds, result.gain, result.gain_interval = _pool(per_question, rated, iterations)
    result.notes.append(_misled_note(result.per_seed, iterations))
    result.settings = {
        "framework": framework, "mode": mode, "kb": str(kb), "questions": str(questions),
        "noise": noise, "iterations": iterations, "sample": sample, "seed": seed, "seeds": seeds,
        "load": load_note,
    }  # fmt: skip
    result.seconds = time.perf_counter() - started
    return result


def _rounds_of(
    compared: CompareResult, framework: str, mode: str, held_ids: set[str]
) -> tuple[dict[int, dict[str, float]], dict[int, float | None]]:
    """Held-out Hits@1 per question and training Hits@1, per round, of the one row; a failed or
    unavailable row raises :class:`ConfigError` with its reason."""
    rows = [r for r in compared.rows if r.framework == framework and r.mode == mode]
    if not rows or rows[0].status != "ok":
        why = rows[0].reason if rows else "no row"
        raise ConfigError(f"{framework}/{mode} did not run: {why}")
    held: dict[int, dict[str, float]] = {}
    train: dict[int, float | None] = {}
    for r in rows[0].rounds:
        held[r.round] = {q: v for q, v in r.per_question.items() if q in held_ids}
        train[r.round] = r.rated
    return held, train


def _misled(
    store: Store, noise: dict[str, list[str]], held: dict[int, dict[str, float]]
) -> dict[int, list[int]]:
    """Per round: ``[wrong held-out answers, of which misled]`` — a wrong answer is *misled* when it
    names an entity only the injected noise leads to (:func:`noise_answers`): what reranking the
    same context can fix. Other failures are the framework's retrieval or reading."""
    answers: dict[tuple[str, int], str] = {}
    for event in store.events("generation"):
        question, _, round_ = parse_query_id(event.query_id)  # type: ignore[attr-defined]
        answers[(question, round_)] = event.answer  # type: ignore[attr-defined]
    out: dict[int, list[int]] = {}
    for k, values in held.items():
        wrong = [q for q, hit in values.items() if not hit]
        misled = [q for q in wrong if noise.get(q) and gold_hit(answers.get((q, k), ""), noise[q])]
        out[k] = [len(wrong), len(misled)]
    return out


def _misled_note(per_seed: list[dict[str, Any]], iterations: int) -> str:
    first = [sum(n["misled_by_round"][k][i] for n in per_seed) for k in (0, iterations) for i in (0, 1)]
    held = sum(n["test"] for n in per_seed)
    touched = sum(len(n["noise_answers"]) for n in per_seed)
    return (
        f"{touched} of {held} held-out questions have a wrong answer the injected noise leads to; "
        f"static: {first[0]} answered wrong, {first[1]} of them misled by the noise (the most that "
        f"reranking can fix); after round {iterations}: {first[2]} wrong, {first[3]} misled"
    )


def _mean(values: dict[str, float]) -> float | None:
    return statistics.fmean(values.values()) if values else None


def _pool(
    per_question: list[dict[int, dict[str, float]]],
    rated: list[dict[int, float | None]],
    iterations: int,
) -> tuple[list[FrameworkRound], float | None, tuple[float, float] | None]:
    """Rounds pooled over seeds, with bootstrap intervals over held-out questions (seeded)."""
    import numpy as np

    rng = np.random.default_rng(0)
    rounds: list[FrameworkRound] = []
    pooled = [
        {q: x for seed in per_question for q, x in seed.get(k, {}).items()} for k in range(iterations + 1)
    ]
    ids = sorted(pooled[0])
    draws = rng.integers(0, len(ids), size=(2000, len(ids))) if ids else None
    for k, values in enumerate(pooled):
        vec = np.array([values.get(q, 0.0) for q in ids])
        low = high = None
        if draws is not None:
            means = vec[draws].mean(axis=1)
            low, high = (float(x) for x in np.percentile(means, [2.5, 97.5]))
        train = [t[k] for t in rated if t.get(k) is not None]
        rounds.append(
            FrameworkRound(
                k, float(vec.mean()) if ids else None, low, high, statistics.fmean(train) if train else None
            )
        )
    if draws is None:
        return rounds, None, None
    diff = np.array([pooled[-1].get(q, 0.0) - pooled[0].get(q, 0.0) for q in ids])
    means = diff[draws].mean(axis=1)
    low, high = (float(x) for x in np.percentile(means, [2.5, 97.5]))
    return rounds, float(diff.mean()), (low, high)


# --------------------------------------------------------------------------- rendering


def render_framework_bench(result: FrameworkBenchResult, console: Console) -> None:
    """The rounds table (held-out first) and the gain line with its interval."""
    from rich.table import Table

    st = result.settings
    console.print(
        f"[bold]EvoRAG evolve-bench through {st['framework']}[/bold] ({st['mode']} mode) — "
        f"{Path(st['questions']).name}: noise {st['noise']:.0%}, {st['seeds']} seed(s) from {st['seed']}, "
        f"{st['sample']} held-out test questions per seed, as many rated training questions"
    )
    table = Table(title="Hits@1 per round (round 0: static, no feedback yet)")
    for col in ("round", "held-out", "95 % interval", "training (rated)"):
        table.add_column(col, justify="right")
    for r in result.rounds:
        table.add_row(
            "static" if r.round == 0 else str(r.round),
            "–" if r.held_out is None else f"{r.held_out:.1%}",
            "" if r.low is None else f"[{r.low:.1%}, {r.high:.1%}]",
            "–" if r.rated is None else f"{r.rated:.1%}",
        )
    console.print(table)
    if result.gain is not None and result.gain_interval is not None:
        lo, hi = result.gain_interval
        console.print(
            f"Held-out gain after {st['iterations']} round(s): [bold]{result.gain * 100:+.1f}[/bold] points "
            f"[{lo * 100:+.1f}, {hi * 100:+.1f}] (paired bootstrap over the held-out questions)"
        )
    for note in result.notes:
        console.print(f"note: {note}")
    console.print(f"{result.seconds:.0f} s")
