"""The built-in metrics as a default plugin (``triage.metrics``): it registers every spec of
:data:`~triage_plugins.metrics.registry.BUILTIN_METRICS` through ``triage_register_metrics``, so the
built-ins reach a registry the way a plugin's metrics do (blocking it leaves them out)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from triage_plugins.contract.hookspecs import hookimpl

if TYPE_CHECKING:
    from triage_plugins.contract.context import PluginContext
    from triage_plugins.metrics.registry import MetricSpec

__all__ = ["BuiltinMetrics"]


class BuiltinMetrics:
    """Registers the metrics of TRIAGE Table 2, chain links included (only a default plugin may).

    :param context: the manager (unused: the built-ins need nothing from it).
    """

    def __init__(self, context: PluginContext | None = None) -> None:
        del context

    @hookimpl
    def triage_register_metrics(self, register: Callable[[MetricSpec], None]) -> None:
        from triage_plugins.metrics.registry import BUILTIN_METRICS  # late: a manager start stays cheap

        for spec in BUILTIN_METRICS:
            register(spec)
