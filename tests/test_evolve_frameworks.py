"""``triage evolve-bench --framework``: EvoRAG's protocol through a real adapter (#30)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from triage_plugins.apps.evolve_frameworks import (
    _forward_paths,
    noise_answers,
    run_framework_bench,
    seed_kb,
    training_set,
)
from triage_plugins.contract.events import Triple
from triage_plugins.datasets.qa import QAItem


def _item(*path: Triple, answers: tuple[str, ...]) -> QAItem:
    return QAItem("q", "?", answers, (path[0].subject,), (tuple(path),))


def test_noise_answers_are_the_names_only_an_injected_fact_leads_to() -> None:
    true1, true2 = Triple.of("ann", "spouse", "bob"), Triple.of("bob", "nationality", "france")
    fake = Triple.of("ann", "spouse", "carl")
    after_fake = Triple.of("carl", "nationality", "spain")
    twin = Triple.of("carl", "nationality", "france")  # reached through noise, but a gold answer
    facts = [true1, true2, fake, after_fake, twin]
    item = _item(true1, true2, answers=("france",))
    assert noise_answers(facts, frozenset({fake.id}), item) == {"Spain"}
    assert noise_answers(facts, frozenset(), item) == frozenset()


def test_forward_paths_start_at_the_topic_and_keep_the_rank_order() -> None:
    a = Triple.of("ann", "spouse", "bob")
    b = Triple.of("bob", "nationality", "france")
    c = Triple.of("ann", "gender", "female")
    d = Triple.of("zed", "spouse", "ann")  # into the topic: not a forward step from it
    paths = _forward_paths("ann", [c, a, d, b])
    assert paths == [[c], [a], [a, b]]


@pytest.fixture
def pq(shared_data: Path) -> tuple[Path, Path]:
    folder = shared_data / "pathquestion"
    return folder / "2H-kb.txt", folder / "PQ-2H.txt"


def test_seed_kb_puts_each_injected_fact_in_a_document_of_its_own(pq: tuple[Path, Path]) -> None:
    from triage_plugins.apps.evolve import load_bench_data

    triples, items, _ = load_bench_data(*pq)
    base = seed_kb(triples, items, seed=3, sample=30, noise=0.5)
    assert len(base.test) == 30 and base.note["conflicting"] > 0
    noise_docs = [c for c in base.chunks if c.doc_id.startswith("noise:")]
    clean_docs = [c for c in base.chunks if not c.doc_id.startswith("noise:")]
    assert noise_docs and clean_docs
    injected = [t for t in base.facts if t.id in base.injected]
    from triage_plugins.apps.kgqa_corpus import display_name
    from triage_plugins.offline.templates import render_kb_fact

    for t in injected:  # every injected sentence sits in a noise document, never beside true facts
        sentence = render_kb_fact(display_name(t.subject), t.predicate, display_name(t.object))
        assert any(sentence in c.text for c in noise_docs)
        assert not any(sentence in c.text for c in clean_docs)
    corpus = base.corpus()
    assert all(not q.rated for q in corpus.questions) and len(corpus.questions) == 30


def test_training_questions_come_from_the_retrieved_paths_only(pq: tuple[Path, Path]) -> None:
    from triage_plugins.apps.evolve import load_bench_data

    triples, items, _ = load_bench_data(*pq)
    base = seed_kb(triples, items, seed=0, sample=20, noise=0.2)
    assert training_set(base, {}) == []
    q = base.test[0]
    path = list(q.gold_paths[0][:1])
    train = training_set(base, {q.id: [path]})
    assert train and {t.topic for t in train} == {q.topic_entities[0]}
    corpus = base.corpus(train)
    rated = [x for x in corpus.questions if x.rated]
    assert len(rated) == len(train) and all(x.gold is not None for x in rated)


def test_through_real_lightrag_held_out_questions_are_never_rated(pq: tuple[Path, Path]) -> None:
    pytest.importorskip("lightrag")
    result = run_framework_bench("lightrag", *pq, mode="local", sample=12, iterations=1, seed=1)
    (note,) = result.per_seed
    assert note["test"] == 12 and note["train"] > 0
    assert [r.round for r in result.rounds] == [0, 1]
    static = result.rounds[0]
    assert (
        static.held_out is not None
        and static.low is not None
        and static.low <= static.held_out <= static.high
    )
    assert result.gain is not None and result.gain_interval is not None
    assert result.gain == pytest.approx(result.rounds[-1].held_out - static.held_out)
    wrong, misled = note["misled_by_round"][0]
    assert wrong == round(12 * (1 - static.held_out)) and 0 <= misled <= wrong
    assert "misled by the noise" in result.notes[0]


def test_cli_framework_options_fail_in_one_line(pq: tuple[Path, Path], tmp_path: Path) -> None:
    base = [
        sys.executable,
        "-m",
        "triage_plugins.cli",
        "evolve-bench",
        "--kb",
        str(pq[0]),
        "--questions",
        str(pq[1]),
    ]
    for extra, says in (
        (["--framework", "lightrgb"], "did you mean lightrag"),
        (["--mode", "local"], "--mode needs --framework"),
        (["--framework", "lightrag", "--unit", "chunk"], "--framework runs one PathQuestion KB file"),
    ):
        done = subprocess.run(base + extra, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode != 0 and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_cli_framework_run_writes_json(pq: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("llama_index.core")
    out = tmp_path / "fw.json"
    cmd = [
        sys.executable, "-m", "triage_plugins.cli", "evolve-bench", "--kb", str(pq[0]), "--questions", str(pq[1]),
        "--framework", "llamaindex", "--mode", "vector", "--sample", "8", "--iterations", "1", "--quiet", "--json", str(out),
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Held-out gain after 1 round(s)" in done.stdout
    data = json.loads(out.read_text())
    assert data["settings"]["framework"] == "llamaindex" and data["settings"]["mode"] == "vector"
    assert [r["round"] for r in data["rounds"]] == [0, 1]
