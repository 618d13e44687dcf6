"""The metric registry of a set of plugins, read through the manager's pluggy relay
(:meth:`~triage_plugins.runtime.manager.TriageManager.registrations`), never by attribute lookup.

The built-in metrics are registered by the default plugin ``triage.metrics``
(:class:`~triage_plugins.plugins.builtin_metrics.BuiltinMetrics`) like any plugin's;
:func:`~triage_plugins.metrics.registry.registry_from` turns what was registered into a registry.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from triage_plugins.metrics.registry import MetricRegistry, registry_from
from triage_plugins.runtime.manager import Registration, TriageManager

if TYPE_CHECKING:
    from triage_plugins.contract.context import PluginContext

__all__ = ["BUILTIN_PLUGIN", "metric_registry"]

BUILTIN_PLUGIN = "triage.metrics"
"""The default plugin that registers the built-in metrics."""

_HOOK = "triage_register_metrics"
_by_manager: weakref.WeakKeyDictionary[object, MetricRegistry] = weakref.WeakKeyDictionary()
_from_entry_points: MetricRegistry | None = None


def _builtin_registrations() -> list[Registration]:
    """The built-in plugin's registration, read on a manager of its own (``[]`` when it is blocked)."""
    with TriageManager(defaults=(BUILTIN_PLUGIN,), entry_points=False, synchronous=True) as manager:
        return manager.registrations(_HOOK)


def _of_manager(manager: PluginContext) -> MetricRegistry:
    """What the manager's plugins register; a manager that loaded no default plugin registering metrics
    (``defaults=False``) still reads the built-in plugin's, unless ``triage.metrics`` is blocked."""
    done = manager.registrations(_HOOK)
    if not any(r.source == "default" for r in done):
        done = [*_builtin_registrations(), *done]
    return registry_from(done)


def metric_registry(
    manager: PluginContext | None = None,
    *,
    plugins: Iterable[object] | None = None,
    refresh: bool = False,
) -> MetricRegistry:
    """The built-in metrics plus those plugins register through ``triage_register_metrics``.

    :param manager: read the plugins registered on this manager (its default, entry-point and
        ``register()``-ed plugins); the result is kept per manager, so the hook is called once.
    :param plugins: read these plugin objects instead (not kept); a failing one is an error.
    :param refresh: without ``manager`` or ``plugins`` the ``triage`` entry-point plugins are read,
        once per process; ``refresh=True`` reads them again (after installing a plugin, in tests).
    :raises ConfigError: one of ``plugins`` registered a symbol twice, or its hook failed. A
        failing plugin of ``manager`` or an entry point is logged and listed in
        :attr:`MetricRegistry.failed` instead; the other plugins' metrics are kept.
    """
    global _from_entry_points
    if plugins is not None:
        with TriageManager(defaults=(BUILTIN_PLUGIN,), entry_points=False, synchronous=True) as own:
            for plugin in plugins:
                own.register(plugin)
            return registry_from(own.registrations(_HOOK), strict=True)
    if manager is not None:
        registry = _by_manager.get(manager)
        if registry is None or refresh:
            registry = _by_manager[manager] = _of_manager(manager)
        return registry
    if _from_entry_points is None or refresh:
        with TriageManager(defaults=(BUILTIN_PLUGIN,), synchronous=True) as own:
            _from_entry_points = _of_manager(own)
    return _from_entry_points
