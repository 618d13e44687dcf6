"""Priorities -> host order (triage_plugins.adapter_kit.ordering): the one ranking rule of every adapter."""

from __future__ import annotations

import math

from triage_plugins import hookimpl
from triage_plugins.adapter_kit.ordering import as_relevance, ask_priorities, host_order
from triage_plugins.runtime.manager import TriageManager


class Fixed:
    """Answers ``triage_rerank`` from a table (0 for unknown ids) and keeps the requests."""

    def __init__(self, table: dict[str, float] | None) -> None:
        self.table = table
        self.requests: list = []

    @hookimpl
    def triage_rerank(self, request):
        self.requests.append(request)
        return None if self.table is None else [self.table.get(i, 0.0) for i in request.ids]


def manager_with(plugin: object) -> TriageManager:
    m = TriageManager(store=None, synchronous=True, entry_points=False, defaults=False)
    m.register(plugin)
    return m


def test_host_order_is_a_stable_sort_by_descending_priority():
    assert host_order([0.2, 0.9, 0.2, 0.5]) == [1, 3, 0, 2]  # the two 0.2 keep their order
    assert host_order([]) == []
    assert host_order([1.0, 1.0, 1.0]) == [0, 1, 2]  # equal scores: exactly the host's order


def test_ties_follow_the_given_order():
    # local mode's rule: P first, then the edge degree (here: candidate 2 has the higher degree)
    assert host_order([0.5, 0.5, 0.5, 0.9], ties=[2, 0, 1, 3]) == [3, 2, 0, 1]


def test_relevance_is_clipped_and_undefined_counts_as_zero():
    assert [as_relevance(v) for v in (-1, 0.25, 3, "x", None, math.nan, math.inf)] == [
        0.0, 0.25, 1.0, 0.0, 0.0, 0.0, 1.0,
    ]  # fmt: skip


def test_ask_priorities_sends_each_id_once_and_maps_back_per_candidate():
    plugin = Fixed({"b": 0.9, "a": 0.1})
    m = manager_with(plugin)
    priorities = ask_priorities(m, "toy", "q", "triple", ["a", "b", "a"], [0.3, 2.0, 0.8], "q-1")
    assert priorities == [0.1, 0.9, 0.1]  # the repeat shares the first occurrence's priority
    (request,) = plugin.requests
    assert request.ids == ("a", "b")
    assert request.relevance == (0.3, 1.0)  # first occurrence's S_r, clipped into [0, 1]
    assert (request.framework, request.unit, request.query, request.query_id) == ("toy", "triple", "q", "q-1")
    assert host_order(priorities) == [1, 0, 2]


def test_no_answer_or_no_candidate_keeps_the_host_order():
    silent = Fixed(None)
    m = manager_with(silent)
    assert ask_priorities(m, "toy", "q", "chunk", ["c1"], [1.0]) is None
    assert ask_priorities(m, "toy", "q", "chunk", [], []) is None
    assert len(silent.requests) == 1  # nothing is asked for no candidate
