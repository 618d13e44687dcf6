"""Feedback from Phoenix back into learning: ``triage feedback pull`` (issue #17; EvoRAG §4.1 feedback).

Users rate answers where they already look at traces. :func:`pull_feedback` reads the span
annotations of a Phoenix project through ``phoenix-client`` (``arize-phoenix-client``), maps each one
to the query it rates, and delivers a :class:`~triage_plugins.contract.events.FeedbackEvent` per
annotation, so the feedback learner moves the contribution scores of what that query retrieved.

* **Which query.** Every span ``triage.otel`` makes carries ``triage.query_id`` and ``triage.framework``.
  An annotation on such a span rates that query; an annotation on another span of the same trace
  (the host framework's own ``query`` span, say) rates the one query of that trace. A trace holding
  several TRIAGE queries makes such an annotation ambiguous: it is skipped, with the reason.
* **Which score.** ``result.score`` in [0, 1] is the score; a score in (1, 5] is a 1–5 rating mapped
  to (r − 1)/4 (``FeedbackEvent.from_rating``); without a score, a label reads as 1 (``correct``,
  ``good``, ``positive``, ``thumbs_up``, ``yes``, ``relevant``, ``supported``) or 0 (``incorrect``,
  ``bad``, ``negative``, ``thumbs_down``, ``no``, ``irrelevant``, ``hallucinated``, ``unsupported``).
  Anything else is skipped with the reason. ``annotator_kind`` ``HUMAN`` gives source ``"human"``,
  ``LLM`` and ``CODE`` give ``"llm"``.
* **Once.** The ids of applied annotations are kept in the store (parameter
  ``phoenix.applied_annotations``), so pulling again applies only new annotations. An annotation
  edited in Phoenix after it was applied keeps its id and is not applied twice.
* **Learning in another process.** The learner needs the query's retrieval (and answer) it scores.
  When the process that pulls is not the one that answered, they are read back from the store the
  answering process recorded to (``TRIAGE_STORE``) and handed to the feedback learner before the
  feedback event; nothing is recorded twice.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, MutableSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from triage_plugins.contract.errors import ConfigError, TriageError
from triage_plugins.contract.events import FeedbackEvent

if TYPE_CHECKING:
    from triage_plugins.runtime.manager import TriageManager

__all__ = ["APPLIED_PARAM", "PullResult", "Pulled", "annotation_score", "pull_feedback", "pull_into_store"]

log = logging.getLogger("triage.apps.feedback_pull")

APPLIED_PARAM = "phoenix.applied_annotations"
POSITIVE = frozenset({"correct", "good", "positive", "thumbs_up", "yes", "relevant", "supported", "helpful"})
NEGATIVE = frozenset(
    {
        "incorrect",
        "bad",
        "negative",
        "thumbs_down",
        "no",
        "irrelevant",
        "hallucinated",
        "unsupported",
        "unhelpful",
    }
)


@dataclass(frozen=True, slots=True)
class Pulled:
    """One annotation turned into feedback."""

    annotation_id: str
    span_id: str
    name: str
    event: FeedbackEvent


@dataclass(slots=True)
class PullResult:
    """What one pull did: the feedback applied, the annotations skipped (with why), those seen before."""

    applied: list[Pulled] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    already: int = 0
    spans: int = 0


def annotation_score(result: Mapping[str, Any] | None) -> tuple[float | None, str | int | float | None, str]:
    """(score in [0, 1] or ``None``, the raw value, why when ``None``) of a Phoenix annotation result."""
    result = result or {}
    score = result.get("score")
    if isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score):
        if 0.0 <= score <= 1.0:
            return float(score), score, ""
        if 1.0 < score <= 5.0:
            return (float(score) - 1.0) / 4.0, score, ""
        return None, score, f"score {score!r} is neither in [0, 1] nor a 1-5 rating"
    label = result.get("label")
    if isinstance(label, str):
        key = label.strip().lower().replace(" ", "_").replace("-", "_")
        if key in POSITIVE:
            return 1.0, label, ""
        if key in NEGATIVE:
            return 0.0, label, ""
        return None, label, f"label {label!r} has no score and is not a known positive or negative label"
    return None, None, "the annotation has neither a score nor a label"


def _client(endpoint: str | None, client: Any) -> Any:
    if client is not None:
        return client
    try:
        from phoenix.client import Client
    except ImportError as exc:
        raise ConfigError(
            "reading Phoenix annotations needs phoenix-client: pip install 'triage-plugins[phoenix]'"
        ) from exc
    return Client(base_url=endpoint) if endpoint else Client()


def _queries_of(spans: Iterable[Mapping[str, Any]]) -> tuple[dict[str, tuple[str, str]], dict[str, set]]:
    """(span id → (framework, query id) for TRIAGE spans, trace id → the (framework, query id) in it)."""
    by_span: dict[str, tuple[str, str]] = {}
    by_trace: dict[str, set[tuple[str, str]]] = {}
    for span in spans:
        attrs = span.get("attributes") or {}
        qid, fw = attrs.get("triage.query_id"), attrs.get("triage.framework")
        ctx = span.get("context") or {}
        if isinstance(qid, str) and isinstance(fw, str):
            by_span[ctx.get("span_id", "")] = (fw, qid)
            by_trace.setdefault(ctx.get("trace_id", ""), set()).add((fw, qid))
    return by_span, by_trace


def _read(client: Any, project: str, limit: int) -> tuple[list, list]:
    """(every span of the project's TRIAGE traces, their annotations) from the server."""
    try:
        spans = client.spans.get_spans(project_identifier=project, limit=limit)
        _, by_trace = _queries_of(spans)
        wanted = [s for s in spans if (s.get("context") or {}).get("trace_id") in by_trace]
        annotations = (
            client.spans.get_span_annotations(spans=wanted, project_identifier=project) if wanted else []
        )
    except TriageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the server's or the network's error, said plainly
        raise ConfigError(f"could not read spans of project {project!r} from Phoenix: {exc}") from exc
    return spans, annotations


def _applied_set(manager: TriageManager, applied: MutableSet[str] | None) -> MutableSet[str]:
    if applied is not None:
        return applied
    if manager.store is None:
        raise ConfigError("pulling feedback once needs a store (or pass applied=set())")
    return set(manager.store.get_param(APPLIED_PARAM, None) or [])


def _restore(manager: TriageManager, framework: str, query_id: str) -> bool:
    """Hand the query's recorded retrieval and answer to the feedback learner; ``False`` if none."""
    learner = manager.get_plugin("triage.feedback")
    store = manager.store
    if learner is None or store is None:
        return True  # nothing to restore into, or nothing to restore from: the event goes as it is
    retrievals = list(store.events("retrieval", framework=framework, query_id=query_id))
    if not retrievals:
        return False
    learner.triage_retrieval(retrievals[-1])
    for generation in store.events("generation", framework=framework, query_id=query_id):
        learner.triage_generation(generation)
    return True


def pull_feedback(
    manager: TriageManager,
    *,
    endpoint: str | None = None,
    project: str = "default",
    names: Iterable[str] | None = None,
    client: Any = None,
    applied: MutableSet[str] | None = None,
    limit: int = 100_000,
) -> PullResult:
    """Turn the Phoenix annotations of TRIAGE queries into feedback events on ``manager``.

    :param manager: where the feedback goes (its feedback learner learns; its store records).
    :param endpoint: the Phoenix server (default: ``PHOENIX_COLLECTOR_ENDPOINT`` or http://localhost:6006).
    :param project: the Phoenix project the spans were sent to (``default`` unless
        ``OTEL_RESOURCE_ATTRIBUTES`` named another with ``openinference.project.name``).
    :param names: only annotations with these names (default: every annotation).
    :param client: a ``phoenix.client.Client`` to use instead of one made from ``endpoint``.
    :param applied: the ids already applied (default: kept in ``manager.store``).
    :param limit: the most spans read.
    :raises ConfigError: phoenix-client is missing, the server cannot be read, or there is no store.
    """
    seen = _applied_set(manager, applied)
    spans, annotations = _read(_client(endpoint, client), project, limit)
    by_span, by_trace = _queries_of(spans)
    trace_of = {
        (s.get("context") or {}).get("span_id"): (s.get("context") or {}).get("trace_id") for s in spans
    }
    wanted = set(names) if names is not None else None
    result = PullResult(spans=len(spans))
    for note in sorted(annotations, key=lambda a: a.get("created_at") or ""):
        note_id, span_id, name = str(note.get("id")), note.get("span_id", ""), note.get("name", "")
        if wanted is not None and name not in wanted:
            continue
        if note_id in seen:
            result.already += 1
            continue
        target = by_span.get(span_id)
        if target is None:
            queries = by_trace.get(trace_of.get(span_id, ""), set())
            if len(queries) != 1:
                result.skipped.append((note_id, f"span {span_id} rates {len(queries)} TRIAGE queries"))
                continue
            target = next(iter(queries))
        score, raw, why = annotation_score(note.get("result"))
        if score is None:
            result.skipped.append((note_id, why))
            continue
        framework, query_id = target
        if not _restore(manager, framework, query_id):
            result.skipped.append((note_id, f"query {query_id} has no recorded retrieval in the store"))
            continue
        source = "human" if note.get("annotator_kind") == "HUMAN" else "llm"
        event = FeedbackEvent(framework, query_id, score, source, raw)  # type: ignore[arg-type]
        manager.emit_feedback(event)
        seen.add(note_id)
        result.applied.append(Pulled(note_id, span_id, name, event))
    manager.flush()
    if applied is None and manager.store is not None:
        manager.store.set_param(APPLIED_PARAM, sorted(seen))
    return result


def pull_into_store(
    store: str,
    *,
    endpoint: str | None = None,
    project: str = "default",
    unit: str = "triple",
    names: Iterable[str] | None = None,
) -> tuple[PullResult, dict[str, tuple[float | None, float]]]:
    """:func:`pull_feedback` into the learned scores of ``store`` (what ``triage feedback pull`` runs).

    :return: the pull's result and, per unit id the applied feedback touched, its raw contribution
        score (before, after); ``None`` before means it had no score yet (it starts at 100).
    """
    from triage_plugins.contract.config import TriageConfig
    from triage_plugins.runtime.manager import TriageManager

    if unit not in ("triple", "chunk"):
        raise ConfigError(f"unit must be 'triple' or 'chunk', got {unit!r}")
    with TriageManager(store=store, config=TriageConfig(unit=unit), entry_points=False) as manager:
        before = manager.learned_scores(unit)
        result = pull_feedback(manager, endpoint=endpoint, project=project, names=names)
        after = manager.learned_scores(unit)
    changed = {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}
    return result, changed
