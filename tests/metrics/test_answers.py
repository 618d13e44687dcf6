"""The one gold-hit rule (issue #18 item 2) and citation-blind answer grounding (issue #15 point 5)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from triage_plugins.adapter_kit import runner as kit
from triage_plugins.apps.demo import answer_is_correct
from triage_plugins.apps.evolve import answer_correct, exact_match
from triage_plugins.contract.events import GenerationEvent, Gold, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg.citations import citation_spans, strip_citations
from triage_plugins.kg.grounding import Grounder
from triage_plugins.metrics.answers import AnswerRule, gold_hit, normalize_answer
from triage_plugins.metrics.per_query import usage_metrics

ROOT = Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("answer", "gold", "hit"),
    [
        ("OSTRELIA", ["Ostrelia"], True),  # GraphRAG upper-cases entity ids
        ("Port vellan is the capital.", ["Port Vellan"], True),  # LlamaIndex capitalizes the first word
        ("It is the Port Vellan.", ["Port Vellan"], True),
        ("The Hague", ["Hague"], True),  # articles dropped on both sides
        ("Hague", ["The Hague"], True),
        ("Jonathan Dunmore's sister", ["Jonathan Dunmore"], True),  # possessive
        ("Dunmore’s", ["Dunmore"], True),  # typographic apostrophe
        ("new_york", ["New York"], True),
        ("The Who played.", ["The Who"], True),  # a label of function words keeps its article
        ("Who directed it?", ["The Who"], False),  # ... so it is not the word "who"
        ("Bobby", ["Bob"], False),  # whole words only
        ("york", ["new york"], False),
        ("See [1].\n\n### References\n\n- [1] Ostrelia.txt", ["Ostrelia"], False),  # a cited title
        ("", ["x"], False),
        ("Ada", [], False),
    ],
)
def test_gold_hit_normalizes_case_punctuation_articles_possessives_and_citations(
    answer: str, gold: list[str], hit: bool
) -> None:
    assert gold_hit(answer, gold) is hit
    # every consumer applies the same rule: the runners' feedback, evolve-bench, the demo
    assert kit.gold_hit(answer, gold) is hit
    assert answer_correct(answer, gold) is hit
    assert answer_is_correct(answer, gold) is hit


def test_aliases_and_labels_from_the_graph_are_forms_of_the_gold_answer() -> None:
    graph = GraphView([Triple.of("e1", "capital", "e2")], labels={"e2": "Port Vellan"})
    rule = AnswerRule(graph, {"Vellan City": "e2", "Nowhere": None})
    assert rule.forms("e2") == {"e2", "port vellan", "vellan city"}
    assert rule.hit("The capital is Vellan City.", ["e2"])
    assert rule.hit("PORT VELLAN", ["e2"])
    assert not rule.hit("Nowhere", ["e2"])
    assert gold_hit("vellan city", ["e2"], graph=graph, aliases={"Vellan City": "e2"})
    assert not gold_hit("vellan city", ["e2"])  # without the graph's aliases it is another name
    assert rule.same("PORT_VELLAN", "e2") and not rule.same("e1", "e2")


def test_exact_match_uses_the_rule_normalization() -> None:
    assert exact_match("The OSTRELIA.", ["Ostrelia"])
    assert not exact_match("Ostrelia and Vell", ["Ostrelia"])
    assert normalize_answer("The  Hague's [2]") == "hague"


def test_every_runner_judges_gold_through_the_kit_rounds() -> None:
    """The three adapters' runners send gold feedback only through adapter_kit's (a)run_rounds,
    whose feedback calls kit.gold_hit, which is the metrics rule: none has a rule of its own."""
    for name in ("triage_graphrag", "triage_lightrag", "triage_llamaindex"):
        path = ROOT / "adapters" / name / "runner.py"
        tree = ast.parse(path.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert imported & {"run_rounds", "arun_rounds"}, name
        calls = {
            n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        assert calls & {"run_rounds", "arun_rounds"}, name
        assert "lower()" not in path.read_text() and "casefold" not in path.read_text(), name
    assert "gold_hit" in inspect.getsource(kit._send_feedback)
    assert "metrics.answers" in inspect.getsource(kit.gold_hit)


# --------------------------------------------------------------------------- F1 and Hits@1 agree


def _retrieval(gold: Gold) -> RetrievalEvent:
    triples = (
        Triple.of("Jonathan Dunmore", "lives_in", "Ostrelia"),
        Triple.of("Ostrelia", "capital", "Port Vellan"),
    )
    return RetrievalEvent(
        "test",
        "q1",
        "Where does Jonathan Dunmore live?",
        mentions=("Jonathan Dunmore",),
        grounding={"Jonathan Dunmore": "Jonathan Dunmore"},
        subgraph=Subgraph(triples),
        gold=gold,
    )


@pytest.mark.parametrize(
    ("text", "node"),
    [
        ("OSTRELIA", "OSTRELIA"),  # GraphRAG: the id itself is upper-cased
        ("Ostrelia.", "Ostrelia"),
        ("Port vellan", "Port vellan"),  # LlamaIndex-style casing of a multi-word answer
    ],
)
def test_f1_and_hits_agree_whatever_the_framework_casing(text: str, node: str) -> None:
    gold = "Port Vellan" if "vellan" in text.lower() else "Ostrelia"
    gen = GenerationEvent("test", "q1", text, (text,), {text: node})
    m = usage_metrics(_retrieval(Gold(answers=(gold,))), gen)
    # predicted {node} is the gold answer by the rule: P = R = 1 → F1 = 1, and Hits@1 = 1
    assert m["Hits@1"].value == 1.0
    assert m["F1"].value == 1.0


# --------------------------------------------------------------------------- citations (#15 point 5)


def _lightrag_reference_answer() -> tuple[str, str]:
    """An answer in LightRAG's own rag_response format (read from the installed prompt), and the
    same answer with no citation."""
    prompt = pytest.importorskip("lightrag.prompt").PROMPTS["rag_response"]
    assert "### References" in prompt and "- [1] Document Title One" in prompt
    start = prompt.index("### References", prompt.index("Reference Section Example"))
    example = prompt[start : prompt.index("```", start)]
    references = example.replace("Document Title One", "ostrelia_history.txt").replace(
        "Document Title Two", "Port Vellan guide.md"
    )
    body = "Jonathan Dunmore lives in **Ostrelia** [1], whose capital is Port Vellan [1, 2][^3] [KG]."
    plain = "Jonathan Dunmore lives in **Ostrelia**, whose capital is Port Vellan."
    return f"{body}\n\n{references.rstrip()}\n", plain


def test_citation_spans_cover_markers_and_the_trailing_reference_section() -> None:
    cited, _ = _lightrag_reference_answer()
    clean = strip_citations(cited)
    assert len(clean) == len(cited)  # offsets preserved
    for gone in ("[1]", "[1, 2]", "[^3]", "[KG]", "References", "ostrelia_history", "guide.md"):
        assert gone not in clean
    assert "Ostrelia" in clean and "Port Vellan" in clean
    # a heading at the very start is not a trailing section (the answer would be empty); its markers go
    assert strip_citations("References:\n- [1] file.txt") == "References:\n-     file.txt"
    answer = "Ostrelia.\nReferences:\n- [1] file.txt"
    assert citation_spans(answer) == [(len("Ostrelia.\n"), len(answer))]
    assert strip_citations("Born in [Paris] in 1990 [3].") == "Born in [Paris] in 1990    ."
    assert strip_citations("Ada.\n\n[^1]: notes.txt\n") == "Ada.\n\n" + " " * len("[^1]: notes.txt\n")


def test_agr_is_the_same_with_and_without_lightrag_citations() -> None:
    cited, plain = _lightrag_reference_answer()
    triples = (
        Triple.of("Jonathan Dunmore", "lives_in", "Ostrelia"),
        Triple.of("Ostrelia", "capital", "Port Vellan"),
    )
    graph = GraphView([*triples, Triple.of("ostrelia_history", "about", "Ostrelia")], nodes=["1", "KG"])
    grounder = Grounder(graph)
    retrieval = RetrievalEvent(
        "lightrag",
        "q1",
        "Where does Jonathan Dunmore live?",
        subgraph=Subgraph(triples),
        gold=Gold(answers=("Ostrelia",)),
    )

    def metrics(text: str, supplied: bool):
        if supplied:  # the adapter grounded the raw answer itself (what every adapter emits)
            found = grounder.ground(text)
            gen = GenerationEvent("lightrag", "q1", text, tuple(found.mentions), dict(found.grounding))
        else:  # derived by the metrics from the text
            gen = GenerationEvent("lightrag", "q1", text)
        return usage_metrics(retrieval, gen, grounder=grounder)

    raw = grounder.ground(cited)
    assert {"1", "KG", "ostrelia_history"} & set(raw.grounding.values())  # the trap is real
    assert set(grounder.ground_answer(cited).grounding.values()) == set(
        grounder.ground(plain).grounding.values()
    )
    reference = metrics(plain, supplied=False)
    assert reference["AGR"].value == 1.0  # Jonathan Dunmore, Ostrelia, Port Vellan all in V_S
    for supplied in (False, True):
        m = metrics(cited, supplied)
        for name in ("AGR", "AUR", "Hits@1", "F1"):
            assert m[name].value == reference[name].value, (name, supplied)
        assert m["AGR"].n == reference["AGR"].n == 3
