"""Isolation: every hook implementation is wrapped so the host never sees what a plugin does wrong.

- **Exceptions** — anything a plugin raises, ``SystemExit`` included, is handed to ``on_error``
  (logged once, counted) and the call counts as no answer. Only ``KeyboardInterrupt`` on the main
  thread goes through: the user pressed Ctrl-C.
- **Answers** — what ``triage_rerank`` and ``triage_gate`` return is checked here
  (:mod:`triage_plugins.runtime.answers`); a bad answer is the plugin's failure, and pluggy goes on
  to the next implementation, so one plugin's garbage cannot silence the defaults.
- **Time** — a synchronous hook runs under a budget (:class:`SyncBudget`) that covers reading,
  converting and checking its answer too (a lazy rerank answer is read only until the budget is
  spent); a call that raises counts as over budget, so a failing plugin is suspended like a slow one. CPython cannot stop a
  running thread, and handing every call to a helper thread costs ~80 µs (more than the whole 5 %
  overhead budget of a 1.6 ms host query, DESIGN §2), so the call runs inline: an answer that came later
  than the budget is discarded and counted as ``OverBudget``, and that plugin is then skipped
  (counted as ``Suspended``) for a cool-down before it is asked again. A slow plugin costs the host
  one slow call per cool-down, not every call.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

import pluggy

from triage_plugins.contract import hookspecs
from triage_plugins.runtime.answers import (
    SlowAnswer,
    check_gate,
    check_learned_scores,
    check_rerank,
    check_seeded,
)

__all__ = [
    "ANSWER_CHECKS",
    "DEFAULT_HOOK_BUDGET",
    "IsolatingPluginManager",
    "OverBudget",
    "Suspended",
    "SyncBudget",
]

#: Seconds one plugin may take to answer a synchronous hook: 100× what the default gate and learner
#: take offline, and well under an LLM-backed query.
DEFAULT_HOOK_BUDGET = 0.25

#: Synchronous hooks whose answers are checked inside the isolation boundary; each check takes the
#: answer and the hook's one argument (pluggy passes it positionally).
ANSWER_CHECKS: dict[str, Callable[..., Any]] = {
    "triage_rerank": lambda answer, request: check_rerank(answer, len(request.ids)),
    "triage_gate": lambda answer, event: check_gate(answer),
    "triage_learned_scores": lambda answer, *args: check_learned_scores(answer),
    "triage_seed_scores": lambda answer, *args: check_seeded(answer),
}
#: The synchronous hooks on a host's query path, which answer within the time budget.
BUDGETED_HOOKS: frozenset[str] = frozenset({"triage_rerank", "triage_gate"})


class OverBudget(RuntimeError):
    """A plugin answered a synchronous hook later than the budget allows."""


class Suspended(RuntimeError):
    """A plugin skipped because it went over budget less than a cool-down ago."""


class SyncBudget:
    """The time budget of synchronous hooks, and which plugins are cooling down.

    :param seconds: budget per plugin call; ``0`` (or less) switches it off.
    :param cooldown: seconds a plugin over budget is skipped.
    """

    def __init__(self, seconds: float, *, cooldown: float = 30.0) -> None:
        self.seconds = float(seconds)
        self.cooldown = float(cooldown)
        self._until: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.seconds > 0

    def suspended(self, plugin: str, hook: str) -> bool:
        """Whether ``plugin`` is still cooling down for ``hook``."""
        until = self._until.get((plugin, hook))
        if until is None:
            return False
        if time.monotonic() < until:
            return True
        with self._lock:
            self._until.pop((plugin, hook), None)  # cooled down: ask it again
        return False

    def suspend(self, plugin: str, hook: str) -> None:
        with self._lock:
            self._until[(plugin, hook)] = time.monotonic() + self.cooldown


class IsolatingPluginManager(pluggy.PluginManager):
    """A pluggy manager that wraps each hook implementation as the module docstring says.

    :param on_error: called with (plugin name, hook name, exception) for every contained failure.
    :param budget: the synchronous hooks' time budget.
    """

    def __init__(self, on_error: Callable[[str, str, BaseException], None], budget: SyncBudget) -> None:
        super().__init__(hookspecs.PROJECT)
        self._on_error = on_error
        self._budget = budget

    def register(self, plugin: object, name: str | None = None) -> str | None:
        plugin_name = super().register(plugin, name)
        if plugin_name is None:  # blocked
            return None
        for caller in self.get_hookcallers(plugin) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is not plugin or impl.hookwrapper or impl.wrapper:
                    continue
                if getattr(impl.function, "_triage_isolated", False):
                    continue
                impl.function = self._isolate(impl.plugin_name, caller.name, impl.function)
        return plugin_name

    def _isolate(self, plugin_name: str, hook_name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        on_error = self._on_error
        check = ANSWER_CHECKS.get(hook_name)
        budget = self._budget if hook_name in BUDGETED_HOOKS else None

        def timed(*args: Any, **kwargs: Any) -> Any:
            """The plugin's checked answer; the budget covers the call and the check (module docstring)."""
            if budget is None or not budget.enabled:
                answer = fn(*args, **kwargs)
                return None if answer is None else check(answer, *args, *kwargs.values())  # type: ignore[misc]
            start = time.perf_counter()
            try:
                answer = fn(*args, **kwargs)
                if answer is not None and hook_name == "triage_rerank":
                    request = args[0] if args else next(iter(kwargs.values()))
                    answer = check_rerank(answer, len(request.ids), start + budget.seconds)
                elif answer is not None:
                    answer = check(answer, *args, *kwargs.values())  # type: ignore[misc]
            except SlowAnswer as exc:
                budget.suspend(plugin_name, hook_name)
                raise OverBudget(f"{exc}, over the {budget.seconds:g} s budget") from None
            except BaseException:
                budget.suspend(plugin_name, hook_name)  # a failing plugin counts as over budget
                raise
            took = time.perf_counter() - start
            if took > budget.seconds:
                budget.suspend(plugin_name, hook_name)
                raise OverBudget(f"answered after {took:.3f} s, over the {budget.seconds:g} s budget")
            return answer

        @functools.wraps(fn)
        def isolated(*args: Any, **kwargs: Any) -> Any:
            try:
                if check is None:
                    return fn(*args, **kwargs)
                if budget is not None and budget.enabled and budget.suspended(plugin_name, hook_name):
                    raise Suspended(
                        f"skipped: over the {budget.seconds:g} s budget less than {budget.cooldown:g} s ago"
                    )
                return timed(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - isolation is the point, SystemExit included
                if (
                    isinstance(exc, KeyboardInterrupt)
                    and threading.current_thread() is threading.main_thread()
                ):
                    raise  # the user pressed Ctrl-C: that is not the plugin's to swallow
                on_error(plugin_name, hook_name, exc)
                return None

        isolated._triage_isolated = True  # type: ignore[attr-defined]
        return isolated
