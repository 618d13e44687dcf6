"""One learner per scope: a store view whose scores, parameters and runs live under a namespace.

:class:`ScopedStore` sits in front of any :class:`~triage_plugins.store.Store` (SQLite, PostgreSQL,
another view): contribution scores and learned parameters are kept under ``"<namespace>:<key>"``,
and the runs it starts carry ``{"namespace": ...}`` in their config (:meth:`ScopedStore.runs` lists
only those). Events, metric rows and everything else go to the shared store unchanged: query ids
are unique across scopes, so one store still holds every query's trace.

Who scopes: a :class:`~triage_plugins.runtime.manager.TriageManager` whose
``TriageConfig.namespace`` is set puts its store behind a view (:func:`scoped`), so the default
plugins (the feedback learner first) read and write only their scope. An adapter whose framework
has scopes of its own (a workspace, say) sets the namespace of the manager it creates from them.

**The default scope is the unprefixed key**, so no migration is needed: without a namespace (or
with a framework's default scope ``""``) :func:`scoped` returns the store itself, and the scores and
parameters learned before scopes existed (all stored unprefixed) are read and stepped exactly as
before. A new scope starts empty (an adapter that persists scores in the framework's own storage
seeds it from there, as it would after a restart).

Keys are ``"<namespace>:<unit>"`` and ``"<namespace>:<parameter>"``, the format ``triage compare``
uses for its per-row namespaces (``"<framework>/<mode>@<run id>"``), so views nest (a view over a
view is ``"outer:inner:<key>"``) and compare can use this class unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from triage_plugins.contract.config import check_namespace
from triage_plugins.contract.errors import ConfigError

if TYPE_CHECKING:
    from triage_plugins.store.base import Store
    from triage_plugins.store.rows import RunRow, ScoreRow

__all__ = ["NAMESPACE_KEY", "SCORE_UNITS_PARAM", "ScopedStore", "check_namespace", "join_namespaces", "scoped", "unscoped"]

#: The run config key naming the scope a run belongs to.
NAMESPACE_KEY = "namespace"

#: The store parameter listing the namespaced score units a compare run wrote (read by ``triage report``).
SCORE_UNITS_PARAM = "compare.score_units"


def join_namespaces(*parts: str | None) -> str | None:
    """``"a:b"`` from the non-empty ``parts`` (a view of ``b`` over a view of ``a``); ``None`` if none."""
    kept = [p for p in parts if p]
    return ":".join(kept) if kept else None


def scoped(store: Store | None, namespace: str | None) -> Store | None:
    """``store`` seen through ``namespace``; the store itself for the default scope (or no store)."""
    namespace = check_namespace(namespace)
    if store is None or namespace is None:
        return store
    return ScopedStore(store, namespace)  # type: ignore[return-value]


def unscoped(store: Store | None) -> Store | None:
    """The shared store behind ``store`` (``store`` itself when it is not a view): for state that
    belongs to no scope, such as what is keyed by a globally unique query id."""
    return store.inner if isinstance(store, ScopedStore) else store


class ScopedStore:
    """A view of ``store`` whose contribution scores, parameters and runs live under ``namespace``.

    Anything not defined here (events, metrics, ``url``, ``close`` ...) is the shared store's.
    """

    def __init__(self, store: Store, namespace: str) -> None:
        checked = check_namespace(namespace)
        if checked is None:
            raise ConfigError(
                "a ScopedStore needs a non-empty namespace (the default scope is the store itself)"
            )
        if isinstance(store, ScopedStore):  # a view of a view: one view of the joined namespace
            store, checked = store.inner, f"{store.namespace}:{checked}"
        self._store: Store = store
        self.namespace = checked

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def __repr__(self) -> str:
        return f"ScopedStore({self._store!r}, {self.namespace!r})"

    @property
    def inner(self) -> Store:
        """The store this view is in front of."""
        return self._store

    def key(self, name: str) -> str:
        """The shared store's key of this scope's unit or parameter ``name``."""
        return f"{self.namespace}:{name}"

    def __enter__(self) -> ScopedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self._store.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[ScopedStore]:
        """The shared store's transaction; yields this view, so writes inside stay scoped."""
        with self._store.transaction():
            yield self

    # ---------------------------------------------------------------- contribution scores

    def add_score(self, unit: str, id: str, delta: float, *, init: float = 100.0) -> float:
        return self._store.add_score(self.key(unit), id, delta, init=init)

    def add_scores(self, unit: str, deltas: Mapping[str, float], *, init: float = 100.0) -> dict[str, float]:
        return self._store.add_scores(self.key(unit), deltas, init=init)

    def set_score(self, unit: str, id: str, raw: float) -> None:
        self._store.set_score(self.key(unit), id, raw)

    def get_scores(self, unit: str, ids: Iterable[str] | None = None) -> dict[str, ScoreRow]:
        return self._store.get_scores(self.key(unit), ids)

    def scores_changed_at(self, unit: str) -> float | None:
        return self._store.scores_changed_at(self.key(unit))

    # ---------------------------------------------------------------- learned parameters

    def get_param(self, name: str, default: Any = None) -> Any:
        return self._store.get_param(self.key(name), default)

    def set_param(self, name: str, value: Any) -> None:
        self._store.set_param(self.key(name), value)

    def add_param(
        self, name: str, delta: float, *, initial: float = 0.0, bounds: tuple[float, float] | None = None
    ) -> float:
        return self._store.add_param(self.key(name), delta, initial=initial, bounds=bounds)

    # ---------------------------------------------------------------- runs

    def start_run(self, kind: str, config: Mapping[str, Any] | None = None) -> str:
        """A run of the shared store whose config names this scope (``config["namespace"]``)."""
        return self._store.start_run(kind, {**(config or {}), NAMESPACE_KEY: self.namespace})

    def runs(self, kind: str | None = None) -> list[RunRow]:
        """This scope's runs (those started through a view of the same namespace), oldest first."""
        return [r for r in self._store.runs(kind) if r.config.get(NAMESPACE_KEY) == self.namespace]
