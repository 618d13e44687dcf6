"""Query ids: the string that joins a query's retrieval, generation and feedback events.

:func:`new_query_id` makes one that is unique across processes (a random per-process prefix and a
counter; a forked child, such as a gunicorn worker of a preloaded app, draws a new prefix). The id
of the query running now lives in one :class:`~contextvars.ContextVar`, set by
:meth:`Instrumentor.query() <triage_plugins.adapter_kit.instrumentor.Instrumentor.query>` (or
:func:`using_query_id`): each asyncio task and each thread started with a copied context keeps its
own, so concurrent queries keep theirs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

from triage_plugins.contract.errors import ConfigError

__all__ = ["current_query_id", "new_query_id", "using_query_id"]

_PROCESS = uuid.uuid4().hex[:10]  # random per process: ids stay unique across workers and restarts
_COUNTER = itertools.count(1)
_CURRENT: ContextVar[str | None] = ContextVar("triage_query_id", default=None)


def _new_process() -> None:
    """A forked child (a gunicorn worker of a preloaded app) draws its own process part."""
    global _PROCESS
    _PROCESS = uuid.uuid4().hex[:10]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process)


def new_query_id(framework: str = "triage") -> str:
    """A fresh id, ``"<framework>-<10 hex>-<n>"``."""
    return f"{framework}-{_PROCESS}-{next(_COUNTER)}"


def current_query_id() -> str | None:
    """The id set by the innermost enclosing :func:`using_query_id` block, if any."""
    return _CURRENT.get()


@contextlib.contextmanager
def using_query_id(query_id: str) -> Iterator[str]:
    """Make ``query_id`` the current query id inside the block (yields it)."""
    if not isinstance(query_id, str) or not query_id.strip():
        raise ConfigError(f"a query id must be a non-blank string, got {query_id!r}")
    token = _CURRENT.set(query_id)
    try:
        yield query_id
    finally:
        _CURRENT.reset(token)
