"""Dataset loaders: PathQuestion and MetaQA KBs and question files, auto-detected, no silent drops.

Synthetic files are written to tmp_path; the real files are read from ``../shared/data`` when
present (skipped otherwise) and checked against the counts in their SOURCE.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triage_plugins.contract.errors import DatasetError
from triage_plugins.contract.events import Triple
from triage_plugins.datasets import (
    KBIndex,
    detect_kb_format,
    detect_qa_format,
    iter_kb,
    load_kb,
    load_metaqa_annotations,
    load_questions,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- KB files


def test_tsv_kb(tmp_path):
    kb = _write(tmp_path / "kb.txt", "ann\tspouse\tbob\n\nbob\tparents\tcarl\r\nann\tspouse\tbob\n")
    triples = load_kb(kb)
    assert detect_kb_format(kb) == "tsv"
    assert triples == [Triple.of("ann", "spouse", "bob"), Triple.of("bob", "parents", "carl")]
    report = triples.report
    assert (report.lines, report.blank, report.duplicates, report.loaded, report.malformed) == (
        4,
        1,
        1,
        2,
        [],
    )


def test_pipe_kb_parts_are_concatenated(tmp_path):
    one = _write(tmp_path / "part1.txt", "Heat|directed_by|Michael Mann\nHeat|release_year|1995\n")
    two = _write(tmp_path / "part2.txt", "Heat|starred_actors|Al Pacino\n")
    triples = load_kb([one, two])
    assert detect_kb_format(one) == "pipe"
    assert [t.id for t in triples] == [
        "Heat|directed_by|Michael Mann",
        "Heat|release_year|1995",
        "Heat|starred_actors|Al Pacino",
    ]
    assert triples.report.files == [str(one), str(two)]
    assert list(iter_kb(two)) == [Triple.of("Heat", "starred_actors", "Al Pacino")]


def test_malformed_kb_line_raises_with_file_line_and_reason(tmp_path):
    kb = _write(tmp_path / "kb.txt", "a\tr\tb\nc\tr\n\nd\tr\t\n")
    with pytest.raises(DatasetError, match=r"kb\.txt:2: expected 3 tab-separated fields, got 2"):
        load_kb(kb)


def test_malformed_kb_lines_are_counted_when_not_strict(tmp_path, caplog):
    kb = _write(tmp_path / "kb.txt", "a\tr\tb\nc\tr\n\nd\tr\t \ne\tr\tf\n")
    triples = load_kb(kb, strict=False)
    assert [t.id for t in triples] == ["a|r|b", "e|r|f"]
    bad = triples.report.malformed
    assert [(m.line, m.reason) for m in bad] == [
        (2, "expected 3 tab-separated fields, got 2"),
        (4, "empty object"),
    ]
    assert "2 malformed" in str(triples.report)
    assert "malformed" in caplog.text


def test_kb_format_cannot_be_guessed(tmp_path):
    with pytest.raises(DatasetError, match=r"odd\.txt:2: cannot tell the KB format"):
        load_kb(_write(tmp_path / "odd.txt", "\njust some words\n"))
    with pytest.raises(DatasetError, match="empty"):
        load_kb(_write(tmp_path / "empty.txt", "\n\n"))
    with pytest.raises(DatasetError, match="no such file"):
        load_kb(tmp_path / "missing.txt")
    with pytest.raises(DatasetError, match="expected 3 '\\|'-separated fields, got 4"):
        load_kb(_write(tmp_path / "pipes.txt", "a|r|b\na|r|b|c\n"))


def test_kb_index_walks_in_both_directions():
    index = KBIndex(
        [
            Triple.of("F1", "starred_actors", "Kim"),
            Triple.of("F1", "directed_by", "Lee"),
            Triple.of("F2", "starred_actors", "Kim"),
            Triple.of("F2", "directed_by", "Max"),
        ]
    )
    paths = index.walk("Kim", [("starred_actors", "-"), ("directed_by", "+")])
    assert [[t.id for t in p] for p in paths] == [
        ["F1|starred_actors|Kim", "F1|directed_by|Lee"],
        ["F2|starred_actors|Kim", "F2|directed_by|Max"],
    ]
    assert index.walk("Kim", [("starred_actors", "+")]) == []
    assert len(index.paths_from("F1", 1)) == 2
    assert len(index.paths_from("Kim", 2, directed=False)) == 4


# --------------------------------------------------------------------------- PathQuestion


PQ_LINE = (
    "what is the place of birth of ann 's father ?\tparis(paris/lyon/)\t"
    "ann#parents#carl#place_of_birth#paris#<end>#paris\n"
)


def test_pathquestion_line(tmp_path):
    qa = _write(tmp_path / "PQ-2H.txt", PQ_LINE + "\n")
    kb = [Triple.of("ann", "parents", "carl"), Triple.of("carl", "place_of_birth", "paris")]
    items = load_questions(qa, kb=kb)
    assert detect_qa_format(qa) == "pathquestion"
    assert len(items) == 1 and items.report.blank == 1
    q = items[0]
    assert q.id == "PQ-2H-0"
    assert q.text == "what is the place of birth of ann 's father ?"
    assert q.answers == ("paris", "lyon")
    assert q.topic_entities == ("ann",)
    assert q.hops == 2
    assert q.gold_paths == (tuple(kb),)
    assert q.meta["answer"] == "paris" and q.meta["gold_path_in_kb"] is True
    assert q.gold().answers == ("paris", "lyon")


def test_pathquestion_pql_line_without_end_tail(tmp_path):
    qa = _write(tmp_path / "PQL.txt", " who is ann 's spouse ?\tbob(bob/)\tann#spouse#bob\n")
    (q,) = load_questions(qa)
    assert (q.text, q.answers, q.hops) == ("who is ann 's spouse ?", ("bob",), 1)
    assert q.gold_paths == ((Triple.of("ann", "spouse", "bob"),),)


def test_pathquestion_malformed_lines(tmp_path):
    bad_path = PQ_LINE + "q ?\tparis(paris/)\tann#parents#carl#place_of_birth\n"
    with pytest.raises(DatasetError, match=r"PQ\.txt:2: gold path must be"):
        load_questions(_write(tmp_path / "PQ.txt", bad_path))
    bad_answer = PQ_LINE + "q ?\tparis(paris/\tann#spouse#bob\n"
    with pytest.raises(DatasetError, match=r":2: answer field must look like"):
        load_questions(_write(tmp_path / "PQ2.txt", bad_answer))
    loose = load_questions(
        _write(tmp_path / "PQ3.txt", PQ_LINE + "only two\tfields#x\n" + PQ_LINE), strict=False
    )
    assert len(loose) == 2
    assert [(m.line, m.reason) for m in loose.report.malformed] == [
        (2, "expected 3 tab-separated fields, got 2")
    ]


# --------------------------------------------------------------------------- MetaQA


MQA = "who directed the movies starred by [Kim]\tLee|Max\nwhat genre is [F1]\tDrama\n"
MQA_KB = [
    Triple.of("F1", "starred_actors", "Kim"),
    Triple.of("F1", "directed_by", "Lee"),
    Triple.of("F2", "starred_actors", "Kim"),
    Triple.of("F2", "directed_by", "Max"),
    Triple.of("F1", "has_genre", "Drama"),
]


def _annotations(path: Path) -> Path:
    rows = [
        {"id": "2hop-x-0", "line": 0, "topic": "Kim", "qtype": "actor_to_movie_to_director", "hops": 2,
         "rel_path": [["starred_actors", "-"], ["directed_by", "+"]], "answerable_exact": True},
        {"id": "1hop-x-1", "line": 1, "topic": "F1", "qtype": "movie_to_genre", "hops": 1,
         "rel_path": [["has_genre", "+"]], "answerable_exact": True},
    ]  # fmt: skip
    return _write(path, "".join(json.dumps(r) + "\n" for r in rows))


def test_metaqa_lines_and_hops_from_the_folder_name(tmp_path):
    qa = _write(tmp_path / "2-hop" / "qa_test.txt", MQA)
    items = load_questions(qa)
    assert detect_qa_format(qa) == "metaqa"
    assert [(q.id, q.topic_entities, q.answers, q.hops) for q in items] == [
        ("qa_test-0", ("Kim",), ("Lee", "Max"), 2),
        ("qa_test-1", ("F1",), ("Drama",), 2),
    ]
    assert items[0].text == "who directed the movies starred by [Kim]"
    assert items[0].gold_paths == ()


def test_metaqa_annotations_give_relation_paths_and_gold_paths(tmp_path):
    qa = _write(tmp_path / "qa.txt", MQA)
    notes = _annotations(tmp_path / "ann.jsonl")
    items = load_questions(qa, kb=MQA_KB, annotations=notes)
    first, second = items
    assert (first.id, first.hops, first.meta["qtype"]) == ("2hop-x-0", 2, "actor_to_movie_to_director")
    assert first.meta["rel_path"] == (("starred_actors", "-"), ("directed_by", "+"))
    assert [[t.id for t in p] for p in first.gold_paths] == [
        ["F1|starred_actors|Kim", "F1|directed_by|Lee"],
        ["F2|starred_actors|Kim", "F2|directed_by|Max"],
    ]
    assert second.gold_paths == ((Triple.of("F1", "has_genre", "Drama"),),)
    assert load_metaqa_annotations(notes)[1].topic == "F1"


def test_metaqa_malformed_lines(tmp_path):
    with pytest.raises(DatasetError, match=r"qa\.txt:3: expected exactly one \[topic entity\]"):
        load_questions(_write(tmp_path / "qa.txt", MQA + "no topic here\tx\n"), format="metaqa")
    with pytest.raises(DatasetError, match=r":1: no answer"):
        load_questions(_write(tmp_path / "qa2.txt", "what is [A]\t|\n"))
    notes = _annotations(tmp_path / "ann.jsonl")
    swapped = _write(tmp_path / "qa3.txt", "what genre is [F1]\tDrama\nwho directed [Kim]\tLee\n")
    loose = load_questions(swapped, annotations=notes, strict=False)
    assert len(loose) == 0 and len(loose.report.malformed) == 2
    assert "differs from the question's [F1]" in loose.report.malformed[0].reason


def test_annotation_file_is_not_a_question_file(tmp_path):
    notes = _annotations(tmp_path / "ann.jsonl")
    with pytest.raises(DatasetError, match="annotations="):
        load_questions(notes)
    broken = _write(tmp_path / "broken.jsonl", '{"id": "x", "line": 0, "rel_path": [["has_genre", "+"]]}\n')
    with pytest.raises(DatasetError, match=r"broken\.jsonl:1: malformed annotation: missing key 'topic'"):
        load_metaqa_annotations(broken)


# --------------------------------------------------------------------------- the real files


def _need(*paths: Path) -> None:
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        pytest.skip(f"shared data not found: {missing[0]}")


def test_real_pathquestion_counts():
    pq = DATA / "pathquestion"
    _need(pq / "3H-kb.txt", pq / "PQ-3H.txt", pq / "2H-kb.txt", pq / "PQ-2H.txt")
    kb3 = load_kb(pq / "3H-kb.txt")
    assert len(kb3) == 2839
    assert len({t.subject for t in kb3} | {t.object for t in kb3}) == 1836
    assert len({t.predicate for t in kb3}) == 13
    questions = load_questions(pq / "PQ-3H.txt", kb=kb3)
    assert len(questions) == 5198
    assert all(q.meta["gold_path_in_kb"] and q.hops == 3 for q in questions)
    assert sum(len(q.answers) > 1 for q in questions) == 858
    assert len({q.topic_entities[0] for q in questions}) == 850
    kb2 = load_kb(pq / "2H-kb.txt")
    assert len(kb2) == 1211
    assert len(load_questions(pq / "PQ-2H.txt", kb=kb2)) == 1908


def test_real_metaqa_counts():
    derived = DATA / "metaqa" / "derived"
    parts = [derived / "kb_reconstructed.part1.txt", derived / "kb_reconstructed.part2.txt"]
    qa1, qa2 = DATA / "metaqa" / "1-hop" / "qa_test.txt", DATA / "metaqa" / "2-hop" / "qa_test.txt"
    notes2 = derived / "2hop_qa_test_annotated.jsonl"
    _need(*parts, qa1, qa2, notes2)
    kb = load_kb(parts)  # load time: benchmarks/bench_core.py
    assert len(kb) == 128_512 and kb.report.duplicates == 0
    assert len({t.predicate for t in kb}) == 9
    assert sum(t.predicate == "directed_by" for t in kb) == 15_360
    assert len(load_questions(qa1)) == 9947
    index = KBIndex(kb)
    two_hop = load_questions(qa2, kb=index, annotations=notes2)
    assert len(two_hop) == 14_872
    exact = [q for q in two_hop if q.meta["answerable_exact"]]
    assert len(exact) == 11_882
    # the walked gold paths end exactly on the gold answers for every answerable question
    for q in exact:
        ends = {p[-1].object if q.meta["rel_path"][-1][1] == "+" else p[-1].subject for p in q.gold_paths}
        assert ends == set(q.answers), q.id
