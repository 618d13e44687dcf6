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
  ``phoenix.applied_annotations``), recorded before any of them is applied, so pulling again
  applies only new annotations and a pull that dies half-way never applies one twice. An annotation
  edited in Phoenix after it was applied keeps its id and is not applied twice.
* **Data, not instructions.** An annotation whose fields are not what Phoenix sends (an id that is
  not a short string, a score that is not a number...) is skipped with its reason and counted;
  :func:`printable` shows server text with control characters escaped. How much one source can
  move one query is the feedback learner's ``feedback.max_per_query`` (the same cap for every
  route feedback takes).
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

from triage_plugins.contract.errors import ConfigError, EventError, TriageError
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


#: The longest id, span id or annotation name read (longer ones make the annotation malformed).
MAX_FIELD = 256
#: Requests one pull may send (a server that pages forever is cut off with an error).
MAX_REQUESTS = 5_000
#: The cause the feedback learner counts feedback over ``feedback.max_per_query`` under.
CAPPED = "over the cap per query"


@dataclass(frozen=True, slots=True)
class Pulled:
    """One annotation turned into feedback."""

    annotation_id: str
    span_id: str
    name: str
    event: FeedbackEvent


@dataclass(slots=True)
class PullResult:
    """What one pull did: the feedback applied, the annotations skipped (with why), those seen before.

    ``malformed`` counts the skipped annotations whose fields were not what Phoenix sends; ``capped``
    the applied ones the learner refused as over ``feedback.max_per_query`` (they change nothing).
    """

    applied: list[Pulled] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    already: int = 0
    spans: int = 0
    malformed: int = 0
    capped: int = 0


class _Malformed(Exception):
    """An annotation whose fields are not what Phoenix sends: (the id as shown, why)."""


def printable(value: object, limit: int = 120) -> str:
    """``value`` safe to print on a terminal: every character that is not printable (control
    characters, escape sequences, bidi overrides, line breaks) as its escape, cut to ``limit``."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > 4 * limit:
        text = text[: 4 * limit]
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def annotation_score(result: Mapping[str, Any] | None) -> tuple[float | None, str | int | float | None, str]:
    """(score in [0, 1] or ``None``, the raw value, why when ``None``) of a Phoenix annotation result."""
    result = result or {}
    score = result.get("score")
    if isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score):
        if 0.0 <= score <= 1.0:
            return float(score), score, ""
        if 1.0 < score <= 5.0:
            return (float(score) - 1.0) / 4.0, score, ""
        return None, score, f"score {printable(score, 40)} is neither in [0, 1] nor a 1-5 rating"
    label = result.get("label")
    if isinstance(label, str):
        key = label.strip().lower().replace(" ", "_").replace("-", "_")
        if key in POSITIVE:
            return 1.0, label, ""
        if key in NEGATIVE:
            return 0.0, label, ""
        return None, label, f"label {printable(repr(label), 60)} is not a known positive or negative label"
    return None, None, "the annotation has neither a score nor a label"


def _short_str(note: Mapping[str, Any], key: str, shown: str) -> str:
    value = note.get(key)
    if not isinstance(value, str) or len(value) > MAX_FIELD:
        raise _Malformed(
            shown, f"{key} must be a string of at most {MAX_FIELD} characters, got {_kind(value)}"
        )
    return value


def _kind(value: object) -> str:
    """What a bad field held, briefly: its type, or for a string its length."""
    return f"a string of {len(value)} characters" if isinstance(value, str) else type(value).__name__


def _fields(note: object) -> tuple[str, str, str, Mapping[str, Any], str]:
    """(id, span id, name, result, annotator kind) of a Phoenix annotation.

    :raises _Malformed: a field is missing or not what Phoenix sends.
    """
    if not isinstance(note, Mapping):
        raise _Malformed("?", f"an annotation must be a JSON object, got {type(note).__name__}")
    raw_id = note.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not 0 < len(str(raw_id)) <= MAX_FIELD:
        raise _Malformed(
            "?", f"id must be a non-empty string of at most {MAX_FIELD} characters, got {_kind(raw_id)}"
        )
    note_id = str(raw_id)
    span_id = _short_str(note, "span_id", note_id)
    name = _short_str(note, "name", note_id)
    result = note.get("result")
    if result is not None and not isinstance(result, Mapping):
        raise _Malformed(note_id, f"result must be an object, got {type(result).__name__}")
    result = result or {}
    score, label = result.get("score"), result.get("label")
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, int | float) or not _finite(score)
    ):
        raise _Malformed(note_id, f"result.score must be a finite number, got {printable(score, 40)}")
    if label is not None and not isinstance(label, str):
        raise _Malformed(note_id, f"result.label must be a string, got {type(label).__name__}")
    kind = note.get("annotator_kind")
    if kind is not None and not isinstance(kind, str):
        raise _Malformed(note_id, f"annotator_kind must be a string, got {type(kind).__name__}")
    return note_id, span_id, name, result, kind or ""


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond the float range
        return False


def _client(endpoint: str | None, client: Any) -> Any:
    if client is not None:
        return client
    try:
        from phoenix.client import Client
    except ImportError as exc:
        raise ConfigError(
            "reading Phoenix annotations needs phoenix-client: pip install 'triage-plugins[phoenix]'"
        ) from exc
    made = Client(base_url=endpoint) if endpoint else Client()
    _cap_requests(made)
    return made


def _cap_requests(client: Any) -> None:
    """Cut a pull off after :data:`MAX_REQUESTS` requests (phoenix-client follows ``next_cursor``
    for as long as the server sends one)."""
    hooks = getattr(getattr(client, "_client", None), "event_hooks", None)
    if not isinstance(hooks, dict):
        return
    sent = [0]

    def count(request: Any) -> None:
        sent[0] += 1
        if sent[0] > MAX_REQUESTS:
            raise ConfigError(f"Phoenix kept paging past {MAX_REQUESTS} requests; stopped reading")

    hooks.setdefault("request", []).append(count)


def _span_ids(span: Mapping[str, Any]) -> tuple[Any, Any]:
    ctx = span.get("context")
    return (ctx.get("span_id"), ctx.get("trace_id")) if isinstance(ctx, Mapping) else (None, None)


def _queries_of(spans: Iterable[Mapping[str, Any]]) -> tuple[dict[str, tuple[str, str]], dict[str, set]]:
    """(span id → (framework, query id) for TRIAGE spans, trace id → the (framework, query id) in it)."""
    by_span: dict[str, tuple[str, str]] = {}
    by_trace: dict[str, set[tuple[str, str]]] = {}
    for span in spans:
        attrs = span.get("attributes")
        if not isinstance(attrs, Mapping):
            continue
        qid, fw = attrs.get("triage.query_id"), attrs.get("triage.framework")
        span_id, trace_id = _span_ids(span)
        if (
            isinstance(qid, str)
            and isinstance(fw, str)
            and isinstance(span_id, str)
            and isinstance(trace_id, str)
        ):
            by_span[span_id] = (fw, qid)
            by_trace.setdefault(trace_id, set()).add((fw, qid))
    return by_span, by_trace


def _read(client: Any, project: str, limit: int) -> tuple[list, list]:
    """(every span of the project's TRIAGE traces, their annotations) from the server."""
    try:
        spans = client.spans.get_spans(project_identifier=project, limit=limit)
        if not isinstance(spans, list):
            raise ConfigError(
                f"Phoenix answered the spans of {project!r} with {type(spans).__name__}, not a list"
            )
        spans = [s for s in spans if isinstance(s, Mapping)]
        _, by_trace = _queries_of(spans)
        wanted = [s for s in spans if _span_ids(s)[1] in by_trace]
        annotations = (
            client.spans.get_span_annotations(spans=wanted, project_identifier=project) if wanted else []
        )
        if not isinstance(annotations, list):
            raise ConfigError(
                f"Phoenix answered the annotations with {type(annotations).__name__}, not a list"
            )
    except TriageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the server's or the network's error, said plainly
        why = printable(f"{type(exc).__name__}: {exc}", 300)
        raise ConfigError(f"could not read spans of project {project!r} from Phoenix: {why}") from exc
    return spans, annotations


def _applied_set(manager: TriageManager, applied: MutableSet[str] | None) -> MutableSet[str]:
    if applied is not None:
        return applied
    if manager.store is None:
        raise ConfigError("pulling feedback once needs a store (or pass applied=set())")
    return set(_stored_applied(manager))


def _stored_applied(manager: TriageManager) -> list[str]:
    stored = manager.store.get_param(APPLIED_PARAM, None) if manager.store is not None else None
    return [i for i in stored if isinstance(i, str)] if isinstance(stored, list) else []


def _record(manager: TriageManager, applied: MutableSet[str] | None, ids: list[str]) -> None:
    """Remember ``ids`` as applied before any is applied: in ``applied`` or the store (merged with
    what another pull recorded since this one started), so a crash never applies one twice."""
    if applied is not None:
        applied.update(ids)
    elif manager.store is not None and ids:
        manager.store.set_param(APPLIED_PARAM, sorted({*_stored_applied(manager), *ids}))


def _restore(manager: TriageManager, framework: str, query_id: str) -> bool:
    """Hand the query's recorded retrieval and answer to the feedback learner; ``False`` if none."""
    learner = manager.learner
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


@dataclass(slots=True)
class _Index:
    """Where annotations point: TRIAGE spans, the TRIAGE queries of each trace, each span's trace."""

    by_span: dict[str, tuple[str, str]]
    by_trace: dict[str, set[tuple[str, str]]]
    trace_of: dict[Any, Any]

    @classmethod
    def of(cls, spans: list[Mapping[str, Any]]) -> _Index:
        by_span, by_trace = _queries_of(spans)
        return cls(by_span, by_trace, dict(_span_ids(s) for s in spans))

    def target(self, span_id: str) -> tuple[str, str] | str:
        """The (framework, query id) an annotation on ``span_id`` rates, or why there is none."""
        found = self.by_span.get(span_id)
        if found is not None:
            return found
        queries = self.by_trace.get(self.trace_of.get(span_id), set())
        if len(queries) != 1:
            return f"span {printable(span_id, 40)} rates {len(queries)} TRIAGE queries"
        return next(iter(queries))


def _created(note: object) -> str:
    created = note.get("created_at") if isinstance(note, Mapping) else None
    return created if isinstance(created, str) else ""


def _feedback(manager: TriageManager, note: object, index: _Index) -> Pulled | str:
    """The feedback one annotation gives, or why it gives none; raises :class:`_Malformed`."""
    note_id, span_id, name, result, kind = _fields(note)
    target = index.target(span_id)
    if isinstance(target, str):
        return target
    score, raw, why = annotation_score(result)
    if score is None:
        return why
    framework, query_id = target
    source = "human" if kind == "HUMAN" else "llm"
    try:
        event = FeedbackEvent(framework, query_id, score, source, raw)  # type: ignore[arg-type]
    except EventError as exc:
        raise _Malformed(
            note_id, f"the span it rates carries a bad TRIAGE id: {printable(str(exc), 160)}"
        ) from None
    if not _restore(manager, framework, query_id):
        return f"query {printable(query_id, 60)} has no recorded retrieval in the store"
    return Pulled(note_id, span_id, name, event)


def _plan(
    manager: TriageManager,
    annotations: list,
    index: _Index,
    seen: MutableSet[str],
    wanted: set[str] | None,
    result: PullResult,
) -> list[Pulled]:
    """The feedback of the annotations not applied before; the rest counted in ``result``."""
    planned: list[Pulled] = []
    ids: set[str] = set()
    for note in sorted(annotations, key=_created):
        try:
            if wanted is not None and (not isinstance(note, Mapping) or note.get("name") not in wanted):
                continue
            note_id = _fields(note)[0]
            if note_id in seen or note_id in ids:
                result.already += 1
                continue
            pulled = _feedback(manager, note, index)
        except _Malformed as exc:
            shown, why = exc.args
            result.skipped.append((printable(shown, 60), why))
            result.malformed += 1
            continue
        if isinstance(pulled, str):
            result.skipped.append((printable(note_id, 60), pulled))
            continue
        ids.add(note_id)
        planned.append(pulled)
    return planned


def _capped(manager: TriageManager) -> int:
    learner = manager.learner
    counts = getattr(learner, "unattributed", None)
    return int(counts.get(CAPPED, 0)) if isinstance(counts, Mapping) else 0


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

    Annotation content is data: a malformed annotation is skipped with its reason and counted in
    :attr:`PullResult.malformed`, and every id is recorded as applied before any is applied.

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
    result = PullResult(spans=len(spans))
    planned = _plan(
        manager, annotations, _Index.of(spans), seen, set(names) if names is not None else None, result
    )
    _record(manager, applied, [p.annotation_id for p in planned])
    capped = _capped(manager)
    for pulled in planned:
        manager.emit_feedback(pulled.event)
        seen.add(pulled.annotation_id)
        result.applied.append(pulled)
    manager.flush()
    result.capped = _capped(manager) - capped
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
