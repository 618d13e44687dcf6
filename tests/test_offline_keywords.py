"""The one name reader of the offline stand-in LLMs (triage_plugins.offline.keywords, #18)."""

from __future__ import annotations

import pytest

from triage_plugins.offline.keywords import query_names


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("Where was Jonathan Dunmore's brother born?", ["Jonathan Dunmore"]),
        ("Where was Jonathan Dunmore’s brother born?", ["Jonathan Dunmore"]),
        ("What is Jones' job?", ["Jones"]),
        ("Who directed The Silent Harbour?", ["The Silent Harbour"]),
        ("The sex of parent of Claudius?", ["Claudius"]),
        (
            "Which nationality is Frederica Of Mecklenburg-Strelitz's couple?",
            ["Frederica Of Mecklenburg-Strelitz"],
        ),
        ("Who married Ada Lind, and who did Ada Lind's son marry?", ["Ada Lind"]),
        ("what films did someone direct?", []),
    ],
)
def test_query_names(question: str, names: list[str]) -> None:
    assert query_names(question) == names


def test_lightrag_stand_in_keywords_strip_possessives() -> None:
    pytest.importorskip("lightrag")
    from triage_lightrag.testing import _query_keywords

    keywords = _query_keywords("Where was Jonathan Dunmore's brother born?")
    assert keywords["low_level_keywords"] == ["Jonathan Dunmore"]
