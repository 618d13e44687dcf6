"""EvoRAG contribution scores written into GraphRAG 3.3's own ranking knobs (EvoRAG §4.2, §6.12).

Reweighting is opt-in (``TriageConfig(reweight=True)``): every function here asks ``triage_rerank``
for the candidates' priorities (:func:`triage_plugins.adapter_kit.ordering.ask_priorities`), orders
them with :func:`~triage_plugins.adapter_kit.ordering.host_order`, and leaves GraphRAG untouched
when no plugin answers **or when the priorities rank the candidates as GraphRAG already does**
(:func:`keeps_ranking`): before any feedback the learner's P is a monotone function of GraphRAG's own
relevance, so what the LLM sees is byte-identical to plain GraphRAG until feedback changes an order.

The knobs are installed on the engine ``graphrag.api`` builds (:func:`prepare_engine`, called by
the engine-factory hook of :mod:`triage_graphrag.hooks` when a triage ``QueryCallbacks`` with
reweighting is among the search's callbacks), so ``graphrag.api.local_search`` / ``global_search``
/ ``drift_search`` run GraphRAG's own code with them; no GraphRAG step is re-implemented.

**Triplet level (local search, DRIFT's local steps).** Local search ranks a selected entity's
relationships by ``rank = int(combined_degree)`` (the ``weight`` column is display-only): in-network
relationships all enter the context in rank order, out-of-network ones are sorted by (links, rank)
and cut at ``top_k_relationships × |selected entities|``. The context builder
(:func:`mixed_context_class`) sends every relationship with S_r = rank / max rank and, for the
duration of one ``build_context``, gives the relationships the integer rank
``level(P) · (max_rank + 1) + rank`` (:func:`reweight_relationships` does the same on a
``relationships`` frame's ``combined_degree``), where level(P) ∈ [0, 10⁶] is P
min-max scaled and rounded: P decides, and where P ties (to 10⁻⁶) GraphRAG's own degree order
stands, so equal scores reproduce GraphRAG's ranking exactly. The whole frame is sent because the
selected entities are only known inside the search; GraphRAG itself converts the whole frame on
every query (``read_indexer_relationships``), so the cost is of the same order.

**Chunk level (local search).** :func:`mixed_context_class` returns a ``LocalSearchMixedContext``
subclass whose ``_build_text_unit_context`` collects the same candidate text units (those of the
selected entities), sends them in GraphRAG's order (entity order, then relationship count) with
S_r = 1 − i/n, and orders them by P (ties keep GraphRAG's order) before the token budget cuts.
It is installed on the engine built by GraphRAG's public factory (no GraphRAG file is edited).

**Global search.** :func:`reweight_reports` sets each community report's occurrence weight — the
first key GraphRAG sorts a batch of reports by — to the mean P of the report's relationships
(S_r = the report's own normalized occurrence weight), or of its text units when the plugin scores
chunks; ``top_k`` keeps only the best reports. With equal scores the order is GraphRAG's.

What scores cannot do: they only reorder (or drop) candidates GraphRAG already selected — the
entities local search picks by embedding similarity, the relationships and text units attached to
them, the reports at the chosen community level. A triple of an entity that was not selected is
never brought in; in-network relationships are never cut by the ``top_k_relationships`` budget
(only by the token budget); global search shuffles reports across batches with a fixed seed before
sorting inside each batch, so with several batches P orders reports within a batch only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from triage_graphrag.translate import FRAMEWORK, GraphTables
from triage_plugins.adapter_kit.ordering import ask_priorities, host_order

if TYPE_CHECKING:
    import pandas as pd

    from triage_plugins import TriageManager

__all__ = [
    "LEVELS",
    "keeps_ranking",
    "mixed_context_class",
    "prepare_engine",
    "priority_ranks",
    "reweight_relationships",
    "reweight_reports",
]

log = logging.getLogger("triage.graphrag.reweight")

LEVELS = 1_000_000


def priority_ranks(priorities: Sequence[float], degrees: Sequence[float]) -> list[int]:
    """Integer ranks ordering by P first and by the original degree where P ties (see module docstring)."""
    p = [float(x) for x in priorities]
    deg = [max(0, int(d)) for d in degrees]
    low, high = min(p, default=0.0), max(p, default=0.0)
    spread = high - low
    base = max(deg, default=0) + 1
    levels = [round((x - low) / spread * LEVELS) if spread > 0 else 0 for x in p]
    return [level * base + d for level, d in zip(levels, deg, strict=True)]


def keeps_ranking(priorities: Sequence[float], keys: Sequence[float]) -> bool:
    """Whether ``priorities`` rank the candidates as GraphRAG's own ``keys`` do (higher first).

    True when a higher key never has a lower priority and equal keys have equal priorities: any
    sort by the rewritten knob then equals GraphRAG's sort, so the knob is left untouched.
    """
    pairs = sorted(zip(keys, priorities, strict=True), key=lambda kp: kp[0])
    for (k1, p1), (k2, p2) in zip(pairs, pairs[1:], strict=False):
        if (k1 == k2 and p1 != p2) or (k1 < k2 and p1 > p2):
            return False
    return True


def _priorities(
    manager: TriageManager,
    query: str,
    unit: str,
    ids: Sequence[str],
    relevance: Sequence[float],
    query_id: str | None,
) -> list[float] | None:
    return ask_priorities(manager, FRAMEWORK, query, unit, ids, relevance, query_id)


def reweight_relationships(
    relationships: pd.DataFrame,
    tables: GraphTables,
    manager: TriageManager,
    query: str,
    query_id: str | None = None,
) -> pd.DataFrame | None:
    """A copy of ``relationships`` whose ``combined_degree`` follows P, or ``None`` when no plugin answers."""
    if tables.frame_id == id(relationships) and len(tables.row_ids) == len(relationships):
        ids: list[str | None] = list(tables.row_ids)  # the frame the tables were built from
        degrees = [0.0 if math.isnan(d) else d for d in tables.row_degrees]
    else:
        pairs = zip(relationships["source"].tolist(), relationships["target"].tolist(), strict=True)
        ids = [tables.by_pair.get((str(s), str(t))) for s, t in pairs]
        degrees = [
            0.0 if (d is None or math.isnan(float(d))) else float(d)
            for d in relationships["combined_degree"].tolist()
        ]
    if any(i is None for i in ids) or len(set(ids)) != len(ids):
        log.warning("relationships frame does not match the observed tables; not reweighted")
        return None
    top = max(degrees, default=0.0) or 1.0
    priorities = _priorities(manager, query, "triple", ids, [d / top for d in degrees], query_id)  # type: ignore[arg-type]
    if priorities is None or keeps_ranking(priorities, degrees):
        return None
    out = relationships.copy()
    out["combined_degree"] = priority_ranks(priorities, degrees)
    return out


def reweight_reports(
    reports: list[Any],
    tables: GraphTables,
    manager: TriageManager,
    query: str,
    *,
    weight_name: str = "occurrence weight",
    top_k: int | None = None,
) -> list[Any] | None:
    """Set each report's ``weight_name`` attribute to its mean P (in place); ``None`` when no plugin answers.

    Reports must already carry GraphRAG's occurrence weight in ``attributes[weight_name]`` (its
    S_r). Returns the reports to keep, best first (all of them unless ``top_k``).
    """
    values: list[float] = []
    answered = False
    weights = [float((r.attributes or {}).get(weight_name, 0.0) or 0.0) for r in reports]
    top = max(weights, default=0.0) or 1.0
    for report, weight in zip(reports, weights, strict=True):
        key = str(report.community_id)
        value = weight
        for unit, ids in (
            ("triple", tables.community_triples.get(key, ())),
            ("chunk", tables.community_units.get(key, ())),
        ):
            ids = tuple(dict.fromkeys(ids))
            p = _priorities(manager, query, unit, ids, [weight / top] * len(ids), None)
            if p is not None:
                value = math.fsum(p) / len(p)  # exact: the ids come in GraphRAG's uuid order, new each run
                answered = True
                break
        values.append(value)
    if not answered or keeps_ranking(values, weights):
        return None
    for value, report in zip(values, reports, strict=True):
        report.attributes = dict(report.attributes or {})
        report.attributes[weight_name] = value
    kept = [reports[i] for i in host_order(values)]
    return kept[:top_k] if top_k is not None else kept


# --------------------------------------------------------------------------- chunk level (local search)


def _candidate_units(builder: Any, selected_entities: list[Any]) -> list[Any]:
    """GraphRAG 3.3's candidate text units of the selected entities, in its order (verbatim)."""
    from copy import deepcopy

    from graphrag.query.context_builder.source_context import count_relationships

    text_unit_ids_set = set()
    unit_info_list = []
    relationship_values = list(builder.relationships.values())
    for index, entity in enumerate(selected_entities):
        entity_relationships = [
            rel for rel in relationship_values if rel.source == entity.title or rel.target == entity.title
        ]
        for text_id in entity.text_unit_ids or []:
            if text_id not in text_unit_ids_set and text_id in builder.text_units:
                selected_unit = deepcopy(builder.text_units[text_id])
                num_relationships = count_relationships(entity_relationships, selected_unit)
                text_unit_ids_set.add(text_id)
                unit_info_list.append((selected_unit, index, num_relationships))
    unit_info_list.sort(key=lambda x: (x[1], -x[2]))
    return [unit[0] for unit in unit_info_list]


def _in_p_order(builder: Any, units: list[Any]) -> list[Any]:
    """The text units ordered by P (S_r = 1 − i/(2n), GraphRAG's rank as a prior); ties keep its order."""
    n = len(units)
    if not n or builder.triage_manager is None:
        return units
    try:
        p = _priorities(
            builder.triage_manager, builder.triage_query, "chunk", [u.id for u in units],
            [1.0 - i / (2 * n) for i in range(n)], builder.triage_query_id,
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - reweighting never breaks the search
        log.warning("chunk reweighting skipped: %s", exc)
        return units
    return units if p is None else [units[i] for i in host_order(p)]


def _with_candidates(
    builder: Any, selected_entities: list[Any], context_data: dict, context_name: str
) -> None:
    """GraphRAG 3.3's ``return_candidate_context`` marking of the candidate units (verbatim)."""
    from graphrag.query.input.retrieval.text_units import get_candidate_text_units

    candidate = get_candidate_text_units(
        selected_entities=selected_entities, text_units=list(builder.text_units.values())
    )
    key = context_name.lower()
    if key not in context_data:
        candidate["in_context"] = False
        context_data[key] = candidate
    elif "id" in candidate.columns and "id" in context_data[key].columns:
        candidate["in_context"] = candidate["id"].isin(context_data[key]["id"])
        context_data[key] = candidate
    else:
        context_data[key]["in_context"] = True


_CONTEXT_CLASS: type | None = None


def mixed_context_class() -> type:
    """The ``LocalSearchMixedContext`` subclass ordering text units by P (built on first use)."""
    global _CONTEXT_CLASS
    if _CONTEXT_CLASS is not None:
        return _CONTEXT_CLASS
    import pandas as pd
    from graphrag.query.context_builder.source_context import build_text_unit_context
    from graphrag.query.structured_search.local_search.mixed_context import LocalSearchMixedContext

    class TriageMixedContext(LocalSearchMixedContext):
        """Local-search context whose text units follow the contribution priority P (chunk level)."""

        triage_manager: Any = None
        triage_query_id: str | None = None
        triage_query: str = ""
        triage_triples: bool = False

        @classmethod
        def from_builder(
            cls,
            builder: LocalSearchMixedContext,
            manager: Any,
            query_id: str | None,
            *,
            triples: bool = False,
        ) -> TriageMixedContext:
            """A copy of GraphRAG's context builder with this class's text-unit ordering (and, with
            ``triples``, relationship ranks following P)."""
            new = cls.__new__(cls)
            new.__dict__.update(builder.__dict__)
            new.triage_manager = manager
            new.triage_query_id = query_id
            new.triage_triples = triples
            return new

        def build_context(self, query: str, *args: Any, **kwargs: Any) -> Any:
            self.triage_query = query
            original = self.relationships
            if self.triage_triples and self.triage_manager is not None:
                try:
                    self.relationships = _reweighted_relationships(self) or original
                except Exception as exc:  # noqa: BLE001 - reweighting never breaks the search
                    log.warning("triplet reweighting skipped: %s", exc)
            try:
                return super().build_context(query, *args, **kwargs)
            finally:
                self.relationships = original

        def _build_text_unit_context(
            self,
            selected_entities: list[Any],
            max_context_tokens: int = 8000,
            return_candidate_context: bool = False,
            column_delimiter: str = "|",
            context_name: str = "Sources",
        ) -> tuple[str, dict[str, pd.DataFrame]]:
            # GraphRAG 3.3's candidate collection and order, verbatim; then the order follows P.
            if not selected_entities or not self.text_units:
                return ("", {context_name.lower(): pd.DataFrame()})
            selected_text_units = _in_p_order(self, _candidate_units(self, selected_entities))
            context_text, context_data = build_text_unit_context(
                text_units=selected_text_units,
                tokenizer=self.tokenizer,
                max_context_tokens=max_context_tokens,
                shuffle_data=False,
                context_name=context_name,
                column_delimiter=column_delimiter,
            )
            if return_candidate_context:
                _with_candidates(self, selected_entities, context_data, context_name)
            return (str(context_text), context_data)

    _CONTEXT_CLASS = TriageMixedContext
    return TriageMixedContext


# --------------------------------------------------------------------------- triplet level on the builder


def _reweighted_relationships(builder: Any) -> dict[str, Any] | None:
    """The builder's relationships with ranks following P, or ``None`` (no answer, or GraphRAG's order)."""
    from dataclasses import replace

    from triage_graphrag.translate import triple_id

    rels = list(builder.relationships.values())
    if not rels:
        return None
    ids = [triple_id(r.source, r.target) for r in rels]
    ranks = [float(r.rank or 0) for r in rels]
    top = max(ranks, default=0.0) or 1.0
    p = _priorities(
        builder.triage_manager, builder.triage_query, "triple", ids, [r / top for r in ranks],
        builder.triage_query_id,
    )  # fmt: skip
    if p is None or keeps_ranking(p, ranks):
        return None
    new = priority_ranks(p, ranks)
    return {key: replace(r, rank=n) for key, r, n in zip(builder.relationships, rels, new, strict=True)}


# --------------------------------------------------------------------------- engines built by graphrag.api


def _local_builder(builder: Any, manager: Any, query_id: str | None) -> Any:
    return mixed_context_class().from_builder(builder, manager, query_id, triples=True)


def prepare_engine(
    kind: str, engine: Any, manager: Any, query: str, query_id: str, tables: Any, top_k: Any
) -> None:
    """Install the reweighting knobs on a search engine GraphRAG's factory just built.

    ``kind`` is ``"local"``, ``"global"``, ``"drift"`` or ``"basic"`` (basic search is observed only:
    it ranks text units by embedding similarity alone, a knob this adapter does not rewrite).
    """
    if kind == "local":
        engine.context_builder = _local_builder(engine.context_builder, manager, query_id)
    elif kind == "drift":
        local = _local_builder(engine.context_builder.local_mixed_context, manager, query_id)
        engine.context_builder.local_mixed_context = local
        engine.local_search.context_builder = local
    elif kind == "global":
        _prepare_global(engine, manager, query, tables, top_k)


def _prepare_global(engine: Any, manager: Any, query: str, tables: Any, top_k: int | None) -> None:
    """Report weights from P (fixed community level only: dynamic selection is not reweighted)."""
    from graphrag.query.context_builder.community_context import _compute_community_weights

    builder = engine.context_builder
    if getattr(builder, "dynamic_community_selection", None) is not None or tables is None:
        return
    params = engine.context_builder_params
    weight_name = params.get("community_weight_name", "occurrence weight")
    reports = builder.community_reports
    if not reports or not params.get("include_community_weight", True) or not builder.entities:
        return
    attrs = reports[0].attributes
    if attrs is None or weight_name not in attrs:  # what build_community_context would compute, now
        _compute_community_weights(
            reports, builder.entities, weight_attribute=weight_name,
            normalize=params.get("normalize_community_weight", True),
        )  # fmt: skip
    kept = reweight_reports(reports, tables, manager, query, weight_name=weight_name, top_k=top_k)
    if kept is not None:
        builder.community_reports = kept
