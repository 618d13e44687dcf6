"""Token log-probabilities matched to record spans (triage_plugins.adapter_kit.logprobs)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from triage_plugins.adapter_kit.logprobs import (
    LogprobText,
    capture_logprobs,
    logprob_pairs,
    lookup_logprobs,
    record_logprobs,
    span_logprobs,
    spells,
)

# "ab cd\nef": tokens "ab", " ", "cd", "\n", "ef" at offsets 0-2, 2-3, 3-5, 5-6, 6-8
PAIRS = [("ab", -0.1), (" ", -0.2), ("cd", -0.3), ("\n", 0.0), ("ef", 0.4)]


def test_the_tokens_overlapping_a_span_are_its_logprobs():
    assert span_logprobs(PAIRS, 0, 5) == pytest.approx((-0.1, -0.2, -0.3))
    assert span_logprobs(PAIRS, 1, 4) == pytest.approx((-0.1, -0.2, -0.3))  # partial overlap counts
    assert span_logprobs(PAIRS, 6, 8) == (0.0,)  # a positive logprob is capped at 0


def test_blank_tokens_can_be_left_out():
    assert span_logprobs(PAIRS, 0, 5, skip_blank=True) == pytest.approx((-0.1, -0.3))


def test_no_pairs_or_pairs_short_of_the_span_mean_none():
    assert span_logprobs(None, 0, 2) is None
    assert span_logprobs([], 0, 2) is None
    assert span_logprobs(PAIRS, 0, 9) is None  # the tokens end before the span does: not a guess
    assert span_logprobs(PAIRS, 2, 3, skip_blank=True) is None  # only a blank token in the span


def test_spells_checks_the_alignment():
    assert spells(PAIRS, "ab cd\nef")
    assert not spells(PAIRS, "ab cd ef")


def test_openai_style_logprobs_become_pairs():
    content = [SimpleNamespace(token="a", logprob=-0.5), SimpleNamespace(token="b", logprob=0.1)]
    assert logprob_pairs(SimpleNamespace(content=content)) == [("a", -0.5), ("b", 0.0)]
    assert logprob_pairs({"content": [{"token": "x", "logprob": -1}]}) == [("x", -1.0)]
    assert logprob_pairs({"content": [{"token": "x"}]}) is None
    assert logprob_pairs(None) is None and logprob_pairs(SimpleNamespace(content=[])) is None


def test_logprob_text_is_recorded_by_the_decorator_and_found_again():
    @capture_logprobs
    def llm(prompt: str) -> str:
        return LogprobText(f"sync {prompt}", [("sync ", -0.1), (prompt, -0.2)])

    @capture_logprobs
    async def allm(prompt: str) -> str:
        return LogprobText(f"async {prompt}", [("async ", -0.3), (prompt, -0.4)])

    assert llm("p1") == "sync p1"
    assert asyncio.run(allm("p2")) == "async p2"
    assert lookup_logprobs("sync p1") == (("sync ", -0.1), ("p1", -0.2))
    assert lookup_logprobs("  async p2\n") == (("async ", -0.3), ("p2", -0.4))  # keyed on the stripped text
    assert lookup_logprobs("never seen") is None
    record_logprobs("manual", [])  # nothing to record
    assert lookup_logprobs("manual") is None
