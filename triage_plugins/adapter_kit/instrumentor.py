"""The one instrumentor shape every adapter has, after OpenInference's ``BaseInstrumentor``.

An adapter subclasses :class:`Instrumentor` (one ``XInstrumentor`` per framework, in the adapter's
``instrument.py``) and implements two things: :meth:`~Instrumentor.instrumentation_dependencies`
(the framework versions it was written against) and :meth:`~Instrumentor._instrument` (add its
wrappers or handlers, each with an undo action). The rest is here, the same for every framework::

    inst = XInstrumentor().instrument(host, store="triage.sqlite")
    with inst.query("q-17") as qid:         # the id every event of the block carries
        host.ask("Who directed Inception?")
    inst.feedback(qid, 1.0)                 # a score in [0, 1]
    inst.flush()                            # deliver what is queued (tests, scripts, the CLI)
    inst.uninstrument()                     # remove exactly what instrument() added

**Lifecycle.** :meth:`~Instrumentor.instrument` is idempotent: on an instrumented instrumentor it
adds nothing and returns the instrumentor. :meth:`~Instrumentor.uninstrument` runs the undo actions
in reverse (restoring every wrapped attribute, removing every added handler) and closes the
manager if it is owned (closing delivers what is queued); calling it twice is harmless. An instrumentor can be instrumented again
afterwards (the same host and manager arguments are reused when none are given).

**Manager policy.** ``instrument(manager=m)``: ``m`` is the caller's. It is used as it is — never
mutated (its ``config`` is not changed, no plugin is registered on it) and never closed. The
adapter's ``reweight`` / ``unit`` default to ``m.config``'s; an explicit value that differs from it
changes only the adapter's own ranking hooks (the feedback learner answers ``triage_rerank`` only
under ``m.config.reweight``, for ``m.config.unit``) and is logged. Without ``manager`` the
instrumentor creates an **owned** manager: over ``store`` (a path, URL or Store; default
``$TRIAGE_STORE_URL`` or ``$TRIAGE_STORE``, else none), with a copy of ``config`` (default ``TriageConfig()``) in which
``reweight`` / ``unit`` are set when given. Only owned managers are closed by ``uninstrument()``.

**Off the host's path.** Work that builds events is handed to the manager's one delivery worker
(:meth:`~Instrumentor._defer`, ``TriageManager.defer``), in order with the events already queued;
a synchronous manager runs it inline. Adapter-side errors are logged once per kind and counted in
:attr:`~Instrumentor.errors`; they never reach the host.

**Learned scores** reach an adapter only through ``manager.learned_scores(unit, ids)`` and
``manager.seed_scores(unit, scores)``, never by reading a plugin or the store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from triage_plugins.adapter_kit.ordering import ask_priorities
from triage_plugins.adapter_kit.query_ids import current_query_id, new_query_id, using_query_id
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import FeedbackEvent
from triage_plugins.store.base import store_from_env

if TYPE_CHECKING:
    from triage_plugins.contract.config import TriageConfig
    from triage_plugins.runtime.manager import TriageManager
    from triage_plugins.store import Store

__all__ = ["InstrumentOptions", "Instrumentor"]

log = logging.getLogger("triage.adapter_kit")

UNITS = ("triple", "chunk")
_UNSET: Any = object()
_checked: set[type] = set()


class InstrumentOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`Instrumentor.instrument` (for adapters' ``instrument()`` shortcuts)."""

    manager: TriageManager | None
    store: Store | str | os.PathLike[str] | None
    config: TriageConfig | None
    reweight: bool | None
    unit: str | None


class Instrumentor(ABC):
    """Base class of every adapter's instrumentor (see the module docstring).

    :ivar host: what :meth:`instrument` was given (a framework instance), or ``None``.
    :ivar reweight: whether the adapter rewrites its framework's ranking (EvoRAG write-back).
    :ivar unit: what the adapter ranks when reweighting: ``"triple"`` or ``"chunk"``.
    :ivar last_query_id: id of the last query this instrumentor saw.
    :ivar errors: adapter-side failures (logged once per kind, never raised into the host).
    """

    #: the ``framework`` field of every event this adapter emits
    framework: ClassVar[str] = ""

    def __init__(self) -> None:
        self.host: Any = None
        self.reweight = False
        self.unit = "triple"
        self.last_query_id: str | None = None
        self.errors = 0
        self._manager: TriageManager | None = None
        self._owns_manager = False
        self._instrumented = False
        self._args: dict[str, Any] | None = None
        self._undo: list[Callable[[], None]] = []
        self._originals: dict[tuple[int, str], Any] = {}
        self._passthrough: set[int] = set()  # our wrappers left under someone else's (LIFO)
        self._reported: set[tuple[str, str]] = set()

    # ------------------------------------------------------------------ what a subclass provides

    @abstractmethod
    def instrumentation_dependencies(self) -> Collection[str]:
        """The framework distributions and versions supported, as requirement strings."""

    @abstractmethod
    def _instrument(self, host: Any) -> None:
        """Add this adapter's wrappers or handlers to ``host``, each with an undo action."""

    def _uninstrument(self) -> None:
        """Undo what :meth:`_instrument` added, last first (extend to release more)."""
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception as exc:  # noqa: BLE001 - restore the rest regardless
                self._failed("uninstrument", exc)
        self._originals.clear()

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_instrumented(self) -> bool:
        return self._instrumented

    @property
    def manager(self) -> TriageManager:
        """The manager events go to (see the manager policy in the module docstring)."""
        if self._manager is None:
            raise ConfigError(f"{type(self).__name__} is not instrumented yet: call instrument() first")
        return self._manager

    @property
    def owns_manager(self) -> bool:
        """Whether :meth:`instrument` created the manager (and :meth:`uninstrument` closes it)."""
        return self._owns_manager

    def instrument(
        self,
        host: Any = None,
        *,
        manager: TriageManager | None = None,
        store: Store | str | os.PathLike[str] | None = None,
        config: TriageConfig | None = None,
        reweight: bool | None = None,
        unit: str | None = None,
    ) -> Any:
        """Instrument ``host`` (idempotent); returns this instrumentor.

        :param host: the framework object to instrument (``None`` where the framework has none).
        :param manager: the caller's manager: used as is, never mutated, never closed.
        :param store: without ``manager``: where the owned manager records (default ``$TRIAGE_STORE_URL``, else ``$TRIAGE_STORE``).
        :param config: without ``manager``: the owned manager's configuration (copied).
        :param reweight: rewrite the framework's ranking from the learned priorities
            (default: the manager's ``config.reweight``).
        :param unit: ``"triple"`` or ``"chunk"`` (default: the manager's ``config.unit``).
        :raises ConfigError: ``config`` with ``manager``; an unknown ``unit``; another host, or other
            settings, while instrumented (never silently ignored); a host this adapter cannot instrument.
        """
        args = {"manager": manager, "store": store, "config": config, "reweight": reweight, "unit": unit}
        if self._instrumented:
            if host is not None and host is not self.host:
                raise ConfigError(
                    f"{type(self).__name__} already instruments another object: uninstrument() it first"
                )
            changed = sorted(
                k for k, v in args.items()
                if v is not None and self._args is not None and self._args.get(k) is not v and self._args.get(k) != v
            )  # fmt: skip
            if changed:
                raise ConfigError(
                    f"already instrumented with other {', '.join(changed)}: uninstrument() first, "
                    "then instrument() with the new settings"
                )
            return self
        if self._args is not None and all(v is None for v in args.values()):
            args = self._args  # instrumented again: the same manager arguments
        if host is None:
            host = self.host
        if args["unit"] is not None and args["unit"] not in UNITS:
            raise ConfigError(f"unit must be 'triple' or 'chunk', got {args['unit']!r}")
        if args["manager"] is not None and args["config"] is not None:
            raise ConfigError(
                "config= configures a manager the instrumentor creates; pass it to your manager"
            )
        self._check_dependencies()
        self._use_manager(**args)
        self.host = host
        try:
            self._instrument(host)
        except BaseException:
            self._uninstrument()
            self._release_manager()
            raise
        self._args = args
        self._instrumented = True
        return self

    def uninstrument(self) -> None:
        """Remove exactly what :meth:`instrument` added; close an owned manager (idempotent).

        Events already queued stay queued: a manager passed in delivers them as usual, an owned one
        delivers them before it closes.
        """
        if not self._instrumented:
            return
        self._instrumented = False
        self._uninstrument()
        self._release_manager()

    def _use_manager(
        self,
        manager: TriageManager | None,
        store: Any,
        config: TriageConfig | None,
        reweight: bool | None,
        unit: str | None,
    ) -> None:
        if manager is not None:
            self._manager, self._owns_manager = manager, False
            mine = manager.config
            self.reweight = bool(mine.reweight) if reweight is None else bool(reweight)
            self.unit = mine.unit if unit is None else unit
            if (reweight is not None and bool(reweight) != bool(mine.reweight)) or (
                unit is not None and unit != mine.unit
            ):
                log.warning(
                    "%s: reweight=%s, unit=%s differ from the manager's config (reweight=%s, unit=%s), "
                    "which is left as it is: the feedback learner follows the manager's config",
                    type(self).__name__, self.reweight, self.unit, mine.reweight, mine.unit,
                )  # fmt: skip
            return
        from triage_plugins.contract.config import TriageConfig
        from triage_plugins.runtime.manager import TriageManager

        changes: dict[str, Any] = {}
        if reweight is not None:
            changes["reweight"] = bool(reweight)
        if unit is not None:
            changes["unit"] = unit
        owned_config = dataclasses.replace(config or TriageConfig(), **changes)
        if store is None:
            store = store_from_env()
        self._manager = TriageManager(store=store, config=owned_config)
        self._owns_manager = True
        self.reweight, self.unit = bool(owned_config.reweight), owned_config.unit

    def _release_manager(self) -> None:
        if self._owns_manager and self._manager is not None:
            self._manager.close()

    def _check_dependencies(self) -> None:
        """Warn (once per adapter) when an installed framework version is outside the supported range."""
        if type(self) in _checked:
            return
        _checked.add(type(self))
        for requirement in self.instrumentation_dependencies():
            problem = _unsatisfied(requirement)
            if problem:
                log.warning(
                    "%s supports %s, found %s: the framework surfaces it reads may have changed",
                    type(self).__name__, requirement, problem,
                )  # fmt: skip

    # ------------------------------------------------------------------ queries and feedback

    @contextlib.contextmanager
    def query(self, query_id: str | None = None) -> Iterator[str]:
        """Use ``query_id`` (or a fresh one) for the queries run inside the block; yields the id.

        ContextVar-based: each asyncio task keeps its own id, so concurrent queries keep theirs::

            with inst.query("q-17"):
                await rag.aquery(question)
            inst.feedback("q-17", 1.0)
        """
        with using_query_id(query_id if query_id is not None else new_query_id(self.framework)) as qid:
            yield qid

    @property
    def query_id(self) -> str | None:
        """The id of the query running now (inside :meth:`query`), else of the last one seen."""
        return current_query_id() or self.last_query_id

    def _next_query_id(self) -> str:
        """The id for a query that starts now: the current one, else a fresh one (remembered)."""
        qid = current_query_id() or new_query_id(self.framework)
        self.last_query_id = qid
        return qid

    @contextlib.contextmanager
    def _host_busy(self) -> Iterator[None]:
        """Tell the manager a host query is in flight (its workers then deliver between queries)."""
        busy = getattr(self._manager, "host_busy", None)
        if busy is None:
            yield
            return
        with busy():
            yield

    @contextlib.contextmanager
    def _query_scope(self) -> Iterator[str]:
        """Pin one id (the current one, else a fresh one) for everything inside the block."""
        qid = current_query_id()
        if qid is not None:
            self.last_query_id = qid
            yield qid
            return
        with using_query_id(self._next_query_id()) as fresh:
            yield fresh

    def feedback(
        self, query_id: str, score: float, source: str = "human", raw: str | int | float | None = None
    ) -> FeedbackEvent:
        """Send a score in [0, 1] for an answered query (``FeedbackEvent.from_rating`` maps 1–5).

        Queued behind the query's own events, so the learner always sees the retrieval first.
        """
        event = FeedbackEvent(self.framework, query_id, score, source, raw)  # type: ignore[arg-type]
        self._defer("feedback event", self._emit_feedback, event)
        return event

    def _emit_feedback(self, event: FeedbackEvent) -> None:
        """Deliver one feedback event (runs on the worker; extend to note what it concerns)."""
        self.manager.emit_feedback(event)

    def flush(self, timeout: float | None = None) -> bool:
        """Deliver everything queued so far; ``False`` on timeout."""
        return True if self._manager is None else self._manager.flush(timeout)

    # ------------------------------------------------------------------ helpers for subclasses

    def _priorities(
        self, query: str, unit: str, ids: Sequence[str], relevance: Sequence[Any], query_id: str | None
    ) -> list[float] | None:
        """One priority per candidate from ``triage_rerank`` (``None``: keep the host's order)."""
        return ask_priorities(self.manager, self.framework, query, unit, ids, relevance, query_id)

    def _defer(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` off the host's path, on the manager's worker (inline when synchronous)."""
        defer = getattr(self._manager, "defer", None)
        if defer is None:
            self._guard(what, fn, *args)
        else:
            defer(self._guard, what, fn, *args)

    def _guard(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, or ``None`` when it raises (logged once per kind, counted)."""
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - instrumentation never breaks the host
            self._failed(what, exc)
            return None

    def _failed(self, what: str, exc: BaseException) -> None:
        self.errors += 1
        key = (what, type(exc).__name__)
        if key not in self._reported:
            self._reported.add(key)
            log.warning(
                "%s: %s failed (%s: %s); the host is unaffected (further such errors are counted)",
                type(self).__name__, what, type(exc).__name__, exc, exc_info=exc,
            )  # fmt: skip

    def _on_uninstrument(self, undo: Callable[[], None]) -> None:
        """Register an undo action for something :meth:`_instrument` added."""
        self._undo.append(undo)

    def _wrap_attribute(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        """Replace ``owner.name`` by ``make(original)`` on the instance; undone on uninstrument, LIFO-safe.

        Ours is restored only while it is still the attribute: when another tool wrapped it after
        us, uninstrument leaves that wrapper (which holds ours) in place and turns ours into a
        pass-through to the original.
        """
        had = name in getattr(owner, "__dict__", {})
        original = getattr(owner, name)
        inner = make(original)
        key = id(inner)
        passthrough = self._passthrough

        if inspect.iscoroutinefunction(inner):

            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                if key in passthrough:
                    return await original(*args, **kwargs)
                return await inner(*args, **kwargs)

        else:

            def wrapper(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
                if key in passthrough:
                    return original(*args, **kwargs)
                return inner(*args, **kwargs)

        with contextlib.suppress(AttributeError, TypeError):
            functools.update_wrapper(wrapper, original if callable(original) else inner)
        setattr(owner, name, wrapper)
        self._originals[(id(owner), name)] = original

        def undo() -> None:
            if getattr(owner, "__dict__", {}).get(name) is not wrapper:
                passthrough.add(key)  # someone wrapped over us: keep their wrapper working
                log.info(
                    "%s: %s.%s was wrapped after us; ours stays as a pass-through",
                    type(self).__name__, type(owner).__name__, name,
                )  # fmt: skip
                return
            if had:
                setattr(owner, name, original)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)

        self._on_uninstrument(undo)

    def _wrap_item(self, mapping: MutableMapping[str, Any], key: str, value: Any) -> None:
        """Set ``mapping[key] = value``; uninstrument restores the old value (or removes the key)
        while the item is still ours (LIFO-safe, like :meth:`_wrap_attribute`)."""
        had, old = key in mapping, mapping.get(key)
        mapping[key] = value

        def undo() -> None:
            if mapping.get(key) is not value:
                return
            if had:
                mapping[key] = old
            else:
                mapping.pop(key, None)

        self._on_uninstrument(undo)

    def _original(self, owner: Any, name: str) -> Any:
        """``owner.name`` as it was before :meth:`_wrap_attribute` (the current one if not wrapped)."""
        original = self._originals.get((id(owner), name), _UNSET)
        return getattr(owner, name) if original is _UNSET else original


def _unsatisfied(requirement: str) -> str | None:
    """What is installed instead of ``requirement`` (``"not installed"``), or ``None`` when it is met."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # packaging is not a dependency: without it, nothing is checked
        return None
    from importlib import metadata

    req = Requirement(requirement)
    try:
        version = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        return "not installed"
    return None if req.specifier.contains(version, prereleases=True) else version
