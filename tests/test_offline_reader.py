"""The extractive reader: answers only from retrieved paths, by the relations the question asks.

The last tests measure it on real data (``../shared/data``; skipped when absent): PathQuestion with
the gold path hidden among distractor paths from the same topic entity, and MetaQA 2-hop likewise.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from triage_plugins.contract.events import Triple
from triage_plugins.datasets import KBIndex, load_kb, load_questions
from triage_plugins.offline.reader import NO_ANSWER, ExtractiveReader
from triage_plugins.offline.world import generate_world

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PQ_RELATIONS = [
    "children",
    "parents",
    "gender",
    "spouse",
    "nationality",
    "place_of_birth",
    "place_of_death",
    "profession",
    "religion",
    "cause_of_death",
    "location",
    "institution",
    "ethnicity",
]
T = Triple.of


@pytest.fixture(scope="module")
def pq_reader() -> ExtractiveReader:
    return ExtractiveReader(PQ_RELATIONS)


def test_nothing_retrieved_means_no_answer(pq_reader):
    answer = pq_reader.answer("what is the place of birth of ann 's father ?", [], ("ann",))
    assert answer.text == NO_ANSWER and answer.entity is None and answer.path_index is None
    assert not answer.answered


def test_cannot_answer_what_was_not_retrieved(pq_reader):
    # The right answer (paris) is in no retrieved path, so the reader cannot produce it.
    paths = [[T("ann", "spouse", "bob")], [T("ann", "gender", "female")]]
    answer = pq_reader.answer("what is the place of birth of ann 's father ?", paths, ("ann",))
    assert answer.entity in {"bob", "female"}
    assert answer.entity != "paris"


def test_relation_matching_path_beats_a_higher_ranked_wrong_relation(pq_reader):
    paths = [
        [T("ann", "parents", "carl"), T("carl", "place_of_death", "rome")],  # rank 0, wrong relation
        [T("ann", "spouse", "bob"), T("bob", "place_of_birth", "oslo")],  # rank 1, wrong first hop
        [T("ann", "parents", "carl"), T("carl", "place_of_birth", "paris")],  # rank 2, right
    ]
    answer = pq_reader.answer("what is the place of birth of ann 's father ?", paths, ("ann",))
    assert (answer.entity, answer.path_index) == ("paris", 2)
    assert answer.matched_relations == ("parents", "place_of_birth")


def test_three_hop_possessive_and_nested_questions(pq_reader):
    gold = [T("ann", "parents", "carl"), T("carl", "children", "dora"), T("dora", "gender", "female")]
    swapped = [T("ann", "children", "eve"), T("eve", "parents", "fred"), T("fred", "gender", "male")]
    for question in (
        "what is the ann 's mother 's daughter 's sex ?",
        "the gender of daughter of ann 's mother ?",
    ):
        answer = pq_reader.answer(question, [swapped, gold], ("ann",))
        assert answer.entity == "female", question


def test_grand_repeats_the_previous_hop(pq_reader):
    assert pq_reader.parse("who is the grandsex of ann 's daughter ?", ("ann",)).relations == (
        ("children", "parents"),
        ("children", "parents"),
        ("gender",),
    )
    gold = [T("ann", "children", "bea"), T("bea", "children", "cy"), T("cy", "gender", "male")]
    other = [T("ann", "children", "bea"), T("bea", "spouse", "dan"), T("dan", "gender", "female")]
    assert (
        pq_reader.answer("who is the grandsex of ann 's daughter ?", [other, gold], ("ann",)).entity == "male"
    )


def test_question_words_disambiguate_the_asked_relation(pq_reader):
    paths = [
        [T("ann", "parents", "carl"), T("carl", "place_of_death", "rome")],
        [T("ann", "parents", "carl"), T("carl", "cause_of_death", "fever")],
    ]
    assert pq_reader.answer("how ann 's dad died ?", paths, ("ann",)).entity == "fever"
    assert pq_reader.answer("where did ann 's dad die ?", paths[::-1], ("ann",)).entity == "rome"


def test_direction_distinguishes_parent_from_child():
    reader = ExtractiveReader(["parents", "spouse"])
    up = [T("ann", "parents", "carl")]  # carl is ann's parent
    down = [T("dora", "parents", "ann")]  # dora is ann's child
    assert reader.answer("Who is a child of ann?", [up, down], ("ann",)).entity == "dora"
    assert reader.answer("Who is a parent of ann?", [down, up], ("ann",)).entity == "carl"


def test_partial_match_prefers_the_asked_relation_then_falls_back_to_rank(pq_reader):
    # 3-hop question, only 2-hop paths retrieved: the one ending in the asked relation wins.
    paths = [
        [T("ann", "parents", "carl"), T("carl", "children", "dora")],
        [T("ann", "parents", "carl"), T("carl", "place_of_birth", "paris")],
    ]
    answer = pq_reader.answer("the place of birth of ann 's mom 's heir ?", paths, ("ann",))
    assert answer.entity == "paris"
    # No relation of the question anywhere: the top-ranked path answers.
    unrelated = [[T("ann", "religion", "x")], [T("ann", "ethnicity", "y")]]
    fallback = pq_reader.answer("the place of birth of ann 's mom 's heir ?", unrelated, ("ann",))
    assert (fallback.entity, fallback.path_index, fallback.matched_relations) == ("x", 0, ())


def test_a_longer_path_answers_a_shorter_question_with_its_prefix(pq_reader):
    paths = [
        [T("ann", "spouse", "bob"), T("bob", "nationality", "norway"), T("norway", "location", "europe")]
    ]
    answer = pq_reader.answer("which nationality is ann 's couple ?", paths, ("ann",))
    assert (answer.entity, answer.hops) == ("norway", 2)


def test_a_fused_shortcut_reads_as_the_hops_it_abstracts():
    # EvoRAG relation fusion adds (ann, spouse/place_of_birth, paris) for ann -spouse-> x -pob-> paris
    reader = ExtractiveReader([*PQ_RELATIONS, "spouse/place_of_birth", "not/a_relation"])
    assert reader.shortcuts == {"spouse/place_of_birth": ("spouse", "place_of_birth")}
    assert "spouse/place_of_birth" not in reader.relations and "not/a_relation" in reader.relations
    shortcut = [T("ann", "spouse/place_of_birth", "paris")]
    one_hop = [T("ann", "place_of_birth", "rome")]
    two_hop = reader.answer("the place of birth of ann 's couple ?", [one_hop, shortcut], ("ann",))
    assert (two_hop.entity, two_hop.hops, two_hop.matched_relations) == (
        "paris",
        2,
        ("spouse", "place_of_birth"),
    )
    # the shortcut's middle node is unknown: a one-hop question is never answered from inside it
    spouse = [T("ann", "spouse", "bob")]
    assert reader.answer("who is ann 's couple ?", [shortcut, spouse], ("ann",)).entity == "bob"
    # walked from its tail, a shortcut reads backwards, hop by hop
    assert reader._walk([T("bob", "spouse/place_of_birth", "ann")], ("ann",)) == [
        ("place_of_birth", "-", None),
        ("spouse", "-", "bob"),
    ]


def test_paths_given_from_the_answer_end_are_walked_from_the_topic(pq_reader):
    reversed_path = [T("carl", "place_of_birth", "paris"), T("ann", "parents", "carl")]
    assert (
        pq_reader.answer("the place of birth of ann 's father ?", [reversed_path], ("ann",)).entity == "paris"
    )


def test_metaqa_style_questions():
    reader = ExtractiveReader(
        [
            "directed_by",
            "written_by",
            "starred_actors",
            "release_year",
            "has_genre",
            "in_language",
            "has_tags",
        ]
    )
    co = [T("Film A", "directed_by", "Kim"), T("Film A", "directed_by", "Lee")]
    acted = [T("Film B", "starred_actors", "Kim"), T("Film B", "starred_actors", "Max")]
    question = "the director [Kim] co-directed movies with who"
    assert reader.parse(question).relations == (("directed_by",), ("directed_by",))
    assert reader.answer(question, [acted, co], ("Kim",)).entity == "Lee"
    genre = [T("Film B", "starred_actors", "Kim"), T("Film B", "has_genre", "Drama")]
    year = [T("Film B", "starred_actors", "Kim"), T("Film B", "release_year", "1999")]
    assert reader.answer("the films acted by [Kim] were in which genres", [year, genre]).entity == "Drama"
    assert (
        reader.answer("what were the release dates of [Kim] starred movies", [genre, year]).entity == "1999"
    )


def test_ties_report_every_answer_and_labels_give_the_text():
    reader = ExtractiveReader(["starred_actors", "directed_by"])
    paths = [
        [T("F", "directed_by", "d1")],
        [T("F", "starred_actors", "a1")],
        [T("F", "starred_actors", "a2")],
    ]
    answer = reader.answer("who starred in [F]", paths, labels={"a1": "Actor One"})
    assert (answer.entity, answer.text, answer.entities) == ("a1", "Actor One", ("a1", "a2"))


def test_user_gloss_extends_the_lexicon():
    reader = ExtractiveReader(["capital_of"], gloss={"seat of government": ["capital_of:-"]})
    paths = [[T("Oslo", "capital_of", "Norway")], [T("Bergen", "located_in", "Norway")]]
    assert (
        reader.answer("What is the seat of government of Norway?", paths[::-1], ("Norway",)).entity == "Oslo"
    )


def _distractor_accuracy(reader, items, index, *, k, seed, directed, gold_last=False) -> float:
    rng = random.Random(seed)
    hits = 0
    for text, topic, gold, answers, hops in items:

        def tail(path, topic=topic):
            node = topic
            for t in path:
                node = t.object if t.subject == node else t.subject
            return node

        wrong = [
            p for p in index.paths_from(topic, hops, directed=directed, limit=3000) if tail(p) not in answers
        ]
        same_length = [p for p in wrong if len(p) == len(gold)]
        shorter = [p for p in wrong if len(p) < len(gold)]
        paths = rng.sample(same_length, min(len(same_length), 2 * k // 3))
        paths += rng.sample(shorter, min(len(shorter), k - len(paths)))
        paths.insert(len(paths) if gold_last else rng.randint(0, len(paths)), gold)
        hits += reader.answer(text, paths, (topic,)).entity in answers
    return hits / len(items)


def test_world_questions_among_distractors():
    for seed in (0, 1, 2):
        world = generate_world(seed)
        reader = ExtractiveReader(world.relations)
        items = [(q.text, q.topic_entities[0], q.paths[0], set(q.answers), q.hops) for q in world.questions]
        accuracy = _distractor_accuracy(reader, items, KBIndex(world.triples), k=9, seed=seed, directed=False)
        assert accuracy >= 0.95, (seed, accuracy)


def _pq(name: str):
    kb_path, qa_path = DATA / "pathquestion" / f"{name}-kb.txt", DATA / "pathquestion" / f"PQ-{name}.txt"
    if not (kb_path.is_file() and qa_path.is_file()):
        pytest.skip(f"PathQuestion {name} not found under {DATA} (shared data absent)")
    kb = load_kb(kb_path)
    index = KBIndex(kb)
    items = [
        (q.text, q.topic_entities[0], q.gold_paths[0], set(q.answers), q.hops)
        for q in load_questions(qa_path)
    ]
    return ExtractiveReader(sorted({t.predicate for t in kb})), items, index


def test_pq3h_gold_path_among_distractors():
    """Measured: 1.000 (5,198/5,198) with 9 distractors; 1.000 with 20 distractors, gold ranked last."""
    reader, items, index = _pq("3H")
    assert len(items) == 5198
    assert _distractor_accuracy(reader, items, index, k=9, seed=0, directed=True) >= 0.99
    sample = random.Random(1).sample(items, 1000)
    assert _distractor_accuracy(reader, sample, index, k=20, seed=1, directed=True, gold_last=True) >= 0.99


def test_pq2h_gold_path_among_distractors():
    """Measured: 0.987 (the misses ask for a profession without naming it: "what is X's father ?")."""
    reader, items, index = _pq("2H")
    assert _distractor_accuracy(reader, items, index, k=9, seed=0, directed=True) >= 0.97


def test_metaqa_2hop_gold_path_among_distractors():
    """Measured: 1.000 on 1,500 sampled answerable questions with 9 undirected distractors."""
    parts = [DATA / "metaqa" / "derived" / f"kb_reconstructed.part{i}.txt" for i in (1, 2)]
    qa = DATA / "metaqa" / "2-hop" / "qa_test.txt"
    notes = DATA / "metaqa" / "derived" / "2hop_qa_test_annotated.jsonl"
    if not all(p.is_file() for p in (*parts, qa, notes)):
        pytest.skip(f"MetaQA files not found under {DATA} (shared data absent)")
    kb = load_kb(parts)
    index = KBIndex(kb)
    questions = [q for q in load_questions(qa, annotations=notes) if q.meta["answerable_exact"]]
    items = []
    for q in random.Random(2).sample(questions, 400):
        topic = q.topic_entities[0]
        last_direction = q.meta["rel_path"][-1][1]
        walks = index.walk(topic, q.meta["rel_path"], exclude_visited=False)
        gold = next(
            p for p in walks if (p[-1].object if last_direction == "+" else p[-1].subject) in q.answers
        )
        items.append((q.text, topic, gold, set(q.answers), q.hops))
    reader = ExtractiveReader(sorted({t.predicate for t in kb}))
    assert _distractor_accuracy(reader, items, index, k=9, seed=2, directed=False) >= 0.97
