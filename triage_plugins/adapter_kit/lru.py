"""The bounded, thread-safe LRU every adapter keeps: :class:`~triage_plugins.contract.lru.LRU`."""

from __future__ import annotations

from triage_plugins.contract.lru import LRU

__all__ = ["LRU"]
