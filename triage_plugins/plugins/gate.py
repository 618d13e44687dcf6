"""The default pre-inference gate (TRIAGE §3 "Pre-inference triage", §4.5 first three chain links).

Before the reader runs, the gate reads QGR, ERC and RRS of the retrieval and answers
``triage_gate`` with a :class:`~triage_plugins.contract.events.GateDecision`:

* ``proceed`` — every evaluable head link holds (or the gate cannot evaluate the query: no mentions
  supplied and no graph seen to ground them; the reason says so).
* ``warn`` — out of scope: no query mention grounds to the KG (QGR < θ, or no entity mention at
  all). Re-retrieving cannot help, so the host should answer with a low-confidence warning or a
  fallback that does not rely on the graph.
* ``reroute`` — a retrieval gap (ERC < θ) or a connectivity gap (RRS < θ): retrieve again with
  ``suggestion`` applied, then run the reader:

  - ``{"widen_top_k": 2}`` for a retrieval gap: multiply the number of seed entities / top-k by 2
    (option ``gate.widen_top_k``);
  - ``{"expand_hops": 1}`` for a connectivity gap: traverse one more hop, or switch to a path-based
    primitive, so a connecting path can be found (option ``gate.expand_hops``).

  The host should reroute at most once per query and then proceed whatever the second decision.

**Observe-only by default** (DESIGN §2): option ``gate.mode`` is ``"warn"`` unless the user opts
into ``"reroute"``, so those gaps give ``warn`` (with the same suggestion): the decision is recorded
and never acted on, and the host's answers stay those of the plain framework. With
``gate.mode = "reroute"`` they give ``reroute``.

It respects ``manager.config.gate`` (off: returns ``None`` so the host proceeds) and
``manager.config.thresholds``. It is on the host's synchronous path. When the scorer already scored
this very retrieval event (a synchronous manager scores it inside ``emit_retrieval``), the gate reads
QGR, ERC and RRS from that :class:`~triage_plugins.contract.records.QueryRecord`, held by the scorer
(``manager.scorer.retrieval_record(event)``; the gate keeps no per-query state); otherwise (the
record is still queued) it computes only those three with sets and a BFS over K_S, grounding a query
without mentions with a :class:`~triage_plugins.kg.grounding.Grounder` prepared off the hot path.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from triage_plugins.contract.config import CHAIN_THRESHOLDS
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import GateDecision
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.metrics.per_query import chain_head_metrics

if TYPE_CHECKING:
    from triage_plugins.contract.context import PluginContext
    from triage_plugins.contract.events import GraphEvent, RetrievalEvent
    from triage_plugins.metrics.result import MetricResult

__all__ = ["DEFAULT_GATE_MODE", "GATE_MODES", "DefaultGate"]

log = logging.getLogger("triage.plugins.gate")


#: What ``gate.mode`` may be: record the decision only, or ask the host to retrieve again.
GATE_MODES: tuple[str, ...] = ("warn", "reroute")
#: ``gate.mode`` when none is chosen: observe only (the host acts on nothing).
DEFAULT_GATE_MODE = "warn"
#: The head links the gate reads.
HEADS: tuple[str, ...] = ("QGR", "ERC", "RRS")


class DefaultGate:
    """Default ``triage_gate`` implementation: proceed, warn or reroute on the chain's head links.

    :param manager: the :class:`~triage_plugins.runtime.manager.TriageManager` (reads ``.config``).
    """

    #: Options this plugin reads (``TriageConfig.options``), with their defaults.
    triage_options: ClassVar[Mapping[str, Any]] = {
        "gate.mode": DEFAULT_GATE_MODE,
        "gate.widen_top_k": 2,
        "gate.expand_hops": 1,
    }

    def __init__(self, manager: PluginContext) -> None:
        self._manager = manager
        self._grounder: Any = None
        _check_options(getattr(getattr(manager, "config", None), "options", None) or {})

    @hookimpl
    def triage_graph(self, event: GraphEvent) -> None:
        """Prepare a grounder for the new graph (runs on the background worker, off the hot path)."""
        from triage_plugins.kg.grounding import shared_grounder

        self._grounder = shared_grounder(event.graph, dict(event.aliases))

    def _heads(self, event: RetrievalEvent) -> dict[str, MetricResult]:
        """QGR, ERC and RRS of ``event``: the scorer's record when it scored this very event (read
        through the manager's typed ``scorer`` accessor), else computed."""
        scorer = getattr(self._manager, "scorer", None)
        record = scorer.retrieval_record(event) if scorer is not None else None
        if record is not None and all(h in record.metrics for h in HEADS):
            return {h: record.metrics[h] for h in HEADS}
        return chain_head_metrics(event, grounder=self._grounder)

    @hookimpl
    def triage_gate(self, event: RetrievalEvent) -> GateDecision | None:
        config = self._manager.config
        if not config.gate:
            return None
        theta = {**CHAIN_THRESHOLDS, **config.thresholds}
        options = config.options
        heads = self._heads(event)
        shown = {name: result.value for name, result in heads.items()}
        qgr, erc, rrs = heads["QGR"], heads["ERC"], heads["RRS"]

        if qgr.value is None:
            if qgr.details.get("cause") == "unavailable":
                return GateDecision(
                    "proceed", "cannot evaluate: no query mentions and no graph to ground them", shown
                )
            return GateDecision(
                "warn", "out of scope: no entity mention in the query to ground in the KG", shown
            )
        if qgr.value < theta["QGR"]:
            return GateDecision("warn", _why("out of scope", qgr, theta["QGR"]), shown)

        mode = options.get("gate.mode", DEFAULT_GATE_MODE)
        action = "warn" if mode == "warn" else "reroute"
        if erc.value is not None and erc.value < theta["ERC"]:
            suggestion = {"widen_top_k": options.get("gate.widen_top_k", 2)}
            return GateDecision(action, _why("retrieval gap", erc, theta["ERC"]), shown, suggestion)
        if rrs.value is not None and rrs.value < theta["RRS"]:
            suggestion = {"expand_hops": options.get("gate.expand_hops", 1)}
            return GateDecision(action, _why("connectivity gap", rrs, theta["RRS"]), shown, suggestion)
        return GateDecision("proceed", "QGR, ERC and RRS hold", shown)


def _check_options(options: Mapping[str, Any]) -> None:
    mode = options.get("gate.mode", DEFAULT_GATE_MODE)
    if mode not in GATE_MODES:
        raise ConfigError(f"gate.mode must be one of {', '.join(map(repr, GATE_MODES))}, got {mode!r}")
    for key in ("gate.widen_top_k", "gate.expand_hops"):
        value = options.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100:
            raise ConfigError(f"{key} must be a whole number from 1 to 100, got {value!r}")


def _why(label: str, result: MetricResult, threshold: float) -> str:
    return f"{label}: {result.name} = {result.value:.2f} < θ = {threshold:.2f}"
