"""A hostile plugin, to check that no plugin can change, crash or hang a host.

Adapter authors run their framework with it beside the default plugins and assert the answers are
those of the default plugins alone, with every failure counted (this project's adapter tests do).

:class:`Hostile` implements every per-event hook and misbehaves in one of :data:`MODES`:

* ``raise``: every hook raises ``RuntimeError``;
* ``exit``: notification hooks raise ``SystemExit`` / ``KeyboardInterrupt``, sync hooks ``SystemExit``;
* ``garbage``: rerank answers an endless iterator, strings, ``nan``, the wrong length; the gate answers
  objects that are not decisions; learned scores are not numbers;
* ``sleep``: the synchronous hooks (gate, rerank, learned scores) sleep past the manager's budget
  and then answer garbage (a late answer must be discarded, not used).

:func:`hostile_manager` builds a manager with the default plugins on, the given hostile plugin
registered beside them, and a short hook budget, so tests stay quick.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.runtime.manager import TriageManager

MODES = ("raise", "exit", "garbage", "sleep")
BUDGET = 0.05  # seconds a synchronous hook may take in these tests
SLEEP = 0.2  # what a sleeping hook takes (4x the budget)


class Hostile:
    """Misbehaves in every hook it implements (see the module docstring); counts its calls."""

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        self.mode = mode
        self.calls: dict[str, int] = {}
        self._flip = itertools.count()

    def _called(self, hook: str) -> None:
        self.calls[hook] = self.calls.get(hook, 0) + 1

    def _notify(self, hook: str) -> None:
        self._called(hook)
        if self.mode == "raise":
            raise RuntimeError(f"hostile {hook}")
        if self.mode == "exit":
            raise SystemExit(3) if next(self._flip) % 2 else KeyboardInterrupt()

    def _sync(self, hook: str, garbage: Any) -> Any:
        self._called(hook)
        if self.mode == "raise":
            raise RuntimeError(f"hostile {hook}")
        if self.mode == "exit":
            raise SystemExit(4)
        if self.mode == "sleep":
            time.sleep(SLEEP)
        return garbage

    @hookimpl
    def triage_extraction(self, event: Any) -> None:
        self._notify("triage_extraction")

    @hookimpl
    def triage_graph(self, event: Any) -> None:
        self._notify("triage_graph")

    @hookimpl
    def triage_retrieval(self, event: Any) -> None:
        self._notify("triage_retrieval")

    @hookimpl
    def triage_generation(self, event: Any) -> None:
        self._notify("triage_generation")

    @hookimpl
    def triage_feedback(self, event: Any) -> None:
        self._notify("triage_feedback")

    @hookimpl(tryfirst=True)
    def triage_gate(self, event: Any) -> Any:
        return self._sync("triage_gate", object())

    @hookimpl(tryfirst=True)
    def triage_rerank(self, request: Any) -> Any:
        n = next(self._flip) % 4
        garbage = (
            itertools.repeat(1.0),  # endless: must not be consumed
            ["1.0"] * len(request.ids),  # strings
            [math.nan] * len(request.ids),  # not finite
            [1.0] * (len(request.ids) + 3),  # wrong length
        )[n]
        return self._sync("triage_rerank", garbage)

    @hookimpl(tryfirst=True)
    def triage_learned_scores(self, unit: str, ids: Any) -> Any:
        return self._sync("triage_learned_scores", {"x": "not a number", "y": math.inf})


def hostile_manager(
    mode: str | None,
    *,
    store: Any = None,
    reweight: bool = False,
    options: dict[str, Any] | None = None,
) -> tuple[TriageManager, Hostile | None]:
    """A manager with the default plugins (and ``store``), plus a :class:`Hostile` in ``mode``
    (``None``: the default plugins alone, the baseline to compare with)."""
    manager = TriageManager(
        store if store is not None else ":memory:",
        config=TriageConfig(reweight=reweight, options=options or {}),
        entry_points=False,
        hook_budget=BUDGET,
    )
    hostile = None
    if mode is not None:
        hostile = Hostile(mode)
        manager.register(hostile, name="hostile")
    return manager, hostile


def failures_of(manager: TriageManager, plugin: str = "hostile") -> int:
    """How many failures the manager counted for ``plugin``."""
    return sum(n for key, n in manager.failures.items() if plugin in key)
