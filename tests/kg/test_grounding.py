"""The default grounder (TRIAGE §4.3.1, DESIGN §4): mentions, grounding, coalescing, linking."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage_plugins.contract.errors import EventError, TriageError
from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg.grounding import FUNCTION_WORDS, STOP_WORDS, Grounder, Grounding

FIG4 = "Did the director of Inception also direct Interstellar?"


def graph_of(*triples: tuple[str, str, str], nodes: tuple[str, ...] = (), labels=None) -> GraphView:
    return GraphView([Triple.of(*t) for t in triples], nodes=nodes, labels=labels)


@pytest.fixture
def films() -> GraphView:
    return graph_of(
        ("Inception", "directed_by", "Christopher Nolan"),
        ("Interstellar", "directed_by", "Christopher Nolan"),
        ("The Prestige", "directed_by", "Christopher Nolan"),
        ("Nolan", "is_a", "surname"),
        ("Up", "directed_by", "Pete Docter"),
        ("Inception", "has_genre", "Drama"),
        ("The Killing Room", "directed_by", "Jonathan Liebesman"),
    )


def spans_text(text: str, g: Grounding) -> list[str]:
    return [text[a:b] for a, b in g.spans]


# ---------------------------------------------------------------------------- the paper's example


def test_fig4_query_grounds_both_films() -> None:
    graph = graph_of(
        ("Inception", "directed_by", "Christopher Nolan"), ("Interstellar", "directed_by", "Chris Nolan")
    )
    g = Grounder(graph).ground(FIG4)
    assert g.mentions == ("Inception", "Interstellar")
    assert g.grounding == {"Inception": "Inception", "Interstellar": "Interstellar"}
    # "Inception" starts after "Did the director of " (20 chars); "Interstellar" after "... also direct ".
    assert g.spans == ((20, 29), (42, 54))
    assert g.nodes == ("Inception", "Interstellar")
    assert g.unresolved == ()


# ---------------------------------------------------------------------------- longest match


def test_longest_match_wins(films: GraphView) -> None:
    gr = Grounder(films)
    text = "Did Christopher Nolan direct Inception?"
    g = gr.ground(text)
    assert g.mentions == ("Christopher Nolan", "Inception")
    assert g.grounding["Christopher Nolan"] == "Christopher Nolan"
    # the shorter label still matches where it stands alone
    assert gr.ground("Is Nolan a surname?").grounding == {"Nolan": "Nolan", "surname": "surname"}


def test_stop_words_in_labels_and_text(films: GraphView) -> None:
    gr = Grounder(films)
    text = "who directed the killing room"
    g = gr.ground(text)
    # the label's leading "The" is part of the mention when the text has it
    assert g.mentions == ("the killing room",)
    assert g.grounding["the killing room"] == "The Killing Room"
    assert gr.ground("who directed killing room").grounding == {"killing room": "The Killing Room"}
    assert gr.link("Killing Room") == "The Killing Room"


# ---------------------------------------------------------------------------- aliases


def test_alias_links_to_canonical_node(films: GraphView) -> None:
    gr = Grounder(films, aliases={"Chris Nolan": "Christopher Nolan"})
    assert gr.link("Chris Nolan") == "Christopher Nolan"
    assert gr.link("chris_nolan") == "Christopher Nolan"
    g = gr.ground("Did Chris Nolan direct Up?")
    assert g.grounding == {"Chris Nolan": "Christopher Nolan", "Up": "Up"}


def test_explicit_alias_beats_a_duplicate_node() -> None:
    graph = graph_of(
        ("Inception", "directed_by", "Christopher Nolan"), ("Interstellar", "directed_by", "Chris Nolan")
    )
    assert Grounder(graph).link("Chris Nolan") == "Chris Nolan"
    assert Grounder(graph, {"Chris Nolan": "Christopher Nolan"}).link("Chris Nolan") == "Christopher Nolan"
    # even when the alias key is spelled differently from the text and the node is spelled exactly
    g = Grounder(graph, {"chris nolan": "Christopher Nolan"}).ground("Did Chris Nolan direct Interstellar?")
    assert g.grounding == {"Chris Nolan": "Christopher Nolan", "Interstellar": "Interstellar"}


def test_alias_to_none_is_a_known_unlinked_mention(films: GraphView) -> None:
    gr = Grounder(films, aliases={"the Nolan brothers": None})
    g = gr.ground("Did the Nolan brothers write Interstellar?")
    assert g.mentions == ("the Nolan brothers", "Interstellar")
    assert g.grounding["the Nolan brothers"] is None
    assert gr.link("Nolan brothers") is None


def test_alias_target_given_as_a_label_or_unknown() -> None:
    graph = graph_of(("q42", "instance_of", "q5"), labels={"q42": "Douglas Adams", "q5": "human"})
    gr = Grounder(graph, aliases={"DNA": "Douglas Adams", "Bob": "nobody here"})
    assert gr.link("DNA") == "q42"
    assert gr.link("douglas adams") == "q42"
    assert gr.link("q42") == "q42"
    assert gr.link("Bob") is None
    assert gr.ground("Did Bob meet DNA?").grounding == {"Bob": None, "DNA": "q42"}


# ---------------------------------------------------------------------------- surface variants


@pytest.mark.parametrize(
    "surface",
    ["Christopher Nolan", "christopher nolan", "CHRISTOPHER NOLAN", "christopher_nolan", "Christopher-Nolan",
     "  Christopher   Nolan. ", "Christopher, Nolan"],
)  # fmt: skip
def test_link_ignores_case_punctuation_and_underscores(films: GraphView, surface: str) -> None:
    assert Grounder(films).link(surface) == "Christopher Nolan"


def test_link_rejects_partial_and_empty_forms(films: GraphView) -> None:
    gr = Grounder(films)
    assert gr.link("Christopher") is None
    assert gr.link("Nolan Christopher") is None
    assert gr.link("") is None
    assert gr.link("?!") is None


def test_pathquestion_style_ids_with_underscores() -> None:
    graph = graph_of(
        ("frederica_of_mecklenburg-strelitz", "spouse", "ernest_augustus_i_of_hanover"),
        ("ernest_augustus_i_of_hanover", "place_of_birth", "buckingham_house"),
    )
    gr = Grounder(graph)
    for text in (
        "where was frederica of mecklenburg-strelitz 's husband born ?",
        "where was frederica_of_mecklenburg-strelitz 's husband born ?",
        "Where was Frederica of Mecklenburg Strelitz's husband born?",
    ):
        g = gr.ground(text)
        assert g.nodes == ("frederica_of_mecklenburg-strelitz",), text
        assert len(g.mentions) == 1


# ---------------------------------------------------------------------------- unresolved mentions


def test_capitalized_span_without_a_node_is_unresolved(films: GraphView) -> None:
    g = Grounder(films).ground("Did Steven Spielberg direct Interstellar or Jaws?")
    assert g.mentions == ("Steven Spielberg", "Interstellar", "Jaws")
    assert g.grounding == {"Steven Spielberg": None, "Interstellar": "Interstellar", "Jaws": None}
    assert g.unresolved == ("Steven Spielberg", "Jaws")
    # QGR = |V_q^g| / |M_q| = 1/3 (TRIAGE eq. 25)
    assert len(g.nodes) / len(g.mentions) == pytest.approx(1 / 3)


def test_question_words_are_not_mentions(films: GraphView) -> None:
    text = "What did Kubrick direct? How many films? Who knows. Did I ask? Which one? When?"
    g = Grounder(films).ground(text)
    assert g.mentions == ("Kubrick",)
    assert g.grounding == {"Kubrick": None}


def test_capitalized_names_keep_inner_stop_words_and_drop_leading_function_words(films: GraphView) -> None:
    g = Grounder(films).ground("Is Bank of America older than Up?")
    assert g.mentions == ("Bank of America", "Up")
    assert g.grounding == {"Bank of America": None, "Up": "Up"}


def test_capitalized_run_touching_a_match_adds_no_mention(films: GraphView) -> None:
    g = Grounder(films).ground("Did Mr. Nolan like Inception?")
    assert g.mentions == ("Nolan", "Inception")
    assert None not in g.grounding.values()


def test_lower_case_text_has_no_unresolved_mentions(films: GraphView) -> None:
    g = Grounder(films).ground("did steven spielberg direct interstellar")
    assert g.mentions == ("interstellar",)


# ---------------------------------------------------------------------------- quoted and bracketed spans


def test_quoted_spans_are_whole_mentions(films: GraphView) -> None:
    gr = Grounder(films)
    g = gr.ground('Is "The Prestige" better than "Following"?')
    assert g.grounding == {"The Prestige": "The Prestige", "Following": None}
    # a quoted span is never split, even when its words name two nodes
    g = gr.ground('Have you seen "Inception Interstellar" yet?')
    assert g.grounding == {"Inception Interstellar": None}
    g = gr.ground("Was “Memento” or 'Up' first?")
    assert g.grounding == {"Memento": None, "Up": "Up"}


def test_apostrophes_do_not_open_quotes(films: GraphView) -> None:
    text = "Nolan's film 's lead isn't in Up's cast"
    g = Grounder(films).ground(text)
    assert g.mentions == ("Nolan", "Up")
    assert g.spans == ((0, 5), (30, 32))


def test_bracketed_topic_is_the_mention() -> None:
    graph = graph_of(("Ninja", "directed_by", "Isaac Florentine"), ("Ninja", "has_tags", "director"))
    text = "the director of [Ninja] is also the director of which movies"
    g = Grounder(graph).ground(text)
    assert g.mentions == ("Ninja",)
    assert g.spans == ((17, 22),)
    # without the MetaQA convention the tag node "director" is matched too (once: coalesced)
    g = Grounder(graph, bracketed_only=False).ground(text)
    assert g.grounding == {"director": "director", "Ninja": "Ninja"}
    assert Grounder(graph).ground("what did [Ridley Scott] direct").grounding == {"Ridley Scott": None}


def test_symbolic_label_matches_only_when_quoted() -> None:
    graph = graph_of(("$", "starred_actors", "Warren Beatty"))
    gr = Grounder(graph)
    assert gr.ground("who starred in [$]").grounding == {"$": "$"}
    assert gr.ground('who starred in "$"').grounding == {"$": "$"}
    assert gr.ground("who starred in $").mentions == ()
    assert gr.link(" $ ") == "$"


# ---------------------------------------------------------------------------- stop-word-only labels and case


def test_labels_made_of_function_words_need_capitals_or_quotes() -> None:
    graph = graph_of(("Up", "directed_by", "Pete Docter"), ("The Who", "performed_at", "Woodstock"))
    gr = Grounder(graph)
    assert gr.ground("Who directed Up?").grounding == {"Up": "Up"}
    assert gr.ground("who directed up").mentions == ()
    assert gr.ground("Up is a film by Pete Docter").grounding == {"Pete Docter": "Pete Docter"}
    assert gr.ground("who directed 'up'").grounding == {"up": "Up"}
    assert gr.ground("Did The Who play at Woodstock?").grounding == {
        "The Who": "The Who",
        "Woodstock": "Woodstock",
    }
    assert gr.link("the who") == "The Who"


def test_case_is_evidence_only_in_cased_text(films: GraphView) -> None:
    gr = Grounder(films)
    # "Inception" is capitalized mid-sentence, so the text is cased: lower-case "drama" is not *Drama*
    assert gr.ground("Is Inception a drama?").mentions == ("Inception",)
    assert gr.ground("is inception a drama").grounding == {"inception": "Inception", "drama": "Drama"}
    assert gr.ground("Is Inception a Drama?").grounding == {"Inception": "Inception", "Drama": "Drama"}
    # nodes written lower-case (the "surname" node) match lower-case text either way
    assert gr.ground("Is Nolan a surname?").grounding["surname"] == "surname"
    # multi-word lower-case names are not gated
    assert gr.ground("Did christopher nolan direct Up?").nodes == ("Christopher Nolan", "Up")


# ---------------------------------------------------------------------------- coalescing


def test_mentions_of_one_node_are_coalesced(films: GraphView) -> None:
    gr = Grounder(films, aliases={"Chris Nolan": "Christopher Nolan"})
    text = "Did Christopher Nolan, also called Chris Nolan, direct Inception? Ask Chris Nolan."
    g = gr.ground(text)
    assert g.mentions == ("Christopher Nolan", "Inception")
    assert g.spans == ((4, 21), (55, 64))
    g = gr.ground("Did Kubrick like Kubrick films, or kubrick's?")
    assert g.mentions == ("Kubrick",)
    assert g.grounding == {"Kubrick": None}


# ---------------------------------------------------------------------------- unicode


def test_unicode_labels() -> None:
    graph = graph_of(
        ("Peter Franzén", "acted_in", "Ambush"),
        ("Björk", "born_in", "Reykjavík"),
        ("東京", "country", "日本"),
    )
    gr = Grounder(graph)
    g = gr.ground("Did Peter Franzén meet Björk in Reykjavík?")
    assert g.grounding == {"Peter Franzén": "Peter Franzén", "Björk": "Björk", "Reykjavík": "Reykjavík"}
    # decomposed accents (NFD), folded accents and full-width forms (NFKC) reach the same nodes
    nfd = unicodedata.normalize("NFD", "Peter Franzén")
    assert len(nfd) == len("Peter Franzén") + 1
    assert gr.ground(f"Did {nfd} act?").nodes == ("Peter Franzén",)
    assert gr.link("peter franzen") == "Peter Franzén"
    assert gr.link("ＢＪＯＲＫ") == "Björk"
    g = gr.ground("東京 は 日本 の 首都")
    assert g.nodes == ("東京", "日本")
    assert spans_text("東京 は 日本 の 首都", g) == ["東京", "日本"]


def test_empty_and_blank_text(films: GraphView) -> None:
    gr = Grounder(films)
    for text in ("", "   ", "?!", "the of and"):
        assert gr.ground(text) == Grounding((), {}, ())


def test_empty_graph_only_finds_unresolved_mentions() -> None:
    g = Grounder(GraphView([])).ground("Did Nolan direct Inception?")
    assert g.grounding == {"Nolan": None, "Inception": None}
    assert g.nodes == ()


# ---------------------------------------------------------------------------- ambiguity


def test_ambiguous_labels_resolve_deterministically() -> None:
    graph = graph_of(
        ("Mercury", "orbits", "Sun"),
        ("Mercury", "named_after", "Roman god"),
        ("mercury", "element_of", "group 12"),
    )
    gr = Grounder(graph)
    # exact spelling first
    assert gr.link("Mercury") == "Mercury"
    assert gr.link("mercury") == "mercury"
    # no exact spelling: higher degree ("Mercury" has 2 triples, "mercury" 1)
    assert gr.link("MERCURY") == "Mercury"
    # equal degree: lexicographically smallest id ("Venus" < "venus")
    tie = graph_of(("Venus", "orbits", "Sun"), ("venus", "is_a", "genus"))
    assert Grounder(tie).link("VENUS") == "Venus"
    # same key, different stop words: the exact full form wins over the higher degree
    rooms = graph_of(("The Room", "p", "x"), ("The Room", "q", "y"), ("Room", "p", "z"))
    assert Grounder(rooms).link("room") == "Room"
    assert Grounder(rooms).link("the room") == "The Room"


# ---------------------------------------------------------------------------- matcher


def test_matcher_is_tried_on_unresolved_spans_only(films: GraphView) -> None:
    calls: list[str] = []

    def matcher(surface: str) -> str | None:
        calls.append(surface)
        return {"Kris Nolen": "Christopher Nolan", "Kubrik": "not a node"}.get(surface)

    gr = Grounder(films, matcher=matcher)
    g = gr.ground('Did Kris Nolen direct Inception or "Kubrik"?')
    assert calls == ["Kris Nolen", "Kubrik"]
    assert g.grounding == {"Kris Nolen": "Christopher Nolan", "Inception": "Inception", "Kubrik": None}
    assert gr.link("Kris Nolen") is None
    assert gr.link("Kris Nolen", use_matcher=True) == "Christopher Nolan"


def test_matcher_grounding_is_coalesced_with_exact_matches(films: GraphView) -> None:
    gr = Grounder(films, matcher=lambda s: "Christopher Nolan" if s == "Kris Nolen" else None)
    g = gr.ground("Christopher Nolan, or Kris Nolen, directed Inception")
    assert g.mentions == ("Christopher Nolan", "Inception")


# ---------------------------------------------------------------------------- errors


def test_bad_input_raises_event_error(films: GraphView) -> None:
    with pytest.raises(EventError, match="graph"):
        Grounder(object())  # type: ignore[arg-type]
    with pytest.raises(EventError, match="aliases"):
        Grounder(films, aliases={"": "Inception"})
    with pytest.raises(EventError, match="aliases"):
        Grounder(films, aliases={"x": 3})  # type: ignore[dict-item]
    with pytest.raises(EventError, match="aliases"):
        Grounder(films, aliases=[("x", "Inception")])  # type: ignore[arg-type]
    with pytest.raises(EventError, match="matcher"):
        Grounder(films, matcher="nope")  # type: ignore[arg-type]
    gr = Grounder(films)
    with pytest.raises(TriageError, match="text"):
        gr.ground(None)  # type: ignore[arg-type]
    with pytest.raises(TriageError, match="surface"):
        gr.link(3)  # type: ignore[arg-type]


def test_word_lists_are_lower_case_and_disjoint_from_content() -> None:
    assert {"the", "a", "an", "of", "and", "in", "on"} <= STOP_WORDS
    assert {"did", "what", "how", "who"} <= FUNCTION_WORDS
    assert all(w == w.lower() for w in STOP_WORDS | FUNCTION_WORDS)


# ---------------------------------------------------------------------------- properties

_WORDS = st.text("bcdfghklmnprstvz", min_size=3, max_size=7).filter(
    lambda w: w not in STOP_WORDS | FUNCTION_WORDS
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_WORDS, min_size=1, max_size=4).map(" ".join), min_size=1, max_size=12, unique=True))
def test_every_label_grounds_to_its_node(labels: list[str]) -> None:
    graph = GraphView([], nodes=[lab.replace(" ", "_") for lab in labels])
    gr = Grounder(graph)
    for label in labels:
        node = label.replace(" ", "_")
        assert gr.link(label) == node
        text = f"what about {label} ?"
        g = gr.ground(text)
        assert g.mentions == (label,)
        assert g.grounding == {label: node}
        assert spans_text(text, g) == [label]


# ---------------------------------------------------------------------------- real data


def _pq_graph(path: Path) -> GraphView:
    triples = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            triples.append(Triple.of(*parts))
    return GraphView(triples)


def test_pathquestion_topic_entities_ground(shared_data: Path) -> None:
    pq = shared_data / "pathquestion"
    gr = Grounder(_pq_graph(pq / "3H-kb.txt"))
    lines = (pq / "PQ-3H.txt").read_text(encoding="utf-8").splitlines()[:300]
    for line in lines:
        question, _, path = line.split("\t")
        topic = path.split("#")[0]
        g = gr.ground(question)
        assert g.nodes == (topic,), question
        assert g.unresolved == ()


@pytest.mark.slow
def test_metaqa_scale_and_bracketed_topics(shared_data: Path) -> None:
    derived = shared_data / "metaqa" / "derived"
    triples = []
    for part in (1, 2):
        for line in (derived / f"kb_reconstructed.part{part}.txt").read_text(encoding="utf-8").splitlines():
            s, r, o = line.split("|")
            triples.append(Triple(line, s, r, o))
    graph = GraphView(triples)
    gr = Grounder(graph)  # build and per-query cost: benchmarks/bench_core.py
    questions = (
        (shared_data / "metaqa" / "1-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()[:500]
    )
    results = [gr.ground(q.split("\t")[0]) for q in questions]
    for q, g in zip(questions, results, strict=True):
        topic = q[q.index("[") + 1 : q.index("]")]
        assert g.mentions == (topic,)
        assert g.grounding[topic] == (topic if graph.has_node(topic) else None)
    long_q = "Did the director of Inception also direct Interstellar, and which films did Christopher Nolan write later?"
    g = gr.ground(long_q)
    assert {"Inception", "Interstellar", "Christopher Nolan"} <= set(g.nodes)
