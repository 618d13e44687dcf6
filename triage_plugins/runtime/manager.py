"""The plugin manager: a small typed facade over :class:`pluggy.PluginManager` (DESIGN §2, STYLE).

Adapters call the facade (``emit_retrieval(event)``, ``gate(event)``, ``rerank(request)``), never
``pm.hook`` directly, so a misspelt hook fails at import, not at 2 a.m.

- **Default plugins** (the core's own handlers, listed in :mod:`triage_plugins.plugins`) and
  **entry-point plugins** (group ``"triage"``) are loaded at construction.
- ``TRIAGE_DISABLE_PLUGINS=name,name`` blocks plugins by name; ``TRIAGE_TRACE_PLUGINS=1`` logs every
  hook call on the ``triage.trace`` logger; ``TRIAGE_SYNC=1`` delivers notifications inline.
- **Isolation** (:mod:`triage_plugins.runtime.isolation`): every hook implementation is wrapped at
  registration; an exception it raises (``SystemExit`` included), an invalid ``triage_rerank`` /
  ``triage_gate`` answer, or an answer over the synchronous time budget is logged (once per plugin,
  hook and kind), counted in :attr:`TriageManager.failures` and skipped. It never reaches the
  adapter or the host, and the next implementation answers.
- **Off the hot path** (:mod:`triage_plugins.runtime.dispatch`): notification hooks are queued
  (bounded) and delivered in batches by one supervised background thread, like OpenTelemetry's batch
  span processor. A full queue drops the event and
  counts it in :attr:`TriageManager.dropped`; the host never blocks. :meth:`TriageManager.flush`
  drains the queue (it also runs at interpreter exit). ``triage_gate`` and ``triage_rerank`` are
  synchronous because the host waits for their answer.
- **One write per batch**: a default plugin that writes to the store may buffer while
  :meth:`TriageManager.batching` and write once in its :meth:`TriageManager.at_batch_end` callback
  (the recorder and the usage metrics do): one transaction per worker batch instead of one per event,
  still committed before ``flush()`` returns.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import difflib
import functools
import importlib
import logging
import os
import signal
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from importlib import metadata
from typing import TYPE_CHECKING, Any, TypeVar

from triage_plugins.contract import hookspecs
from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.errors import ConfigError, EventError
from triage_plugins.contract.events import (
    Event,
    ExtractionEvent,
    FeedbackEvent,
    GateDecision,
    GenerationEvent,
    GraphEvent,
    RerankRequest,
    RetrievalEvent,
)
from triage_plugins.contract.records import GraphRecord, QueryRecord
from triage_plugins.runtime.answers import InvalidAnswer, is_finite_real
from triage_plugins.runtime.dispatch import DEFAULT_QUEUED_BYTES, SETTLE_SECONDS, Dispatcher, event_weight
from triage_plugins.runtime.isolation import (
    ANSWER_CHECKS,
    DEFAULT_HOOK_BUDGET,
    IsolatingPluginManager,
    OverBudget,
    Suspended,
    SyncBudget,
)
from triage_plugins.store.base import is_store, open_store, store_from_env
from triage_plugins.store.guard import GuardedStore
from triage_plugins.store.scoped import scoped

if TYPE_CHECKING:
    from triage_plugins.contract.events import Gold
    from triage_plugins.kg.ontology import Ontology
    from triage_plugins.metrics.registry import MetricRegistry
    from triage_plugins.plugins.feedback import FeedbackLearner
    from triage_plugins.plugins.recorder import StoreRecorder
    from triage_plugins.plugins.usage import UsageRecorder
    from triage_plugins.store.base import Store

__all__ = ["PluginInfo", "Registration", "TriageManager", "default_manager"]

_P = TypeVar("_P")

log = logging.getLogger("triage.manager")
trace_log = logging.getLogger("triage.trace")

ENTRY_POINT_GROUP = "triage"

_NOTIFICATIONS: dict[str, type] = {
    "triage_extraction": ExtractionEvent,
    "triage_graph": GraphEvent,
    "triage_retrieval": RetrievalEvent,
    "triage_generation": GenerationEvent,
    "triage_feedback": FeedbackEvent,
    "triage_query_scored": QueryRecord,
    "triage_graph_scored": GraphRecord,
}
#: The argument name of a notification hook whose argument is not ``event``.
_ARGUMENT: dict[str, str] = {"triage_query_scored": "record", "triage_graph_scored": "record"}
_NO_CALLER = object()  # ``TriageManager._callers``: not looked up yet (``None``: no plugin implements it)
_JOB = object()  # marks a deferred job among the queued notifications
_IN_CONTEXT = object()  # marks an item delivered inside the emitting thread's contextvars (carry_context)
#: Hooks a plugin answers by calling ``register(item)`` (after simonw/llm's ``register_models``).
REGISTRATION_HOOKS = ("triage_register_metrics", "triage_register_runners")
_registering = threading.local()  # .errors: plugin name -> exception, while registrations() runs
DEFAULT_LANE, OTHER_LANE = "defaults", "plugins"
LANES = (DEFAULT_LANE, OTHER_LANE)
#: Seconds the queued events get to reach the store when the process exits (``TRIAGE_EXIT_TIMEOUT``).
EXIT_TIMEOUT = 5.0


def _env_list(name: str) -> list[str]:
    return [part.strip() for part in os.environ.get(name, "").split(",") if part.strip()]


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class PluginInfo:
    """What ``triage plugins`` shows for one plugin."""

    name: str
    version: str | None
    hooks: tuple[str, ...]
    source: str  # "default", "entry point" or "registered"
    distribution: str | None = None


@dataclass(frozen=True)
class Registration:
    """What one plugin registered through a registration hook, or why it failed (then drop ``items``).

    :param source: where the plugin came from: ``"default"`` (the core's own), ``"entry point"`` or
        ``"registered"``.
    """

    plugin: str
    items: tuple[Any, ...]
    error: BaseException | None = None
    source: str = "registered"


@dataclass
class _LoadError:
    name: str
    source: str
    error: str


class TriageManager:
    """Loads plugins and delivers events to them.

    :param store: a :class:`~triage_plugins.store.Store`, a path or ``sqlite:///`` URL, or ``None``
        (no persistence; metrics are still computed by plugins that keep them in memory).
    :param config: thresholds and switches read by the default plugins; with ``config.namespace``
        set, :attr:`store` is a :class:`~triage_plugins.store.scoped.ScopedStore` of that namespace.
    :param entry_points: load plugins from the ``triage`` entry-point group.
    :param defaults: load the core's default plugins (:mod:`triage_plugins.plugins`), or only those
        named (``defaults=("triage.metrics",)``: the built-in metrics and nothing else).
    :param synchronous: deliver notifications inline instead of on the background worker
        (defaults to ``TRIAGE_SYNC``); useful in tests and scripts.
    :param queue_size: bound of the notification queue; beyond it events are dropped and counted.
    :param batch_size: most events the worker delivers per wake-up.
    :param schedule_delay: seconds the worker waits after the first queued event for more to
        arrive before delivering (``flush()`` cuts the wait short); ``0`` delivers at once.
    :param max_queued_weight: bound of the queued events' total size in bytes (default 128 MiB), each
        event's estimated by :func:`~triage_plugins.runtime.dispatch.event_weight` (its text and objects):
        the queue's memory stays bounded, not only its count; events beyond it are dropped and counted.
    :param hook_budget: seconds one plugin may take to answer ``triage_gate`` or ``triage_rerank``
        (default ``TRIAGE_HOOK_BUDGET`` or 0.25; ``0`` switches the budget off). An answer over budget
        is discarded (the next plugin answers) and counted, and the plugin is skipped for
        ``hook_cooldown`` seconds before it is asked again.
    :param hook_cooldown: seconds a plugin over budget is skipped.
    :param spill_dir: where writes wait while the store fails (:mod:`triage_plugins.store.guard`;
        default ``TRIAGE_SPILL_DIR`` or ``~/.cache/triage/spill``).
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        config: TriageConfig | None = None,
        entry_points: bool = True,
        defaults: bool | Collection[str] = True,
        synchronous: bool | None = None,
        queue_size: int = 10_000,
        batch_size: int = 256,
        schedule_delay: float = 0.05,
        max_queued_weight: int = DEFAULT_QUEUED_BYTES,
        hook_budget: float | None = None,
        hook_cooldown: float = 30.0,
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if queue_size < 1 or batch_size < 1:
            raise ConfigError("queue_size and batch_size must be >= 1")
        if not 0.0 <= schedule_delay <= 10.0:
            raise ConfigError(f"schedule_delay must be in [0, 10] seconds, got {schedule_delay!r}")
        self.config = config or TriageConfig()
        self._owns_store = store is not None and not is_store(store)
        # config.namespace: the learned state lives in that scope of the store (the default scope: as is)
        self.store: Store | None = scoped(self._open_store(store, spill_dir), self.config.namespace)
        self.run_id: str | None = None
        self.synchronous = _env_flag("TRIAGE_SYNC") if synchronous is None else synchronous
        self.failures: Counter[tuple[str, str, str]] = Counter()
        self.delivered = 0
        self.load_errors: list[_LoadError] = []
        self._reported: set[tuple[str, str, str]] = set()
        self._sources: dict[str, tuple[str, str | None, str | None]] = {}
        self._lock = threading.Lock()
        # Two delivery lanes, each its own bounded queue and worker: the default plugins, and every
        # other plugin, so a slow third-party plugin cannot starve the defaults. Events enter the
        # default lane and are handed on to the other (see _run_item), so both see them in order.
        # Set while no host query is in flight (host_busy): the workers deliver between queries.
        self._host_idle = threading.Event()
        self._host_idle.set()
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._lanes = {
            lane: Dispatcher(
                functools.partial(self._run_item, lane),
                queue_size=queue_size,
                batch_size=batch_size,
                schedule_delay=schedule_delay,
                max_weight=max_queued_weight,
                name=f"triage-{lane}",
                yield_to=self._host_idle,
                on_batch_end=functools.partial(self._end_batch, lane),
                group=self._group_writes if lane == DEFAULT_LANE else None,
            )
            for lane in LANES
        }
        self._batch_end: list[tuple[str, Callable[[], None]]] = []  # (owner, callback), default lane
        self._callers: dict[tuple[str, str], Any] = {}  # (lane, hook) -> hook caller of that lane's plugins
        self._plugin_changes = 0  # bumped by every register/unregister: a lookup begun before is not cached
        self._closed = False
        #: Deliver each queued item inside a copy of the emitting thread's ``contextvars`` (set by
        #: ``triage.otel`` so spans made on the worker parent to the host's current span). A callable
        #: is run inside the copy on the emitting thread first (it must not raise).
        self.carry_context: bool | Callable[[], None] = False
        #: What a benchmark knows and the host does not (``triage compare`` sets them): ``gold_of(query_id)``
        #: gives the gold of a retrieval event that carries none, ``ontology`` that of a graph event.
        self.gold_of: Callable[[str], Gold | None] | None = None
        self.ontology: Ontology | None = None

        budget = (
            hook_budget if hook_budget is not None else _env_float("TRIAGE_HOOK_BUDGET", DEFAULT_HOOK_BUDGET)
        )
        self.budget = SyncBudget(budget, cooldown=hook_cooldown)
        self._pm = IsolatingPluginManager(self._on_plugin_error, self.budget)
        self._pm.add_hookspecs(hookspecs)
        for name in _env_list("TRIAGE_DISABLE_PLUGINS"):
            self._pm.set_blocked(name)
        if _env_flag("TRIAGE_TRACE_PLUGINS"):
            self._pm.add_hookcall_monitoring(self._trace_before, self._trace_after)
        try:
            if defaults:
                self._load_defaults(None if defaults is True else frozenset(defaults))  # type: ignore[arg-type]
            if entry_points:
                self._load_entry_points()
            self.check_options()
        except ConfigError:
            if self._owns_store and self.store is not None:
                self.store.close()  # the caller's configuration is refused: leave nothing open
            raise
        atexit.register(_flush_at_exit, weakref.ref(self))
        _exit_on_sigterm()

    # ------------------------------------------------------------------ setup

    @staticmethod
    def _open_store(store: Any, spill_dir: str | os.PathLike[str] | None) -> Store | None:
        """The store behind a circuit breaker (:class:`~triage_plugins.store.guard.GuardedStore`)."""
        if store is None:
            return None
        opened = open_store(store)
        return opened if isinstance(opened, GuardedStore) else GuardedStore(opened, spill_dir=spill_dir)  # type: ignore[return-value]

    def _guard(self) -> GuardedStore | None:
        store = self.store
        while store is not None and not isinstance(store, GuardedStore):
            store = getattr(store, "inner", None)  # a view over the guarded store (store/scoped.py)
        return store

    @property
    def write_failures(self) -> dict[str, Any]:
        """This run's failed store writes by what and cause, and what became of them
        (:meth:`StoreFaults.to_dict <triage_plugins.store.guard.StoreFaults.to_dict>`; ``{}`` when none)."""
        guard = self._guard()
        return {} if guard is None else guard.faults.to_dict()

    def _load_defaults(self, only: frozenset[str] | None = None) -> None:
        from triage_plugins.plugins import DEFAULT_PLUGINS

        unknown = sorted((only or set()) - {name for name, _ in DEFAULT_PLUGINS})
        if unknown:
            known = ", ".join(name for name, _ in DEFAULT_PLUGINS)
            raise ConfigError(
                f"no default plugin named {', '.join(unknown)}; the default plugins are {known}"
            )
        for name, target in DEFAULT_PLUGINS:
            if self._pm.is_blocked(name) or (only is not None and name not in only):
                continue
            try:
                module_name, _, attr = target.partition(":")
                factory = getattr(importlib.import_module(module_name), attr)
                plugin = factory(self)
            except ConfigError:  # the caller's configuration is wrong: say so, don't run without it
                raise
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the host
                log.error("default plugin %s (%s) failed to load: %s", name, target, exc, exc_info=exc)
                self.load_errors.append(_LoadError(name, "default", f"{type(exc).__name__}: {exc}"))
                continue
            self.register(plugin, name=name, _source=("default", None, None))

    def _load_entry_points(self) -> None:
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            if self._pm.is_blocked(ep.name) or self._pm.has_plugin(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001
                log.error("entry-point plugin %s (%s) failed to load: %s", ep.name, ep.value, exc)
                self.load_errors.append(_LoadError(ep.name, "entry point", f"{type(exc).__name__}: {exc}"))
                continue
            dist = getattr(ep, "dist", None)
            try:
                self.register(
                    plugin,
                    name=ep.name,
                    _source=("entry point", getattr(dist, "name", None), getattr(dist, "version", None)),
                )
            except ConfigError as exc:  # a misspelt hook in an installed package must not stop the host
                log.error("entry-point plugin %s (%s) not loaded: %s", ep.name, ep.value, exc)
                self.load_errors.append(_LoadError(ep.name, "entry point", str(exc)))

    def register(
        self, plugin: object, name: str | None = None, *, _source: tuple | None = None
    ) -> str | None:
        """Register a plugin object or module; returns its name (``None`` when blocked).

        Without ``name``, the plugin's ``triage_name`` attribute, module name or class name is used.

        :raises ConfigError: the plugin implements a hook the specification does not have (a
            misspelt ``triage_retreival``, say; pluggy's ``check_pending``); it is not registered.
        """
        if name is None:
            name = (
                getattr(plugin, "triage_name", None)
                or getattr(plugin, "__name__", None)
                or type(plugin).__name__
            )
            base, k = name, 1
            while self._pm.has_plugin(name):
                k += 1
                name = f"{base}-{k}"
        registered = self._pm.register(plugin, name=name)
        if registered is None:
            return None
        unknown = self._unknown_hooks(plugin)
        if unknown:
            self._pm.unregister(plugin)
            raise ConfigError(_unknown_hooks_message(registered, unknown, self.hook_names()))
        self._sources[registered] = _source or ("registered", None, None)
        self._plugins_changed()  # lanes are recomputed with the new plugin
        return registered

    def _unknown_hooks(self, plugin: object) -> list[str]:
        """Hooks ``plugin`` implements that no spec declares (what pluggy's ``check_pending`` finds)."""
        out = []
        for caller in self._pm.get_hookcallers(plugin) or ():
            if caller.spec is not None:
                continue
            if any(i.plugin is plugin and not i.optionalhook for i in caller.get_hookimpls()):
                out.append(caller.name)
        return sorted(out)

    def check_pending(self) -> None:
        """Raise :class:`ConfigError` if any registered plugin implements an unknown hook."""
        for name, plugin in self._pm.list_name_plugin():
            unknown = self._unknown_hooks(plugin) if plugin is not None else []
            if unknown:
                raise ConfigError(_unknown_hooks_message(name, unknown, self.hook_names()))

    def declared_options(self) -> dict[str, Any]:
        """Every option key a plugin declares (``triage_options``), with its default.

        Default plugins count even when blocked, so configuring a disabled plugin is not an error.
        """
        from triage_plugins.plugins import DEFAULT_PLUGINS

        owners: list[object] = [p for _, p in self._pm.list_name_plugin() if p is not None]
        for _, target in DEFAULT_PLUGINS:
            module_name, _, attr = target.partition(":")
            owners.append(getattr(importlib.import_module(module_name), attr))
        declared: dict[str, Any] = {}
        for owner in owners:
            options = getattr(owner, "triage_options", None)
            if isinstance(options, Mapping):
                declared.update(options)
        return declared

    def check_options(self) -> None:
        """Raise :class:`ConfigError` for an option key no plugin declares (naming close matches)."""
        declared = self.declared_options()
        for key in self.config.options:
            if key not in declared:
                raise ConfigError(_unknown_option_message(key, declared))

    def unregister(self, plugin_or_name: object) -> None:
        """Remove a plugin by object or by name."""
        if isinstance(plugin_or_name, str):
            plugin = self._pm.get_plugin(plugin_or_name)
            if plugin is None:
                raise ConfigError(f"no plugin named {plugin_or_name!r} is registered")
            name = plugin_or_name
        else:
            plugin = plugin_or_name
            name = self._pm.get_name(plugin)
        self._pm.unregister(plugin)
        self._sources.pop(name or "", None)
        self._plugins_changed()

    def get_plugin(self, name: str) -> Any:
        return self._pm.get_plugin(name)

    # ------------------------------------------------------------------ default plugins by role
    # Apps and the manager find the core's own plugins by type, never by name: a renamed, replaced
    # or blocked plugin then reads as "absent", not as another plugin's object (issue 32).

    def _plugin_of_type(self, cls: type[_P]) -> _P | None:
        """The first registered plugin that is a ``cls`` (subclasses too), or ``None``."""
        return next((p for _, p in self._pm.list_name_plugin() if isinstance(p, cls)), None)

    @property
    def learner(self) -> FeedbackLearner | None:
        """The registered feedback learner (``triage.feedback`` by default), or ``None`` when blocked."""
        from triage_plugins.plugins.feedback import FeedbackLearner

        return self._plugin_of_type(FeedbackLearner)

    @property
    def recorder(self) -> StoreRecorder | None:
        """The registered store recorder (``triage.recorder`` by default), or ``None`` when blocked."""
        from triage_plugins.plugins.recorder import StoreRecorder

        return self._plugin_of_type(StoreRecorder)

    @property
    def scorer(self) -> UsageRecorder | None:
        """The registered scorer (``triage.usage`` by default), or ``None`` when blocked."""
        from triage_plugins.plugins.usage import UsageRecorder

        return self._plugin_of_type(UsageRecorder)

    @property
    def metrics(self) -> MetricRegistry:
        """The metrics this manager's plugins register through ``triage_register_metrics`` (the
        built-in ones come from the default plugin ``triage.metrics``), read once
        (:func:`~triage_plugins.runtime.registrations.metric_registry`)."""
        from triage_plugins.runtime.registrations import metric_registry

        return metric_registry(self)

    def implementers(self, hook_name: str) -> list[tuple[str, object]]:
        """``(name, plugin)`` of every registered plugin implementing ``hook_name``, in registration order."""
        return [
            (name, plugin)
            for name, plugin in self._pm.list_name_plugin()
            if plugin is not None and any(c.name == hook_name for c in self._pm.get_hookcallers(plugin) or ())
        ]

    def plugins(self) -> list[PluginInfo]:
        """Every registered plugin with the hooks it implements."""
        from triage_plugins import __version__

        out = []
        for name, plugin in self._pm.list_name_plugin():
            if plugin is None:
                continue
            source, dist, version = self._sources.get(name, ("registered", None, None))
            if source == "default":
                version = __version__
            hooks = tuple(sorted(c.name for c in self._pm.get_hookcallers(plugin) or ()))
            out.append(PluginInfo(name, version, hooks, source, dist))
        return out

    def hook_names(self) -> tuple[str, ...]:
        """Names of every hook in the specification."""
        hook = self._pm.hook
        return tuple(
            sorted(n for n in dir(hook) if n.startswith("triage_") and getattr(hook, n).spec is not None)
        )

    # ------------------------------------------------------------------ errors and tracing

    def registrations(self, hook_name: str) -> list[Registration]:
        """What each plugin registers through a registration hook, plugin by plugin in registration
        order, each called through pluggy's relay (a subset caller of that one plugin).

        A plugin whose hook raises is contained by its isolation wrapper as any hook is; its
        :class:`Registration` carries the exception, so the caller can drop all of its items.
        """
        if hook_name not in REGISTRATION_HOOKS:
            raise ConfigError(f"{hook_name!r} is not a registration hook ({', '.join(REGISTRATION_HOOKS)})")
        impls = getattr(self._pm.hook, hook_name).get_hookimpls()
        return [self._registration(hook_name, impl.plugin, [i.plugin for i in impls]) for impl in impls]

    def _registration(self, hook_name: str, plugin: object, everyone: list[object]) -> Registration:
        items: list[Any] = []
        others = [p for p in everyone if p is not plugin]
        _registering.errors = errors = {}
        try:
            self._pm.subset_hook_caller(hook_name, remove_plugins=others)(register=items.append)
        finally:
            _registering.errors = None
        name = self._pm.get_name(plugin) or repr(plugin)
        source = self._sources.get(name, ("registered",))[0]
        return Registration(name, tuple(items), errors.get(name), source)

    def _on_plugin_error(self, plugin: str, hook: str, exc: BaseException) -> None:
        key = (plugin, hook, type(exc).__name__)
        errors = getattr(_registering, "errors", None)
        if errors is not None:
            errors.setdefault(plugin, exc)
        with self._lock:
            self.failures[key] += 1
            first = key not in self._reported
            self._reported.add(key)
        if first and isinstance(exc, InvalidAnswer):
            log.error(
                "plugin %s answered %s with an invalid value (%s); its answers are skipped while invalid "
                "(further ones are counted, not logged)",
                plugin,
                hook,
                exc,
            )
        elif first and isinstance(exc, OverBudget | Suspended):
            log.warning("plugin %s in %s: %s (further ones are counted, not logged)", plugin, hook, exc)
        elif first:
            log.warning(
                "plugin %s raised %s in %s; skipped (further %s errors from it are counted, not logged)",
                plugin,
                type(exc).__name__,
                hook,
                type(exc).__name__,
                exc_info=exc,
            )

    @staticmethod
    def _trace_before(hook_name: str, hook_impls: list, kwargs: dict) -> None:
        names = ", ".join(i.plugin_name for i in hook_impls)
        trace_log.info("call %s -> [%s]", hook_name, names)

    @staticmethod
    def _trace_after(outcome: Any, hook_name: str, hook_impls: list, kwargs: dict) -> None:
        trace_log.info("done %s", hook_name)

    # ------------------------------------------------------------------ runs

    def start_run(self, kind: str, config: dict[str, Any] | None = None) -> str | None:
        """Open a run in the store (if any); later events are recorded under it."""
        if self.store is None:
            return None
        self.run_id = self.store.start_run(kind, config)
        return self.run_id

    # ------------------------------------------------------------------ notifications

    def emit_extraction(self, event: ExtractionEvent) -> None:
        """Queue ``triage_extraction(event)``."""
        self._emit("triage_extraction", event)

    def emit_graph(self, event: GraphEvent) -> None:
        """Queue ``triage_graph(event)`` (with :attr:`ontology` when the event has none)."""
        if self.ontology is not None and isinstance(event, GraphEvent) and event.ontology is None:
            event = replace(event, ontology=self.ontology)
        self._emit("triage_graph", event)

    def emit_retrieval(self, event: RetrievalEvent) -> None:
        """Queue ``triage_retrieval(event)`` (with :attr:`gold_of`'s gold when the event has none)."""
        if self.gold_of is not None and isinstance(event, RetrievalEvent) and event.gold is None:
            gold = self.gold_of(event.query_id)
            if gold is not None:
                event = replace(event, gold=gold)
        self._emit("triage_retrieval", event)

    def emit_generation(self, event: GenerationEvent) -> None:
        """Queue ``triage_generation(event)``."""
        self._emit("triage_generation", event)

    def emit_query_scored(self, record: QueryRecord) -> None:
        """Deliver ``triage_query_scored(record)`` (the scorer calls it; inline on the worker)."""
        self._emit("triage_query_scored", record)

    def emit_graph_scored(self, record: GraphRecord) -> None:
        """Deliver ``triage_graph_scored(record)`` (inline on the worker)."""
        self._emit("triage_graph_scored", record)

    def emit_feedback(
        self, event: FeedbackEvent, *, wait: bool = False, timeout: float | None = 30.0
    ) -> bool:
        """Queue ``triage_feedback(event)``; with ``wait``, return once the default plugins handled it.

        ``wait=True`` returns ``True`` only after the recorder committed the event to the store and
        the learner applied it (everything queued before it too): a process killed afterwards loses
        nothing. It returns ``False`` when the wait timed out, or when the event or its score updates
        were not committed (the store is failing: they wait in the spill file, counted in
        :attr:`write_failures`, and are stored when the store is back). Without ``wait`` the loss
        window is the queue: up to ``schedule_delay`` plus one batch.
        """
        guard = self._guard() if wait else None
        if guard is not None:
            guard.expect(event)
        self._emit("triage_feedback", event)
        if not wait:
            return True
        flushed = self._lanes[DEFAULT_LANE].flush(timeout)
        if guard is None:
            return flushed
        committed = guard.committed(event)
        if committed is None:  # never written: durable only when no recorder is there to write it
            committed = not self._closed and self.recorder is None
        return flushed and committed and not guard.degraded

    def _emit(self, hook_name: str, event: Event | QueryRecord | GraphRecord) -> None:
        expected = _NOTIFICATIONS[hook_name]
        if not isinstance(event, expected):
            raise EventError(
                expected.__name__,
                "event",
                f"{hook_name} takes a {expected.__name__}, got {type(event).__name__}",
            )
        if self._closed:
            log.warning("%s after close(); event ignored", hook_name)
            return
        if self.synchronous or self._lanes[DEFAULT_LANE].on_worker():
            self._run_item(DEFAULT_LANE, (hook_name, event))
        else:
            self._lanes[DEFAULT_LANE].submit(self._carry((hook_name, event)), event_weight(event))

    @contextlib.contextmanager
    def host_busy(self) -> Iterator[None]:
        """Mark a host query in flight (adapters wrap each query): the delivery workers wait for
        the host to be idle before each item, up to a bound, so the metrics of earlier queries never
        compete with the query being served. Nests; thread- and task-safe."""
        with self._busy_lock:
            self._busy += 1
            self._host_idle.clear()
        try:
            yield
        finally:
            with self._busy_lock:
                self._busy -= 1
                idle = self._busy <= 0
                if idle:
                    self._busy = 0
                    self._host_idle.set()
            if idle:
                self._host_went_idle()

    def _host_went_idle(self) -> None:
        """Wake the workers once the host stays idle ``SETTLE_SECONDS``.

        On an event loop the check is a timer on that loop (the host's own thread, no thread
        wake-up): back-to-back queries never wake a worker mid-query. Without a running loop the
        workers are woken at once.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._wake_workers()
            return
        loop.call_later(SETTLE_SECONDS, self._wake_if_idle)

    def _wake_if_idle(self) -> None:
        if self._host_idle.is_set():
            self._wake_workers()

    def _wake_workers(self) -> None:
        for dispatch in self._lanes.values():
            dispatch.wake()  # held items are queued; a worker waiting for the host resumes

    def defer(self, fn: Callable[..., object], *args: object) -> bool:
        """Run ``fn(*args)`` on the delivery worker, in order with the queued notifications.

        For adapters that build events from framework objects off the host's path. Inline when the
        manager is synchronous (or called on the worker). A full queue drops the job and counts it in
        :attr:`dropped` (returns ``False``); after :meth:`close` it is ignored. An exception ``fn``
        raises is logged once per job and type, and counted in :attr:`failures`.
        """
        if self._closed:
            log.warning("defer() after close(); %s ignored", getattr(fn, "__qualname__", fn))
            return False
        lane = self._lanes[DEFAULT_LANE]  # jobs ride with the default plugins' events
        if self.synchronous or lane.on_worker():
            self._run_item(DEFAULT_LANE, (_JOB, fn, args))
            return True
        return lane.submit(self._carry((_JOB, fn, args)))

    def at_batch_end(self, owner: str, fn: Callable[[], None]) -> bool:
        """Run ``fn()`` on the default lane's worker after each batch, before it counts as delivered.

        For plugins that buffer writes while :meth:`batching` (one store transaction per batch, not
        per event): ``flush()``, ``emit_feedback(wait=True)`` and ``close()`` return after it ran. An
        exception it raises is logged once and counted in :attr:`failures` under ``owner``.
        :return: ``False`` for a synchronous manager, which has no batches (write at once).
        """
        if self.synchronous:
            return False
        self._batch_end.append((owner, fn))
        return True

    def batching(self) -> bool:
        """Whether the caller runs inside a delivery batch, so :meth:`at_batch_end` callbacks run after it."""
        return not self.synchronous and self._lanes[DEFAULT_LANE].on_worker()

    def _group_writes(self) -> contextlib.AbstractContextManager[Any]:
        """The default lane's batch writes to the store, committed together (a store with group
        commits: :meth:`GuardedStore.group <triage_plugins.store.guard.GuardedStore.group>`)."""
        guard = self._guard()
        return contextlib.nullcontext() if guard is None else guard.group()

    def _end_batch(self, lane: str) -> None:
        if lane != DEFAULT_LANE:
            return
        for owner, fn in self._batch_end:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - a plugin's buffered write never stops the worker
                self._on_plugin_error(owner, "<batch end>", exc)

    def _run_item(self, lane: str, item: tuple) -> None:
        if item[0] is _IN_CONTEXT:
            item[1].run(self._run_item, lane, item[2])
            return
        if item[0] is _JOB:
            _, fn, args = item
            try:
                fn(*args)
            except Exception as exc:  # noqa: BLE001 - deferred adapter work never reaches the host
                self._on_plugin_error("<deferred>", getattr(fn, "__qualname__", repr(fn)), exc)
            return
        hook_name, event = item
        caller = self._caller(lane, hook_name)
        if caller is not None:
            self._deliver(caller, hook_name, event)
        if lane != DEFAULT_LANE:
            return
        # Every event passes the default lane first (so it keeps its order with deferred jobs), then
        # is handed on: a slow plugin outside the defaults holds up only its own lane.
        others = self._caller(OTHER_LANE, hook_name)
        if others is None:
            return
        if self.synchronous:
            self._deliver(others, hook_name, event)
        else:
            self._lanes[OTHER_LANE].submit(self._carry(item), event_weight(event))

    def _carry(self, item: tuple) -> tuple:
        """``item``, wrapped with a copy of the caller's contextvars when :attr:`carry_context` is on.

        A callable :attr:`carry_context` is first run inside that copy, on the caller's thread, to pin
        what may change before the worker delivers (see ``triage.otel``'s ``pin_current_span``).
        """
        carry = self.carry_context
        if not carry:
            return item
        copied = contextvars.copy_context()
        if callable(carry):
            copied.run(carry)
        return (_IN_CONTEXT, copied, item)

    def _caller(self, lane: str, hook_name: str) -> Any:
        """The hook caller that reaches only ``lane``'s plugins, ``None`` when none implements the hook
        (cached until plugins change: asking a subset caller for its implementations builds a list)."""
        key = (lane, hook_name)
        caller = self._callers.get(key, _NO_CALLER)
        if caller is _NO_CALLER:
            changes = self._plugin_changes
            others = [p for n, p in self._pm.list_name_plugin() if p is not None and self._lane_of(n) != lane]
            caller = self._pm.subset_hook_caller(hook_name, remove_plugins=others)
            caller = caller if caller.get_hookimpls() else None
            self._callers[key] = caller
            if changes != self._plugin_changes:  # a plugin (un)registered meanwhile: look again next time
                self._callers.pop(key, None)  # (its bump comes before its clear: no stale entry survives)
        return caller

    def _plugins_changed(self) -> None:
        """Forget the lanes' hook callers after a plugin was registered or unregistered."""
        self._plugin_changes += 1
        self._callers.clear()

    def _lane_of(self, name: str) -> str:
        return DEFAULT_LANE if self._sources.get(name, ("",))[0] == "default" else OTHER_LANE

    @property
    def dropped(self) -> int:
        """Notifications dropped because a queue was full (the host is never blocked)."""
        return sum(d.dropped for d in self._lanes.values())

    @property
    def pending(self) -> int:
        """Notifications and deferred jobs queued and not yet delivered."""
        return sum(d.pending for d in self._lanes.values())

    def _deliver(self, caller: Any, hook_name: str, event: Event) -> None:
        try:
            caller(**{_ARGUMENT.get(hook_name, "event"): event})
        except Exception as exc:  # noqa: BLE001 - only hook wrappers can get here
            self._on_plugin_error("<wrapper>", hook_name, exc)
        if hook_name in _ARGUMENT:
            return  # a record is not an event: ``delivered`` counts the host's events
        with self._lock:
            self.delivered += 1

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued notification was delivered; ``False`` on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        done = True
        for dispatch in self._lanes.values():
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            done = dispatch.flush(remaining) and done
        return done

    def close(self, timeout: float | None = 30.0) -> int:
        """Deliver what is queued for up to ``timeout`` seconds in all, then stop delivery, end the run
        and close the store if the manager opened it (``None`` waits as long as delivery takes).

        The run records the events that never reached the store (``dropped`` with the default lane's
        queue full, ``undelivered`` when stopped), and its failed store writes (:attr:`write_failures`,
        with what other plugins missed under ``"plugins"``).
        :return: how many queued events were not delivered (to the store or to another plugin).
        """
        if self._closed:
            return self.pending
        deadline = None if timeout is None else time.monotonic() + timeout

        def remaining() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        # The default lane first: its deferred jobs may still emit into the other lane while it drains.
        self._lanes[DEFAULT_LANE].flush(remaining())
        left = {lane: self._lanes[lane].close(remaining()) for lane in (OTHER_LANE, DEFAULT_LANE)}
        self._closed = True
        self._end_run(left[DEFAULT_LANE], left[OTHER_LANE])
        if self._owns_store and self.store is not None:
            self.store.close()
        return left[DEFAULT_LANE] + left[OTHER_LANE]

    def _end_run(self, undelivered: int, plugins_undelivered: int) -> None:
        """Replay what the store missed (when it is back), then end the run with every count."""
        guard = self._guard()
        if guard is not None and guard.degraded:
            guard.replay()
        if self.store is None or self.run_id is None:
            return
        faults = self.write_failures
        others = self._lanes[OTHER_LANE].dropped, plugins_undelivered
        if any(others):
            faults["plugins"] = {"dropped": others[0], "undelivered": others[1]}
        try:
            self.store.end_run(
                self.run_id, dropped=self._lanes[DEFAULT_LANE].dropped, undelivered=undelivered, faults=faults
            )
        except Exception as exc:  # noqa: BLE001 - closing must not raise into the host
            log.warning("could not mark run %s as ended: %s", self.run_id, exc)

    def __enter__(self) -> TriageManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ learned state

    def learned_scores(self, unit: str, ids: Iterable[str] | None = None) -> dict[str, float]:
        """Learned raw contribution scores of ``ids`` (every scored id when ``None``).

        Asks ``triage_learned_scores`` (the feedback learner answers); with no plugin answering, the
        store's scores; with neither, ``{}``. Ids never scored are absent.
        """
        wanted = None if ids is None else tuple(ids)
        answer = self._ask("triage_learned_scores", unit=unit, ids=wanted)
        if answer is None and self.store is not None:
            answer = {i: row.raw for i, row in self.store.get_scores(unit, wanted).items()}
        return {k: float(v) for k, v in (answer or {}).items() if isinstance(k, str) and is_finite_real(v)}

    def seed_scores(self, unit: str, scores: Mapping[str, float]) -> int:
        """Seed scores a framework persisted (ids with no learned score yet); returns how many."""
        clean = {str(k): float(v) for k, v in scores.items() if is_finite_real(v)}
        if not clean:
            return 0
        seeded = self._ask("triage_seed_scores", unit=unit, scores=clean)
        if seeded is None and self.store is not None:
            known = self.store.get_scores(unit, list(clean))
            fresh = {k: v for k, v in clean.items() if k not in known}
            for key, value in fresh.items():
                self.store.set_score(unit, key, value)
            seeded = len(fresh)
        return int(seeded or 0)

    # ------------------------------------------------------------------ synchronous hooks

    def gate(self, event: RetrievalEvent) -> GateDecision:
        """Ask the gate plugins whether the reader should run; ``proceed`` when none decides."""
        if not isinstance(event, RetrievalEvent):
            raise EventError(
                "RetrievalEvent", "event", f"gate takes a RetrievalEvent, got {type(event).__name__}"
            )
        decision = self._ask("triage_gate", event=event)
        return GateDecision("proceed", "no gate plugin decided") if decision is None else decision

    def rerank(self, request: RerankRequest) -> list[float] | None:
        """Priorities for ``request.ids`` from the first plugin that answers, or ``None``."""
        if not isinstance(request, RerankRequest):
            raise EventError(
                "RerankRequest", "request", f"rerank takes a RerankRequest, got {type(request).__name__}"
            )
        return self._ask("triage_rerank", request=request)

    def _ask(self, hook_name: str, **kwargs: Any) -> Any:
        """Call a synchronous hook; its answer, or ``None`` when none (valid) came back.

        Gate and rerank answers were checked inside each plugin's isolation wrapper; a hook wrapper
        may still change the final one, so it is checked once more (``ANSWER_CHECKS``).
        """
        check = ANSWER_CHECKS.get(hook_name)
        try:
            answer = getattr(self._pm.hook, hook_name)(**kwargs)
            return answer if answer is None or check is None else check(answer, *kwargs.values())
        except Exception as exc:  # noqa: BLE001 - only hook wrappers and their answers can get here
            self._on_plugin_error("<wrapper>", hook_name, exc)
            return None


def _unknown_hooks_message(plugin: str, unknown: list[str], known: tuple[str, ...]) -> str:
    parts = []
    for hook in unknown:
        close = difflib.get_close_matches(hook, known, n=2)
        parts.append(f"{hook!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""))
    return (
        f"plugin {plugin!r} implements unknown hook(s) {', '.join(parts)}; the hooks are {', '.join(known)}"
    )


def _unknown_option_message(key: str, declared: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(key, list(declared), n=3)
    hint = (
        f"did you mean {' or '.join(map(repr, close))}?"
        if close
        else f"known options: {', '.join(sorted(declared))}"
    )
    return f"unknown option {key!r}: no plugin declares it; {hint}"


def _flush_at_exit(ref: weakref.ReferenceType[TriageManager]) -> None:
    """At interpreter exit: deliver for up to ``TRIAGE_EXIT_TIMEOUT`` seconds, then end the run with
    what was not delivered (a store the manager did not open is left open)."""
    manager = ref()
    if manager is None or manager._closed:
        return
    try:
        timeout = _env_float("TRIAGE_EXIT_TIMEOUT", EXIT_TIMEOUT)
    except ConfigError:
        timeout = EXIT_TIMEOUT
    try:
        left = manager.close(timeout)
    except Exception as exc:  # noqa: BLE001 - exiting must not raise
        log.warning("triage: could not end run %s at exit: %s", manager.run_id, exc)
        return
    if left:
        log.warning("triage: %d queued event(s) not delivered at exit (counted in the run)", left)


_sigterm_installed = False


def _exit_on_sigterm() -> None:
    """Make SIGTERM a normal exit (``SystemExit(143)``) so the queued events are flushed at exit.

    Only on the main thread and when SIGTERM still has its default action (which kills the process
    without running ``atexit``); a host that handles SIGTERM itself keeps its handler. SIGINT raises
    ``KeyboardInterrupt`` already, which exits through ``atexit`` too.
    """
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    _sigterm_installed = True
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # not supported here (an embedded interpreter, say)
        pass


def _on_sigterm(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills at once
    raise SystemExit(128 + signum)


_default: TriageManager | None = None
_default_lock = threading.Lock()


def default_manager() -> TriageManager:
    """A process-wide manager, created on first use (store from ``TRIAGE_STORE_URL`` / ``TRIAGE_STORE`` if set)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = TriageManager(store=store_from_env())
        return _default
