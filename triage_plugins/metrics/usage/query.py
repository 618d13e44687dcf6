"""One query's shared view (:class:`QueryView`, whose methods are the built-in kernels) and
:func:`query_view`, which shares its retrieval-side parts between the views of one query
(:func:`~triage_plugins.metrics.per_query.usage_metrics` computes a registry's metrics over it)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from triage_plugins.contract.events import GenerationEvent, RetrievalEvent
from triage_plugins.metrics.result import MetricResult, na
from triage_plugins.metrics.usage.kernels import (
    _agr,
    _arf,
    _aur,
    _cc,
    _erc,
    _erp,
    _f1,
    _gpc,
    _hits1,
    _hops,
    _kni,
    _no_generation,
    _qgr,
    _rhd,
    _rpc,
    _rpp_rpr,
    _rrs,
)
from triage_plugins.metrics.usage.views import (
    _MISSING,
    Grounderlike,
    _answer_mentions,
    _Connectivity,
    _connectivity,
    _Mentions,
    _query_mentions,
    _Subgraph,
)

if TYPE_CHECKING:
    from triage_plugins.metrics.registry import MetricSpec


# --------------------------------------------------------------------------- the shared per-query view


class QueryView:
    """One query's events and what the built-in usage metrics share, each computed once on first use.

    :attr:`q` is the coalesced query mention set M_q, :attr:`sub` the index of K_S and V_S, :attr:`conn`
    the connectivity of the grounded query nodes in K_S, :attr:`a` the answer mention set M_a (``None``
    without a generation). Its metric methods (``view.erc()`` ...) are the built-in kernels that
    :class:`~triage_plugins.metrics.registry.MetricSpec` points to; :meth:`compute` evaluates any spec.
    """

    __slots__ = (
        "retrieval",
        "generation",
        "closed_book",
        "grounder",
        "_q",
        "_sub",
        "_conn",
        "_a",
        "_agr",
        "_paths",
    )

    def __init__(
        self,
        retrieval: RetrievalEvent,
        generation: GenerationEvent | None = None,
        *,
        grounder: Grounderlike | None = None,
        closed_book: GenerationEvent | None = None,
    ) -> None:
        self.retrieval = retrieval
        self.generation = generation
        self.closed_book = closed_book
        self.grounder = grounder
        self._q: _Mentions | None = None
        self._sub: _Subgraph | None = None
        self._conn: _Connectivity | None = None
        self._a: Any = _MISSING
        self._agr: MetricResult | None = None
        self._paths: tuple[MetricResult, MetricResult] | None = None

    @property
    def q(self) -> _Mentions:
        if self._q is None:
            self._q = _query_mentions(self.retrieval, self.grounder)
        return self._q

    @property
    def sub(self) -> _Subgraph:
        if self._sub is None:
            self._sub = _Subgraph(self.retrieval)
        return self._sub

    @property
    def conn(self) -> _Connectivity:
        if self._conn is None:
            self._conn = _connectivity(self.q, self.sub)
        return self._conn

    @property
    def a(self) -> _Mentions | None:
        if self._a is _MISSING:
            gen = self.generation
            self._a = None if gen is None else _answer_mentions(gen, self.grounder)
        return self._a

    def compute(self, spec: MetricSpec) -> MetricResult:
        """``spec``'s value for this query: its kernel over this view, else its function (a plugin's
        metric); an exception or a non-:class:`MetricResult` from the function is N/A with the reason
        (``details["cause"] = "error"``), so one faulty metric never loses the others."""
        if spec.kernel is not None:
            return spec.kernel(self)
        name = spec.symbol
        try:
            result = spec.function(
                self.retrieval, self.generation, grounder=self.grounder, closed_book=self.closed_book
            )
        except Exception as exc:  # noqa: BLE001 - a plugin's metric must not break the others
            return na(name, f"{name} raised {type(exc).__name__}: {exc}", cause="error")
        if not isinstance(result, MetricResult):
            return na(name, f"{name} returned {type(result).__name__}, not a MetricResult", cause="error")
        return result if result.name == name else replace(result, name=name)

    # eq. 25–29 and 33 (retrieval time)

    def qgr(self) -> MetricResult:
        return _qgr(self.q)

    def erc(self) -> MetricResult:
        return _erc(self.q, self.sub)

    def erp(self) -> MetricResult:
        return _erp(self.q, self.sub)

    def rrs(self) -> MetricResult:
        return _rrs(self.q, self.sub, self.conn)

    def rpc(self) -> MetricResult:
        return _rpc(self.retrieval)

    def rhd(self) -> MetricResult:
        return _rhd(self.q, self.sub, self.conn)

    def hops(self) -> tuple[float | None, str]:
        return _hops(self.q, self.sub, self.conn)

    # eq. 30–32 and KNI (answer time)

    def agr(self) -> MetricResult:
        if self._agr is None:
            a = self.a
            self._agr = _no_generation("AGR") if a is None else _agr(a, self.sub)
        return self._agr

    def aur(self) -> MetricResult:
        a = self.a
        return _no_generation("AUR") if a is None else _aur(a, self.sub)

    def arf(self) -> MetricResult:
        a, gen = self.a, self.generation
        return _no_generation("ARF") if a is None or gen is None else _arf(a, self.sub, gen.answer)

    def kni(self) -> MetricResult:
        if self.generation is None:
            return _no_generation("KNI")
        return _kni(self.agr(), self.closed_book, self.sub, self.grounder)

    # eq. 34–35, CC, Hits@1, F1 (gold)

    def gpc(self) -> MetricResult:
        return _gpc(self.retrieval.gold, self.sub)

    def _path_pr(self) -> tuple[MetricResult, MetricResult]:
        if self._paths is None:
            self._paths = _rpp_rpr(self.retrieval.gold, self.sub)
        return self._paths

    def rpp(self) -> MetricResult:
        return self._path_pr()[0]

    def rpr(self) -> MetricResult:
        return self._path_pr()[1]

    def cc(self) -> MetricResult:
        return _cc(self.retrieval.gold, self.sub)

    def hits1(self) -> MetricResult:
        return _hits1(self.retrieval.gold, self.generation, self.a, self.grounder)

    def f1(self) -> MetricResult:
        if self.generation is None:
            return _f1(self.retrieval.gold, None, None, _NO_QUERY_MENTIONS)
        return _f1(self.retrieval.gold, self.generation, self.a, self.q, self.grounder)


_NO_QUERY_MENTIONS = _Mentions(0, frozenset(), 0, False)


# --------------------------------------------------------------------------- all at once

_last: tuple[Any, Any, QueryView] | None = None  # (retrieval, grounder, view) of the latest view


def query_view(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None,
    grounder: Grounderlike | None,
    closed_book: GenerationEvent | None,
) -> QueryView:
    """A view of the query, sharing the retrieval-side parts (M_q, the K_S index, connectivity) with
    the latest view when it was over the same retrieval event and grounder: the gate, the usage
    metrics at retrieval time and at answer time then ground and index each query once."""
    global _last
    view = QueryView(retrieval, generation, grounder=grounder, closed_book=closed_book)
    last = _last
    if last is not None and last[0] is retrieval and last[1] is grounder:
        shared = last[2]  # parts are computed idempotently: a race recomputes, never mixes queries
        view._q, view._sub, view._conn = shared._q, shared._sub, shared._conn
    _last = (retrieval, grounder, view)
    return view
