"""The engine-factory hook: GraphRAG's own search functions, observed and reweighted (issue #16).

``graphrag.api.local_search`` / ``global_search`` / ``drift_search`` / ``basic_search`` (and their
``*_streaming`` forms) build their engine with a factory of ``graphrag.query.factory``, looked up in
``graphrag.api.query``'s namespace. While any :class:`~triage_graphrag.instrument.GraphRAGInstrumentor`
is instrumented, those four names are wrapped: the wrapper calls GraphRAG's factory unchanged, then
offers the built engine to each callback that has a ``triage_engine_built(kind, engine)`` method —
the triage ``QueryCallbacks`` (:meth:`GraphRAGInstrumentor.query_callbacks`). Searches without a
triage callback are untouched, and so is every search while reweighting is off (the callback only
learns the kind of search it observes). The wrappers are reference-counted: the last
``uninstrument()`` restores GraphRAG's factories (unless something else replaced them since).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["FACTORIES", "acquire", "installed", "users"]

log = logging.getLogger("triage.graphrag.hooks")

#: factory name in ``graphrag.api.query`` -> the kind of search it builds
FACTORIES = {
    "get_local_search_engine": "local",
    "get_global_search_engine": "global",
    "get_drift_search_engine": "drift",
    "get_basic_search_engine": "basic",
}

_lock = threading.Lock()
_users = 0
_wrapped: dict[str, tuple[Any, Any]] = {}  # name -> (GraphRAG's factory, our wrapper)


def _wrap(kind: str, factory: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(factory)
    def build(*args: Any, **kwargs: Any) -> Any:
        engine = factory(*args, **kwargs)
        for callback in kwargs.get("callbacks") or ():
            built = getattr(callback, "triage_engine_built", None)
            if built is not None:
                built(kind, engine)  # never raises: the recorder guards its own work
        return engine

    build.triage_hook = True  # type: ignore[attr-defined]
    return build


def users() -> int:
    """How many acquisitions hold the wrappers now."""
    return _users


def installed() -> bool:
    """Whether the factory wrappers are in place."""
    return bool(_wrapped)


def acquire() -> Callable[[], None]:
    """Install the wrappers (first user) and return the release action (idempotent per acquisition)."""
    global _users
    import graphrag.api.query as module

    with _lock:
        if _users == 0:
            for name, kind in FACTORIES.items():
                original = getattr(module, name)
                wrapper = _wrap(kind, original)
                setattr(module, name, wrapper)
                _wrapped[name] = (original, wrapper)
        _users += 1
    released = False

    def release() -> None:
        global _users
        nonlocal released
        with _lock:
            if released:
                return
            released = True
            _users -= 1
            if _users > 0:
                return
            for name, (original, wrapper) in list(_wrapped.items()):
                if getattr(module, name) is wrapper:
                    setattr(module, name, original)
                else:
                    log.warning(
                        "graphrag.api.query.%s was replaced since triage wrapped it; left as it is", name
                    )
            _wrapped.clear()

    return release
