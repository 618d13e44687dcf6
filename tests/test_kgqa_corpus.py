"""The PathQuestion-derived comparison corpus (triage compare --corpus pq-2h; #18 point 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from triage_plugins.adapter_kit.runner import gold_hit
from triage_plugins.apps.kgqa_corpus import display_name, pathquestion_corpus
from triage_plugins.contract.errors import DatasetError
from triage_plugins.offline.extractor import extract_chunk, extract_records
from triage_plugins.offline.templates import render_kb_fact


def test_kb_fact_sentences_read_back() -> None:
    text = render_kb_fact("Ada Of Lind-Berg", "place_of_birth", "New York") + " Ada Lind is married to Bo."
    records = extract_records(text)
    assert [(r.subject, r.predicate, r.object) for r in records] == [
        ("Ada Of Lind-Berg", "place_of_birth", "New York"),
        ("Ada Lind", "spouse", "Bo"),
    ]


def test_display_names() -> None:
    assert display_name("frederica_of_mecklenburg-strelitz") == "Frederica Of Mecklenburg-Strelitz"
    assert display_name("j_p_morgan_jr") == "J P Morgan Jr"
    assert display_name("&_co") is None  # would not read back as a name


def test_every_gold_path_is_in_the_documents(shared_data: Path) -> None:
    corpus = pathquestion_corpus("pq-2h", n_questions=80, n_documents=120, root=shared_data)
    assert len(corpus.questions) == 80
    assert len(corpus.chunks) >= 120
    extracted = {t.triple.id for chunk in corpus.chunks for t in extract_chunk(chunk)}
    for q in corpus.questions:
        assert q.gold is not None and q.gold.paths
        assert all(t.id in extracted for path in q.gold.paths for t in path), q.text
        assert q.gold.entities[0] in q.text  # the topic is written as its name
        assert " 's" not in q.text and q.text[0].isupper()
        assert gold_hit(q.gold.answers[0].upper(), q.gold)  # the one gold-hit rule ignores casing


def test_same_seed_same_corpus_other_seed_other_questions(shared_data: Path) -> None:
    a = pathquestion_corpus("pq-2h", seed=1, n_questions=30, n_documents=50, root=shared_data)
    b = pathquestion_corpus("pq-2h", seed=1, n_questions=30, n_documents=50, root=shared_data)
    c = pathquestion_corpus("pq-2h", seed=2, n_questions=30, n_documents=50, root=shared_data)
    assert a == b
    assert [q.id for q in a.questions] != [q.id for q in c.questions]


def test_missing_data_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="PQ-2H.txt: not found"):
        pathquestion_corpus("pq-2h", root=tmp_path)
    with pytest.raises(DatasetError, match="unknown KGQA corpus"):
        pathquestion_corpus("pq-9h", root=tmp_path)


def test_triage_compare_on_the_pathquestion_corpus(shared_data: Path, tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "pq.json"
    cmd = [
        sys.executable, "-m", "triage_plugins.cli", "compare", "--corpus", "pq-2h", "--frameworks", "reference",
        "--modes", "krag", "--max-questions", "20", "--quiet", "--json", str(out),
    ]  # fmt: skip
    env = {**os.environ, "TRIAGE_DATA_DIR": str(shared_data)}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["corpus"].startswith("pq-2h (seed 0, ")
    (row,) = result["rows"]
    assert row["queries"] == 20 and row["gold"]["Hits@1"]["mean"] is not None


def test_triage_compare_without_the_data_says_where_it_looked(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "triage_plugins.cli", "compare", "--corpus", "pq-3h", "--quiet"]
    env = {**os.environ, "TRIAGE_DATA_DIR": str(tmp_path / "nowhere")}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert (
        "error:" in done.stderr and "PQ-3H.txt: not found" in done.stderr and "Traceback" not in done.stderr
    )
