"""Feedback learning users can trust, in the real frameworks (issue #30).

The planted-fact film corpus of ``benchmarks/planted.py`` is indexed by the real LightRAG, Microsoft
GraphRAG and LlamaIndex ``PropertyGraphIndex`` (offline: only the LLM, the embedder and the
tokenizer are the repository's deterministic stand-ins), each instrumented as its adapter documents
with reweighting on. Round 0 is static; then three rounds of oracle feedback on the training
questions (1.0 when the answer names the gold answer, else 0.0), the held-out questions (never
rated) measured after each round. Asserted per configuration and learner unit (triple, chunk):

- the planted facts mislead in round 0 (else nothing below would be tested);
- no planted fact's unit rises above its initial score (100), in any round;
- no true twin's unit (a true fact on a planted fact's entity pair) falls below 100;
- held-out accuracy is never below round 0's;
- with a cut (top_n / top_k / token budget), accuracy on control questions — relation types no
  training question asks — is never below round 0's;
- chunk unit: no planted chunk is promoted.

Each framework runs in its own interpreter (``planted.run_isolated``, ``PYTHONHASHSEED=0``:
LlamaIndex orders triplets by iterating a set of strings): measured on 2 cores, 14-20 s for LightRAG,
9-13 s for LlamaIndex, 30-50 s for GraphRAG (its imports and first index build), 51-56 s in all. The learner is reached through
public APIs only, so a change to its credit rule shows here unchanged. The per-round numbers:
``python benchmarks/bench_planted.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 3


def _load_planted():
    spec = importlib.util.spec_from_file_location("_triage_planted", ROOT / "benchmarks" / "planted.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


planted = _load_planted()
CASES = [
    pytest.param(name, unit, id=f"{name}-{unit}") for name, c in planted.CONFIGS.items() for unit in c.units
]


@pytest.fixture(scope="module")
def runs():
    """framework -> its configurations' reports, each framework run once per module (lazily)."""
    done: dict[str, object] = {}

    def get(framework: str):
        if framework not in done:
            done[framework] = planted.run_isolated(planted.FRAMEWORKS[framework], ("triple", "chunk"), ROUNDS)
        return done[framework]

    return get


def _report(runs, name: str, unit: str):
    outcome = runs(planted.CONFIGS[name].framework)
    if outcome.unavailable:
        pytest.skip(f"{name}: {outcome.unavailable}")
    return next(r for r in outcome.reports if r.config == name and r.unit == unit)


def _by_round(report, field: str, labels) -> dict[str, list[float]]:
    return {label: [getattr(r, field)[label] for r in report.rows] for label in labels}


def _shown(scores: dict[str, list[float]]) -> dict[str, list[float]]:
    return {label: [round(s, 1) for s in values] for label, values in scores.items()}


def test_corpus_states_every_fact_in_a_shape_the_offline_extractor_reads():
    assert planted.check_corpus() == []
    assert 25 <= len(planted.DOCUMENTS) <= 30
    with_twin = [p for p in planted.PLANTED if planted.twins(p)]
    assert with_twin and len(with_twin) < len(planted.PLANTED)  # planted facts with and without a twin
    assert {q.split for q in planted.QUESTIONS} == {"train", "heldout"}
    assert any(q.control for q in planted.QUESTIONS)
    assert all(q.split == "heldout" for q in planted.QUESTIONS if q.control)


@pytest.mark.parametrize(("name", "unit"), CASES)
def test_planted_facts_mislead_before_any_feedback(runs, name, unit):
    report = _report(runs, name, unit)
    first = report.rows[0]
    assert first.scored == 0  # round 0 is static: nothing learned yet
    assert first.misled > 0, f"{name}: no planted fact outranks its true counterpart in round 0"
    assert not [n for n in report.notes if n.startswith("no ")], report.notes


@pytest.mark.parametrize(("name", "unit"), CASES)
def test_no_planted_fact_rises_above_its_initial_score(runs, name, unit):
    report = _report(runs, name, unit)
    risen = {
        label: scores
        for label, scores in _by_round(report, "planted", report.rows[0].planted).items()
        if max(scores) > planted.INIT + planted.EPS
    }
    shared = f"; sharing a unit with a true twin: {report.shared}" if report.shared else ""
    assert not risen, (
        f"{name} ({report.setup}), {unit} unit: planted facts rose (raw score by round): {_shown(risen)}{shared}"
    )


@pytest.mark.parametrize(("name", "unit"), CASES)
def test_no_true_twin_falls_below_its_initial_score(runs, name, unit):
    report = _report(runs, name, unit)
    fallen = {
        label: scores
        for label, scores in _by_round(report, "twins", report.rows[0].twins).items()
        if min(scores) < planted.INIT - planted.EPS
    }
    shared = f"; sharing a unit with a planted fact: {report.shared}" if report.shared else ""
    assert not fallen, (
        f"{name} ({report.setup}), {unit} unit: true twins fell (raw score by round): {_shown(fallen)}{shared}"
    )


FIRST_LINE = pytest.mark.xfail(
    strict=True,
    reason="LlamaIndex's default stand-in reader answers with the first 's -> p -> o' line of the "
    "context whatever the question asks: demoting the planted 'Christopher Nolan was born in Paris' "
    "chunk (right) lets 'Christopher Nolan directed Inception' come first, and 'What is the birthplace "
    "of Christopher Nolan?' (whose London chunk is not retrieved) is then answered 'Inception'. The "
    "relation-aware reader (llamaindex-reader-top3) keeps round 0.",
)
HELDOUT_CASES = [
    pytest.param(*c.values, id=c.id, marks=FIRST_LINE if c.values in {("llamaindex", "chunk"), ("llamaindex-top3", "chunk")} else ())
    for c in CASES
]  # fmt: skip


@pytest.mark.parametrize(("name", "unit"), HELDOUT_CASES)
def test_heldout_accuracy_never_below_round_0(runs, name, unit):
    report = _report(runs, name, unit)
    accuracy = [round(r.heldout_acc, 3) for r in report.rows]
    assert min(accuracy) >= accuracy[0], (
        f"{name} ({report.setup}), {unit} unit: held-out accuracy by round {accuracy}"
    )


@pytest.mark.parametrize(("name", "unit"), CASES)
def test_control_accuracy_keeps_round_0_with_a_cut(runs, name, unit):
    report = _report(runs, name, unit)
    if not report.cut:
        pytest.skip(f"{name} does not cut the context")
    accuracy = [round(r.control_acc, 3) for r in report.rows]
    assert min(accuracy) >= accuracy[0], (
        f"{name} ({report.setup}), {unit} unit: accuracy on unrated relation types by round {accuracy}"
    )


@pytest.mark.parametrize("name", [n for n, c in planted.CONFIGS.items() if "chunk" in c.units])
def test_planted_chunks_are_never_promoted(runs, name):
    report = _report(runs, name, "chunk")
    promoted = {
        label: scores
        for label, scores in _by_round(report, "planted", report.rows[0].planted).items()
        if max(scores) > planted.INIT + planted.EPS
    }
    assert not promoted, (
        f"{name} ({report.setup}): planted chunks promoted (raw score by round): {_shown(promoted)}"
    )
