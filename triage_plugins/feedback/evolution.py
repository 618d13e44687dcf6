"""Relation-centric KG evolution: relation fusion and suppression (EvoRAG §5.1, Algorithm 1).

Run once per feedback iteration (a batch of queries), by the caller. Thresholds come from the
scored triples: μ and σ (population standard deviation) of S_c over the triples that have a stored
score — triples never updated sit at the initial 0.5 and would only shrink σ; τ_high = μ + σ,
τ_low = μ − σ. Fewer than two scored triples, or σ = 0, means no evolution this time.

**Relation fusion.** Breadth-first from every triple with S_c ≥ τ_high, following edges head →
tail (a triple chains to the triples whose subject is its object), neighbours visited in
descending S_c, up to ``max_hops`` triples per path. A shortcut (e_1, r̂, e_k) is proposed for a path
of ≥ 2 triples when the path qualifies, e_1 ≠ e_k, and no edge (either direction) nor earlier
shortcut joins e_1 and e_k. Where the sources differ on "qualifies", ``rule`` chooses:

- ``"average"`` (default): the path's average S_c ≥ τ_high — Algorithm 1, line 12, and the
  project's issue 5 (which takes precedence over DESIGN §4 where they differ);
- ``"all"``: every triple on the path has S_c ≥ τ_high — DESIGN §4 and §5.1's prose
  ("a path whose triplets satisfy S_c(t_i) > τ_high"); the average then exceeds τ_high too.

Either way the BFS stops a layer early when the best remaining neighbour fails (neighbours are
sorted, Algorithm 1 line 16). The shortcut's score is the path's average S_c, its label comes from a
pluggable labeller (the paper asks an LLM; the default joins the relation names with "/", e.g.
``spouse/place_of_birth``). Shortcuts are returned as new :class:`~triage_plugins.contract.events.Triple`
objects; the caller adds them to its graph and emits a graph event.

**Relation suppression.** A triple whose S_c is below τ_low in ≥ ``after`` consecutive evolutions
(default 3) is suppressed: its retrieval priority P(t) is multiplied by ``factor`` (default 0.5),
which lowers the log-priority of every path through it by log(1/factor)/|L|. It is never deleted.
It recovers as soon as its S_c is back at or above the last τ_low (checked at ranking time, so
recovery does not wait for the next evolution), and its consecutive count resets at the next
evolution that finds it above τ_low.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import Triple
from triage_plugins.feedback.scores import ContributionScores

__all__ = [
    "EvolutionResult",
    "KGEvolution",
    "RelationSuppressor",
    "Shortcut",
    "fuse_relations",
    "join_relations",
    "score_thresholds",
]

log = logging.getLogger("triage.feedback.evolution")

Labeller = Callable[[Sequence[Triple]], str]
FusionRule = Literal["all", "average"]


def join_relations(path: Sequence[Triple]) -> str:
    """Default shortcut label: the relation names along the path joined with "/"."""
    return "/".join(t.predicate for t in path)


@dataclass(frozen=True, slots=True)
class Shortcut:
    """A fused relation: the new triple, its S_c (the path's average) and the path it abstracts."""

    triple: Triple
    score: float
    path: tuple[Triple, ...]


@dataclass(frozen=True, slots=True)
class EvolutionResult:
    """What one evolution found.

    :param mean: μ of S_c over scored triples (``None`` when there were too few).
    :param std: σ (population).
    :param n_scored: scored triples the statistics were taken over.
    :param shortcuts: new fused relations.
    :param suppressed: triples suppressed after this evolution.
    :param recovered: triples that were suppressed before and no longer are.
    :param note: why nothing was done, when nothing was.
    """

    mean: float | None
    std: float | None
    n_scored: int
    shortcuts: tuple[Shortcut, ...] = ()
    suppressed: frozenset[str] = frozenset()
    recovered: frozenset[str] = frozenset()
    note: str = ""


def score_thresholds(s_c: Iterable[float]) -> tuple[float, float] | None:
    """(μ, σ) of S_c, or ``None`` with fewer than two values or σ = 0."""
    values = np.fromiter(s_c, dtype=np.float64)
    if values.size < 2:
        return None
    mu, sigma = float(values.mean()), float(values.std())
    return None if sigma <= 0.0 else (mu, sigma)


def fuse_relations(
    triples: Iterable[Triple],
    s_c: Mapping[str, float],
    high: float,
    *,
    max_hops: int = 3,
    labeller: Labeller = join_relations,
    rule: FusionRule = "average",
    exclude_pairs: Iterable[tuple[str, str]] = (),
) -> list[Shortcut]:
    """Relation fusion (Algorithm 1, lines 3–17) over ``triples`` with scores ``s_c``.

    :param s_c: S_c per triple id; triples without a score do not take part.
    :param high: τ_high = μ + σ.
    :param exclude_pairs: endpoint pairs already joined by earlier shortcuts.
    """
    if rule not in ("all", "average"):
        raise ConfigError(f"fusion rule must be 'all' or 'average', got {rule!r}")
    if max_hops < 2:
        return []
    triples = list(triples)
    scored = [t for t in triples if t.id in s_c]
    joined: set[frozenset[str]] = {frozenset((t.subject, t.object)) for t in triples}
    joined.update(frozenset(p) for p in exclude_pairs)
    out_of: dict[str, list[Triple]] = defaultdict(list)
    for t in scored:
        out_of[t.subject].append(t)
    for edges in out_of.values():
        edges.sort(key=lambda t: -s_c[t.id])
    types: dict[str, str | None] = {}
    for t in scored:
        types.setdefault(t.subject, t.subject_type)
        types.setdefault(t.object, t.object_type)

    shortcuts: list[Shortcut] = []
    starts = sorted((t for t in scored if s_c[t.id] >= high), key=lambda t: -s_c[t.id])
    for start in starts:
        frontier: list[tuple[tuple[Triple, ...], float]] = [((start,), s_c[start.id])]
        for _hop in range(2, max_hops + 1):
            nxt: list[tuple[tuple[Triple, ...], float]] = []
            for path, total in frontier:
                visited = {path[0].subject, *(t.object for t in path)}
                for nbr in out_of.get(path[-1].object, ()):
                    if nbr.object in visited:
                        continue  # no cycles
                    score = s_c[nbr.id]
                    avg = (total + score) / (len(path) + 1)
                    ok = score >= high if rule == "all" else avg >= high
                    if not ok:
                        break  # neighbours are sorted: the rest fail too
                    new_path = (*path, nbr)
                    pair = frozenset((start.subject, nbr.object))
                    if pair not in joined:
                        joined.add(pair)
                        label = labeller(new_path)
                        triple = Triple.of(
                            start.subject,
                            label,
                            nbr.object,
                            subject_type=types.get(start.subject),
                            object_type=types.get(nbr.object),
                        )
                        shortcuts.append(Shortcut(triple, avg, new_path))
                    nxt.append((new_path, total + score))
            frontier = nxt
            if not frontier:
                break
    return shortcuts


class RelationSuppressor:
    """Relation suppression state (module docstring): consecutive-low counts and the factor on P.

    :param after: consecutive evolutions below τ_low before a triple is suppressed.
    :param factor: multiplier of P(t) for a suppressed triple, in (0, 1].
    """

    def __init__(self, *, after: int = 3, factor: float = 0.5) -> None:
        if isinstance(after, bool) or not isinstance(after, int) or after < 1:
            raise ConfigError(f"suppress_after must be a whole number >= 1, got {after!r}")
        if not (isinstance(factor, int | float) and 0.0 < factor <= 1.0):
            raise ConfigError(f"suppression factor must lie in (0, 1], got {factor!r}")
        self.after = after
        self.factor = float(factor)
        self.counts: dict[str, int] = {}
        self.low: float | None = None

    def observe(self, s_c: Mapping[str, float], low: float) -> tuple[frozenset[str], frozenset[str]]:
        """Count one evolution; returns (suppressed now, recovered since the last one)."""
        before = self.suppressed_ids()
        counts: dict[str, int] = {}
        for key, value in s_c.items():
            if value < low:
                counts[key] = self.counts.get(key, 0) + 1
        self.counts = counts
        self.low = low
        now = self.suppressed_ids()
        return now, frozenset(before - now)

    def suppressed_ids(self) -> frozenset[str]:
        """Triples whose consecutive-low count reached ``after``."""
        return frozenset(k for k, n in self.counts.items() if n >= self.after)

    def factors(self, ids: Sequence[str], s_c: np.ndarray) -> np.ndarray | None:
        """Multiplier of P(t) per id: ``factor`` for a suppressed id still below τ_low, else 1."""
        if self.low is None or not self.counts:
            return None
        counts, after, low = self.counts, self.after, self.low
        hit = np.fromiter((counts.get(i, 0) >= after for i in ids), dtype=bool, count=len(ids))
        if not hit.any():
            return None
        return np.where(hit & (s_c < low), self.factor, 1.0)

    def state(self) -> dict[str, object]:
        """A JSON-serializable snapshot (persisted by :class:`KGEvolution`)."""
        return {"low": self.low, "counts": dict(self.counts)}

    def restore(self, state: Mapping[str, object] | None) -> None:
        if not state:
            return
        low = state.get("low")
        self.low = float(low) if isinstance(low, int | float) and math.isfinite(low) else None
        counts = state.get("counts") or {}
        if isinstance(counts, Mapping):
            self.counts = {str(k): int(v) for k, v in counts.items() if isinstance(v, int) and v > 0}


class KGEvolution:
    """Algorithm 1 over the store-backed scores, with persisted suppression state.

    :param scores: contribution scores (triple level; chunk level gets suppression only — fusion
        needs relations).
    :param max_hops: H, the longest path fused (default 3).
    :param labeller: names a shortcut from its path (default :func:`join_relations`).
    :param rule: ``"all"`` or ``"average"`` (module docstring).
    :param suppress_after: consecutive low evolutions before suppression (default 3).
    :param suppression_factor: multiplier of P(t) while suppressed (default 0.5).
    :param width: k of the thresholds τ_high = μ + k·σ and τ_low = μ − k·σ (default 1, Algorithm 1).
    """

    def __init__(
        self,
        scores: ContributionScores,
        *,
        max_hops: int = 3,
        labeller: Labeller = join_relations,
        rule: FusionRule = "average",
        suppress_after: int = 3,
        suppression_factor: float = 0.5,
        width: float = 1.0,
    ) -> None:
        if rule not in ("all", "average"):
            raise ConfigError(f"fusion rule must be 'all' or 'average', got {rule!r}")
        if not (isinstance(width, int | float) and math.isfinite(width) and width > 0):
            raise ConfigError(f"threshold width must be a positive number of σ, got {width!r}")
        self.width = float(width)
        self.scores = scores
        self.max_hops = int(max_hops)
        self.labeller = labeller
        self.rule: FusionRule = rule
        self.suppressor = RelationSuppressor(after=suppress_after, factor=suppression_factor)
        self._state_param = f"evorag.{scores.unit}.suppression"
        self._pairs_param = f"evorag.{scores.unit}.shortcut_pairs"
        self.suppressor.restore(scores.get_param(self._state_param))
        pairs = scores.get_param(self._pairs_param) or []
        self.shortcut_pairs: set[tuple[str, str]] = {(str(a), str(b)) for a, b in pairs}

    def evolve(self, triples: Iterable[Triple] = ()) -> EvolutionResult:
        """One evolution over the graph ``triples`` (ignored for chunk scores)."""
        raw = self.scores.scored()
        triples = list(triples)
        if triples and self.scores.unit == "triple":
            in_graph = {t.id for t in triples}
            raw = {k: v for k, v in raw.items() if k in in_graph}
        raw = dict(sorted(raw.items()))  # μ and σ summed in one order, whatever order the store keeps
        s_c = dict(
            zip(raw, self.scores.normalize(np.fromiter(raw.values(), dtype=np.float64)).tolist(), strict=True)
        )
        stats = score_thresholds(s_c.values())
        if stats is None:
            return EvolutionResult(
                None, None, len(s_c), note="fewer than two scored units, or all scores equal"
            )
        mu, sigma = stats
        shortcuts: list[Shortcut] = []
        if self.scores.unit == "triple" and triples:
            shortcuts = fuse_relations(
                triples,
                s_c,
                mu + self.width * sigma,
                max_hops=self.max_hops,
                labeller=self.labeller,
                rule=self.rule,
                exclude_pairs=self.shortcut_pairs,
            )
            for sc in shortcuts:
                self.scores.set(sc.triple.id, sc.score * self.scores.scale)
                self.shortcut_pairs.add((sc.triple.subject, sc.triple.object))
            if shortcuts:
                self.scores.set_param(self._pairs_param, sorted(self.shortcut_pairs))
        suppressed, recovered = self.suppressor.observe(s_c, mu - self.width * sigma)
        self.scores.set_param(self._state_param, self.suppressor.state())
        log.info(
            "evolution: mu=%.3f sigma=%.3f over %d units; %d shortcut(s), %d suppressed, %d recovered",
            mu,
            sigma,
            len(s_c),
            len(shortcuts),
            len(suppressed),
            len(recovered),
        )
        return EvolutionResult(mu, sigma, len(s_c), tuple(shortcuts), suppressed, recovered)

    def factors(self, ids: Sequence[str], s_c: np.ndarray) -> np.ndarray | None:
        """Suppression multipliers of P(t) for ``ids`` (``None`` when none applies)."""
        return self.suppressor.factors(ids, s_c)

    @property
    def suppressing(self) -> bool:
        """Whether any relation is suppressed (else :meth:`factors` is ``None`` for every id)."""
        return self.suppressor.low is not None and bool(self.suppressor.counts)
