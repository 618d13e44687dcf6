"""The usage-stage diagnostic chain, its signatures, the remediation map and windowed update triggers.

TRIAGE §4.5 (Fig. 5): a correct graph-grounded answer needs, in sequence, QGR (the query entities
exist in the KG) → ERC (they are retrieved) → RRS (they are connected in K_S) → ARF (the answer states
their relation) → AGR (the answer's entities are in the retrieved evidence). Reading the metrics in
that order, the *first* link whose value falls below its threshold θ (strictly, ``value < θ``) names
the failure's signature:

========  =====================  ====================================
link      signature              meaning
========  =====================  ====================================
QGR < θ   ``out_of_scope``       entities not grounded in the KG
ERC < θ   ``retrieval_gap``      in the KG, not retrieved
RRS < θ   ``connectivity_gap``   retrieved, not connected
ARF < θ   ``relational_gap``     connected, relation not stated
AGR < θ   ``generation_gap``     answer not grounded in the evidence
(none)    ``supported``          structurally supported (not certified correct)
========  =====================  ====================================

How undefined (N/A) links are read — our reading of §4.3.1 and §4.5:

* QGR N/A because the query has no entity mention (|M_q| = 0, ``details["cause"] == "no_mentions"``, or a
  bare ``None``) means V_q^g is empty, which §4.3.1 reads as an out-of-scope query: ``out_of_scope``.
* Every other N/A link is *skipped*, neither passed nor failed: the chain reads on. That covers ARF when
  no retrieved triple joins two answer entities (no relational claim to check), AGR when the answer
  names no entity, the answer-side links before the reader has run, and any link whose inputs were not
  supplied (``cause == "unavailable"``). ERC and RRS are only N/A together with QGR.
* With no link failing the signature is ``supported``; :class:`Diagnosis` says which links were
  actually evaluated (``evaluated``), so "supported" on zero evaluated links is visible as
  ``Diagnosis.defined == False``.

The remediation map (:data:`REMEDIATION`) is data: for each signature the stage whose levers act on it
and the levers themselves (TRIAGE §4.3.5 "Remediation note (Usage)" and §4.5 "From a signature to
remediation"), plus the upstream checks that the paper names as candidate root causes.

Windowed triggers (§4.5 "Closing the loop"): a KG update must be justified by population behaviour,
so :class:`WindowTrigger` aggregates a per-query metric over the last W defined values (mean, a low
quantile, or the rate of queries failing θ) and fires an :class:`UpdateSignal` naming the diagnosed
stage when the aggregate crosses its threshold. It needs at least ``min_count`` ≥ 2 values, so a single
low query never fires.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from triage_plugins.contract.config import CHAIN_THRESHOLDS
from triage_plugins.contract.errors import ConfigError
from triage_plugins.metrics.registry import BUILTIN_METRICS
from triage_plugins.metrics.result import MetricResult

__all__ = [
    "CHAIN",
    "REMEDIATION",
    "SIGNATURES",
    "ChainLink",
    "ChainStep",
    "Diagnosis",
    "Remediation",
    "UpdateSignal",
    "WindowTrigger",
    "diagnose",
    "render_trace",
    "signature",
    "trace",
]

log = logging.getLogger("triage.diagnosis")

Stage = Literal["extraction", "graph", "retrieval", "generation"]
StepStatus = Literal["pass", "fail", "n/a", "not reached"]
MetricValue = MetricResult | float | int | None


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One condition of the chain: its metric, the signature when it fails, and what failing means."""

    metric: str
    signature: str
    meaning: str
    pre_generation: bool


CHAIN: tuple[ChainLink, ...] = tuple(
    ChainLink(spec.symbol, spec.link.signature, spec.link.meaning, spec.stage == "retrieval")  # type: ignore[union-attr]
    for spec in BUILTIN_METRICS.chain
)
"""The links in order (TRIAGE Fig. 5), read from the metric registry's chain specs; the first three
are computable before the reader runs."""

SIGNATURES: tuple[str, ...] = (*(link.signature for link in CHAIN), "supported")


@dataclass(frozen=True, slots=True)
class Remediation:
    """What to do about a signature: the stage whose levers act on it, and the levers.

    :param stage: ``"graph"``, ``"retrieval"`` or ``"generation"`` (``None`` for ``supported``).
    :param levers: the stage's levers for this signature, most direct first.
    :param upstream: checks on earlier stages that the paper names as candidate root causes.
    """

    signature: str
    title: str
    stage: Stage | None
    summary: str
    levers: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()


REMEDIATION: Mapping[str, Remediation] = {
    "out_of_scope": Remediation(
        "out_of_scope",
        "Out of scope / grounding failure",
        "graph",
        "The query's entities are not in the KG (low QGR): there is no KG answer to retrieve.",
        (
            "answer this query from a fallback (text retrieval) or say the KG does not cover it",
            "acquire documents covering the missing entities and extract them (document acquisition)",
            "extend the ontology / entity types to the query's domain",
            "improve query entity linking: aliases, fuzzy or embedding matching of mentions to nodes",
        ),
        (
            "CSR_link: were these entities extracted but left uncanonicalized?",
            "OC: does the schema cover the domain?",
        ),
    ),
    "retrieval_gap": Remediation(
        "retrieval_gap",
        "Retrieval gap",
        "retrieval",
        "The query's entities are in the KG but were not retrieved (high QGR, low ERC).",
        (
            "widen the seed set: more top-k seed entities",
            "raise the traversal budget: more hops or a wider beam",
            "seed from the linked query entities rather than similarity alone",
        ),
        ("DNR: isolated nodes are hard to reach", "SRR: redundant duplicates crowd the retrieval budget"),
    ),
    "connectivity_gap": Remediation(
        "connectivity_gap",
        "Connectivity gap",
        "retrieval",
        "The query's entities were retrieved but no path joins them in the subgraph (high ERC, low RRS).",
        (
            "use a primitive that recovers the connecting path: backward or path-based traversal",
            "expand one more hop between the retrieved anchors",
        ),
        (
            "entity resolution: a bridging entity split across unmerged aliases (e.g. Chris Nolan / "
            "Christopher Nolan) breaks the path; merge aliases (graph lever, TRIAGE Fig. 4)",
            "DNR: near-isolated alias nodes signal the same split",
        ),
    ),
    "relational_gap": Remediation(
        "relational_gap",
        "Relational gap",
        "generation",
        "The entities are connected but the answer does not state the retrieved relation (high RRS, low ARF).",
        (
            "verbalize relation labels and paths explicitly in the reader's context",
            "prompt the reader to state the relation it relies on and cite the triple",
            "constrain decoding to the retrieved triples",
        ),
        ("graph: opaque or inconsistent relation labels call for relation canonicalization",),
    ),
    "generation_gap": Remediation(
        "generation_gap",
        "Generation gap",
        "generation",
        "The answer names entities absent from the retrieved evidence despite adequate retrieval (low AGR).",
        (
            "prompt the generator to cite the retrieved evidence",
            "constrain decoding to retrieved entities",
            "abstain or warn when the answer leaves the evidence",
        ),
    ),
    "supported": Remediation(
        "supported",
        "Supported",
        None,
        "Every evaluated link holds: the answer is structurally supported (necessary, not sufficient).",
    ),
}
"""Signature -> :class:`Remediation` (TRIAGE §4.3.5 remediation note, §4.5 remediation map)."""

_METRIC_SIGNATURE = {link.metric: link.signature for link in CHAIN}


# --------------------------------------------------------------------------- reading the chain


@dataclass(frozen=True, slots=True)
class ChainStep:
    """One link as a query passed through it (for printing, like TRIAGE Fig. 4)."""

    metric: str
    value: float | None
    threshold: float
    status: StepStatus
    signature: str
    meaning: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The chain read for one query: its signature, the steps, and the remediation."""

    signature: str
    steps: tuple[ChainStep, ...]
    remediation: Remediation
    evaluated: tuple[str, ...] = field(default=())

    @property
    def defined(self) -> bool:
        """False when no link could be evaluated (the ``supported`` label then means nothing)."""
        return bool(self.evaluated)


def _value(item: MetricValue) -> tuple[float | None, str | None, str | None]:
    """(value, reason, cause) of a metric given as a result, a number or ``None``."""
    if isinstance(item, MetricResult):
        cause = item.details.get("cause")
        return item.value, item.reason, None if cause is None else str(cause)
    if item is None:
        return None, None, None
    value = float(item)
    if math.isnan(value):
        return None, None, None
    return value, None, None


def _thresholds(thresholds: Mapping[str, float] | None) -> dict[str, float]:
    merged = dict(CHAIN_THRESHOLDS)
    if thresholds:
        merged.update({k: float(v) for k, v in thresholds.items()})
    return merged


def diagnose(metrics: Mapping[str, MetricValue], thresholds: Mapping[str, float] | None = None) -> Diagnosis:
    """Read the chain QGR → ERC → RRS → ARF → AGR over one query's metrics (TRIAGE §4.5).

    :param metrics: symbol -> :class:`MetricResult`, number, or ``None``; missing symbols count as N/A.
    :param thresholds: θ per symbol; defaults to :data:`triage_plugins.contract.config.CHAIN_THRESHOLDS`.
    """
    theta = _thresholds(thresholds)
    steps: list[ChainStep] = []
    evaluated: list[str] = []
    found: str | None = None
    for link in CHAIN:
        limit = theta[link.metric]
        value, reason, cause = _value(metrics.get(link.metric))
        if found is not None:
            steps.append(
                ChainStep(link.metric, value, limit, "not reached", link.signature, link.meaning, reason)
            )
            continue
        if value is None:
            no_mentions = link.metric == "QGR" and cause != "unavailable"
            if no_mentions:
                evaluated.append(link.metric)
                found = link.signature
                why = reason or "no entity mention in the query: empty V_q^g (§4.3.1)"
                steps.append(ChainStep(link.metric, None, limit, "fail", link.signature, link.meaning, why))
            else:
                why = reason or f"{link.metric} not available"
                steps.append(ChainStep(link.metric, None, limit, "n/a", link.signature, link.meaning, why))
            continue
        evaluated.append(link.metric)
        if value < limit:
            found = link.signature
            steps.append(ChainStep(link.metric, value, limit, "fail", link.signature, link.meaning, reason))
        else:
            steps.append(ChainStep(link.metric, value, limit, "pass", link.signature, link.meaning, reason))
    name = found or "supported"
    return Diagnosis(name, tuple(steps), REMEDIATION[name], tuple(evaluated))


def signature(metrics: Mapping[str, MetricValue], thresholds: Mapping[str, float] | None = None) -> str:
    """The failure signature of one query: one of :data:`SIGNATURES` (see the module docstring)."""
    return diagnose(metrics, thresholds).signature


def trace(
    metrics: Mapping[str, MetricValue], thresholds: Mapping[str, float] | None = None
) -> list[ChainStep]:
    """The query's path through the chain, one :class:`ChainStep` per link, in order."""
    return list(diagnose(metrics, thresholds).steps)


def render_trace(steps: list[ChainStep] | Diagnosis) -> str:
    """Plain-text rendering of a trace, one line per link, then the verdict and the stage lever."""
    diagnosis = steps if isinstance(steps, Diagnosis) else None
    rows = list(diagnosis.steps if diagnosis else steps)
    lines = []
    for step in rows:
        shown = "N/A" if step.value is None else f"{step.value:.3f}"
        mark = {"pass": "ok  ", "fail": "FAIL", "n/a": "n/a ", "not reached": "  · "}[step.status]
        line = f"[{mark}] {step.metric:<4} {shown:>6}  (θ = {step.threshold:.2f})"
        if step.status == "fail":
            line += f"  -> {step.signature}: {step.meaning}"
        if step.reason and step.status in ("fail", "n/a"):
            line += f"  [{step.reason}]"
        lines.append(line)
    failed = next((s for s in rows if s.status == "fail"), None)
    verdict = failed.signature if failed else "supported"
    remedy = REMEDIATION[verdict]
    lines.append(f"signature: {verdict}" + (f" (stage: {remedy.stage})" if remedy.stage else ""))
    if remedy.levers:
        lines.append(f"lever: {remedy.levers[0]}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- windowed triggers


@dataclass(frozen=True, slots=True)
class UpdateSignal:
    """A KG-update trigger: the rolling aggregate of ``metric`` crossed its threshold (§4.5)."""

    metric: str
    statistic: str
    value: float
    threshold: float
    window: int
    n: int
    signature: str | None
    stage: str | None
    levers: tuple[str, ...]

    @property
    def message(self) -> str:
        where = f"update the {self.stage} stage" if self.stage else "investigate"
        return (
            f"{self.statistic} {self.metric} over the last {self.n} queries is {self.value:.3f} "
            f"(threshold {self.threshold:.3f}): {where}" + (f" ({self.signature})" if self.signature else "")
        )


_EXTRA_STAGE: dict[str, tuple[str, tuple[str, ...]]] = {
    "RPC": ("retrieval", ("prune redundant expansion", "use a sparser retrieval primitive")),
}


class WindowTrigger:
    """Rolling-window KG-update trigger for one per-query metric (TRIAGE §4.5, "Closing the loop").

    :param metric: the metric symbol (``"ERC"``, ``"RRS"`` ...).
    :param window: W, how many most recent *defined* values are aggregated (N/A values are skipped).
    :param statistic: ``"mean"``, ``"quantile"`` (the ``quantile``-th quantile) or ``"failing_rate"``
        (the share of values failing the per-query threshold ``query_threshold``).
    :param threshold: for ``mean``/``quantile`` the θ the aggregate must stay at or above (default: the
        chain threshold of ``metric``); for ``failing_rate`` the largest tolerated failing share
        (default 0.5).
    :param quantile: the low quantile read by ``statistic="quantile"``.
    :param query_threshold: per-query θ for ``failing_rate`` (default: the chain threshold).
    :param min_count: values needed before the trigger may fire (default ``window``; at least 2).
    :param bad: ``"low"`` when low values are bad (ratios), ``"high"`` when high ones are (RPC).
    :param stage: the stage named by the signal; default from the chain and :data:`REMEDIATION`.

    The trigger is edge-triggered: :meth:`update` returns an :class:`UpdateSignal` on the value that
    takes the aggregate across the threshold, then ``None`` until the aggregate has recovered.
    """

    def __init__(
        self,
        metric: str,
        window: int,
        statistic: Literal["mean", "quantile", "failing_rate"] = "mean",
        threshold: float | None = None,
        *,
        quantile: float = 0.1,
        query_threshold: float | None = None,
        min_count: int | None = None,
        bad: Literal["low", "high"] = "low",
        stage: str | None = None,
    ) -> None:
        if statistic not in ("mean", "quantile", "failing_rate"):
            raise ConfigError(f"statistic must be 'mean', 'quantile' or 'failing_rate', got {statistic!r}")
        if not isinstance(window, int) or window < 2:
            raise ConfigError(
                f"window must be an integer >= 2 (one query never triggers an update), got {window!r}"
            )
        if bad not in ("low", "high"):
            raise ConfigError(f"bad must be 'low' or 'high', got {bad!r}")
        if not 0.0 <= quantile <= 1.0:
            raise ConfigError(f"quantile must be in [0, 1], got {quantile!r}")
        chain_theta = CHAIN_THRESHOLDS.get(metric)
        if statistic == "failing_rate":
            self.query_threshold = query_threshold if query_threshold is not None else chain_theta
            if self.query_threshold is None:
                raise ConfigError(f"no per-query threshold known for {metric!r}: pass query_threshold")
            self.threshold = 0.5 if threshold is None else float(threshold)
        else:
            self.query_threshold = query_threshold
            if threshold is None and chain_theta is None:
                raise ConfigError(f"no default threshold for {metric!r}: pass threshold")
            self.threshold = float(chain_theta if threshold is None else threshold)
        self.min_count = window if min_count is None else int(min_count)
        if not 2 <= self.min_count <= window:
            raise ConfigError(f"min_count must be in [2, window], got {self.min_count!r}")
        self.metric = metric
        self.window = window
        self.statistic = statistic
        self.quantile = quantile
        self.bad = bad
        self.signature = _METRIC_SIGNATURE.get(metric)
        if self.signature is not None:
            remedy = REMEDIATION[self.signature]
            self.stage, self.levers = stage or remedy.stage, remedy.levers
        else:
            default_stage, levers = _EXTRA_STAGE.get(metric, (None, ()))
            self.stage, self.levers = stage or default_stage, levers
        self._values: deque[float] = deque(maxlen=window)
        self._firing = False

    @property
    def firing(self) -> bool:
        """Whether the aggregate is currently across the threshold."""
        return self._firing

    def _fails(self, value: float) -> bool:
        theta = float(self.query_threshold)  # type: ignore[arg-type]
        return value < theta if self.bad == "low" else value > theta

    def aggregate(self) -> float | None:
        """The current statistic over the window, or ``None`` before ``min_count`` values."""
        values = self._values
        if len(values) < self.min_count:
            return None
        if self.statistic == "mean":
            return math.fsum(values) / len(values)
        if self.statistic == "failing_rate":
            return sum(1 for v in values if self._fails(v)) / len(values)
        ordered = sorted(values)
        pos = self.quantile * (len(ordered) - 1)  # linear interpolation, as numpy's default
        lo = math.floor(pos)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    def _crossed(self, agg: float) -> bool:
        if self.statistic == "failing_rate":
            return agg > self.threshold
        return agg < self.threshold if self.bad == "low" else agg > self.threshold

    def update(self, value: MetricValue) -> UpdateSignal | None:
        """Feed one query's value (N/A is skipped); return a signal when the aggregate crosses."""
        number, _, _ = _value(value)
        if number is None:
            return None
        self._values.append(number)
        agg = self.aggregate()
        if agg is None:
            return None
        crossed = self._crossed(agg)
        if not crossed:
            self._firing = False
            return None
        if self._firing:
            return None
        self._firing = True
        signal = UpdateSignal(
            self.metric,
            self.statistic,
            agg,
            self.threshold,
            self.window,
            len(self._values),
            self.signature,
            self.stage,
            self.levers,
        )
        log.info("KG update trigger: %s", signal.message)
        return signal

    def reset(self) -> None:
        """Forget the window (for example after the update it triggered was applied)."""
        self._values.clear()
        self._firing = False
