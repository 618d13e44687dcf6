"""Old per-module metric tables as views of the registry (``extraction.METRICS`` and the like)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def metrics_view(module: str, **filters: Any) -> Callable[[str], Any]:
    """A module ``__getattr__`` whose ``METRICS`` is symbol -> function of the built-in specs that
    match ``filters`` (see :meth:`~triage_plugins.metrics.registry.MetricRegistry.select`); read
    late, because the registry imports the module for its functions."""

    def __getattr__(name: str) -> Any:
        if name == "METRICS":
            from triage_plugins.metrics.registry import BUILTIN_METRICS

            return {s.symbol: s.function for s in BUILTIN_METRICS.select(**filters)}
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
