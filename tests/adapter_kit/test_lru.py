"""The bounded LRU (triage_plugins.adapter_kit.lru) every adapter and the feedback learner keep."""

from __future__ import annotations

import threading

import pytest

from triage_plugins.adapter_kit.lru import LRU


def test_the_least_recently_used_entry_goes_first():
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a read is a use: "b" is now the oldest
    cache["c"] = 3
    assert "b" not in cache and list(cache) == ["a", "c"]
    assert len(cache) == 2 and cache.values() == [1, 3] and cache.items() == [("a", 1), ("c", 3)]


def test_missing_keys_pop_and_clear():
    cache: LRU[str, int] = LRU(3)
    assert cache.get("x") is None and cache.get("x", 7) == 7
    with pytest.raises(KeyError):
        cache["x"]
    cache.put("x", 0)
    assert cache["x"] == 0  # falsy values are values
    assert cache.pop("x") == 0 and cache.pop("x", "gone") == "gone"
    cache.put("y", 1)
    cache.clear()
    assert len(cache) == 0


def test_the_bound_holds_under_concurrent_writers():
    cache: LRU[int, int] = LRU(50)

    def write(base: int) -> None:
        for i in range(2000):
            cache.put(base + i, i)
            cache.get(base + i // 2)

    threads = [threading.Thread(target=write, args=(k * 10_000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 50


def test_a_bound_below_one_is_refused():
    with pytest.raises(ValueError):
        LRU(0)


def test_the_feedback_learner_keeps_its_memory_in_the_kits_lru():
    from triage_plugins.plugins import feedback

    assert feedback._LRU is LRU
