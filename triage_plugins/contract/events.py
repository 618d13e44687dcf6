"""The events carried by the hooks (DESIGN §3) and their JSON form (DESIGN §6).

Every event is a frozen, slotted dataclass validated at construction: a bad value raises
:class:`~triage_plugins.contract.errors.EventError` naming the class and the field. Lists passed where a
tuple is declared are converted to tuples and mappings are copied into read-only views, so an
event never changes after it is built.

JSON: ``event.to_dict()`` / ``event.to_json()`` give ``{"event": "<kind>", ...fields}`` with
nested dataclasses as objects, tuples as lists and ``None`` as null; :func:`from_json` (or
:func:`from_dict`) rebuilds the identical event. Each class writes its own dict and JSON text (no
reflection per event); the text is exactly ``json.dumps(event.to_dict(), ensure_ascii=False,
allow_nan=False)``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from hashlib import blake2b as _blake2b
from json.encoder import encode_basestring
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from triage_plugins.contract.errors import EventError

if TYPE_CHECKING:
    from triage_plugins.contract.graph_view import GraphView
    from triage_plugins.contract.ontology import Ontology

__all__ = [
    "Chunk",
    "Event",
    "ExtractedTriple",
    "ExtractionEvent",
    "FeedbackEvent",
    "GateDecision",
    "GenerationEvent",
    "Gold",
    "GraphEvent",
    "Path",
    "RerankRequest",
    "RetrievalEvent",
    "Subgraph",
    "Triple",
    "from_dict",
    "from_json",
    "join_json",
    "part_keys",
    "split_json",
    "trusted_parts",
]

FeedbackSource = Literal["llm", "human", "gold"]
RerankUnit = Literal["triple", "chunk"]
GateAction = Literal["proceed", "warn", "reroute"]
GenerationContext = Literal["retrieved", "none"]

FEEDBACK_SOURCES: tuple[str, ...] = ("llm", "human", "gold")
RERANK_UNITS: tuple[str, ...] = ("triple", "chunk")
GATE_ACTIONS: tuple[str, ...] = ("proceed", "warn", "reroute")
GENERATION_CONTEXTS: tuple[str, ...] = ("retrieved", "none")


# --------------------------------------------------------------------------- validation helpers


def _fail(obj: object, name: str, why: str) -> None:
    raise EventError(type(obj).__name__, name, why)


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


def _trusted(cls: type, values: tuple) -> Any:
    """An instance of the slotted dataclass ``cls`` holding ``values`` (every field, in order) as
    given, without ``__post_init__``: for parts its caller built and checked itself. It equals what
    the checked constructor makes from the same values when they are already in its normal form."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    obj = object.__new__(cls)
    setter = object.__setattr__
    for name, value in zip(names, values, strict=True):
        setter(obj, name, value)
    return obj


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def trusted_parts(query_id: Any, text: Any, mentions: Iterable[Any], grounding: Mapping[str, Any], seconds: Any) -> bool:
    """Whether the parts every query event shares are already in the checked constructors' normal
    form, as the ``trusted`` constructors take them: ``query_id`` a non-blank ``str``, ``text`` (the
    query or the answer) a ``str``, ``mentions`` non-blank strings, ``grounding``'s nodes non-blank
    strings or ``None``, ``seconds`` a finite ``float`` >= 0. A caller checks its own other parts."""
    return (
        type(query_id) is str
        and bool(query_id.strip())
        and isinstance(text, str)
        and all(isinstance(m, str) and m.strip() for m in mentions)
        and all(n is None or (isinstance(n, str) and n.strip()) for n in grounding.values())
        and type(seconds) is float
        and 0.0 <= seconds < math.inf
    )


def _need_id(obj: object, name: str) -> str:
    value = getattr(obj, name)
    if not isinstance(value, str):
        _fail(obj, name, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        _fail(obj, name, "must be a non-empty string (ids are stable, non-blank strings)")
    return value


def _need_str(obj: object, name: str, *, optional: bool = False) -> str | None:
    value = getattr(obj, name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        _fail(obj, name, f"must be a string, got {type(value).__name__}")
    return value


def _need_number(
    obj: object,
    name: str,
    *,
    optional: bool = False,
    low: float | None = None,
    high: float | None = None,
    integer: bool = False,
) -> None:
    value = getattr(obj, name)
    if value is None:
        if optional:
            return
        _fail(obj, name, "is required")
    if isinstance(value, bool) or not isinstance(value, int | float):
        _fail(obj, name, f"must be a number, got {type(value).__name__}")
    if integer and not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            _fail(obj, name, f"must be a whole number, got {value!r}")
    if not integer:
        try:
            value = float(value)
        except OverflowError:  # an int beyond the float range
            _fail(obj, name, "must be finite, got an integer too large for a float")
        if not math.isfinite(value):
            _fail(obj, name, f"must be finite, got {value!r}")
    if low is not None and value < low:
        _fail(obj, name, f"must be >= {low}, got {value!r}")
    if high is not None and value > high:
        _fail(obj, name, f"must be <= {high}, got {value!r}")
    _set(obj, name, value)


def _finite(value: float) -> bool:
    """Whether a number is finite as a float (an int beyond the float range is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _tuple_of(obj: object, name: str, kind: type | tuple[type, ...], *, optional: bool = False) -> tuple:
    value = getattr(obj, name)
    if value is None and optional:
        return None  # type: ignore[return-value]
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        _fail(obj, name, f"must be a sequence, got {type(value).__name__}")
    items = tuple(value)
    for i, item in enumerate(items):
        if not isinstance(item, kind):
            kinds = kind if isinstance(kind, tuple) else getattr(kind, "__args__", (kind,))
            want = " or ".join(k.__name__ for k in kinds)
            _fail(obj, name, f"item {i} must be {want}, got {type(item).__name__}")
    _set(obj, name, items)
    return items


def _str_tuple(obj: object, name: str, *, nonblank: bool = True) -> tuple[str, ...]:
    items = _tuple_of(obj, name, str)
    if nonblank:
        for i, item in enumerate(items):
            if not item.strip():
                _fail(obj, name, f"item {i} is blank")
    return items


def _frozen_mapping(obj: object, name: str) -> Mapping:
    value = getattr(obj, name)
    if not isinstance(value, Mapping):
        _fail(obj, name, f"must be a mapping, got {type(value).__name__}")
    frozen = MappingProxyType(dict(value))
    _set(obj, name, frozen)
    return frozen


def _unique(obj: object, name: str, ids: Iterable[str]) -> None:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            _fail(obj, name, f"duplicate id {item!r}")
        seen.add(item)


# --------------------------------------------------------------------------- building blocks


@dataclass(frozen=True, slots=True)
class Triple:
    """One edge of a knowledge graph: ``(subject, predicate, object)``.

    :param id: stable id of the triple (for example ``"Inception|directed_by|Christopher Nolan"``).
    :param subject: node id of the head entity (its canonical name).
    :param predicate: relation label.
    :param object: node id of the tail entity.
    :param subject_type: entity type of the head, when known.
    :param object_type: entity type of the tail, when known.
    """

    id: str
    subject: str
    predicate: str
    object: str
    subject_type: str | None = None
    object_type: str | None = None

    def __post_init__(self) -> None:
        i, s, p, o, st, ot = self.id, self.subject, self.predicate, self.object, self.subject_type, self.object_type
        if (  # the usual case checked inline (a trace holds millions of triples); else each field, in order
            isinstance(i, str) and isinstance(s, str) and isinstance(p, str) and isinstance(o, str)
            and i.strip() and s.strip() and p.strip() and o.strip()
            and (st is None or isinstance(st, str)) and (ot is None or isinstance(ot, str))
        ):  # fmt: skip
            return
        for name in ("id", "subject", "predicate", "object"):
            _need_id(self, name)
        _need_str(self, "subject_type", optional=True)
        _need_str(self, "object_type", optional=True)

    @classmethod
    def of(cls, subject: str, predicate: str, object: str, **types: str | None) -> Triple:
        """A triple whose id is ``"subject|predicate|object"``."""
        return cls(f"{subject}|{predicate}|{object}", subject, predicate, object, **types)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "subject": self.subject,
            "predicate": self.predicate,
            "object": self.object,
            "subject_type": self.subject_type,
            "object_type": self.object_type,
        }

    def _json(self) -> str:
        st, ot = self.subject_type, self.object_type
        return _TRIPLE_JSON % (
            _str(self.id),
            _str(self.subject),
            _str(self.predicate),
            _str(self.object),
            "null" if st is None else _str(st),
            "null" if ot is None else _str(ot),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Triple:
        if type(data) is dict and data.keys() == _TRIPLE_KEYS:  # every field, as written: no checks to add
            try:
                return cls(**data)
            except EventError:
                pass  # _build names the error exactly as for any other object
        return _build(cls, data)


_TRIPLE_KEYS = frozenset(("id", "subject", "predicate", "object", "subject_type", "object_type"))


@dataclass(frozen=True, slots=True)
class Subgraph:
    """K_S, the retrieved subgraph: triples plus entities retrieved without an edge between them.

    V_S (:attr:`node_ids`) is ``nodes`` plus the endpoints of ``triples``.
    """

    triples: tuple[Triple, ...] = ()
    nodes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        triples = _tuple_of(self, "triples", Triple)
        _unique(self, "triples", (t.id for t in triples))
        _str_tuple(self, "nodes")

    @classmethod
    def trusted(cls, triples: tuple[Triple, ...], nodes: tuple[str, ...]) -> Subgraph:
        """The subgraph of parts the caller guarantees (an adapter's translation): ``triples`` a tuple
        of :class:`Triple` with distinct ids, ``nodes`` a tuple of non-blank strings. Not checked."""
        return _trusted(cls, (triples, nodes))

    @property
    def node_ids(self) -> frozenset[str]:
        """V_S: explicit nodes plus every triple endpoint."""
        out = set(self.nodes)
        for t in self.triples:
            out.add(t.subject)
            out.add(t.object)
        return frozenset(out)

    @property
    def triple_ids(self) -> tuple[str, ...]:
        return tuple(t.id for t in self.triples)

    def to_dict(self) -> dict[str, Any]:
        return {"triples": [t.to_dict() for t in self.triples], "nodes": list(self.nodes)}

    def _json(self, parts: Callable[[tuple], list[str]] | None = None) -> str:
        """The JSON text; ``parts`` writes the triples (default: their memoized texts, :func:`_texts`)."""
        triples = "[" + ", ".join((parts or _texts)(self.triples)) + "]"
        return f'{{"triples": {triples}, "nodes": {_strs(self.nodes)}}}'

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Subgraph:
        return cls(
            triples=tuple(Triple.from_dict(t) for t in data.get("triples", ())),
            nodes=tuple(data.get("nodes", ())),
        )


@dataclass(frozen=True, slots=True)
class Path:
    """A retrieved reasoning path: a sequence of triple ids and the framework's own score."""

    triple_ids: tuple[str, ...]
    score: float | None = None

    def __post_init__(self) -> None:
        ids = _str_tuple(self, "triple_ids")
        if not ids:
            _fail(self, "triple_ids", "a path needs at least one triple")
        _need_number(self, "score", optional=True)

    def to_dict(self) -> dict[str, Any]:
        return {"triple_ids": list(self.triple_ids), "score": self.score}

    def _json(self) -> str:
        return f'{{"triple_ids": {_strs(self.triple_ids)}, "score": {_number(self.score)}}}'

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Path:
        return _build(cls, data)


@dataclass(frozen=True, slots=True)
class ExtractedTriple:
    """A triple as an extractor produced it, with what it knows about its confidence.

    :param triple: the triple.
    :param token_logprobs: natural-log probabilities of the completion tokens inside the triple's
        record (each finite and <= 0), or ``None`` when the extractor exposes none (then TCS is N/A).
    :param evidence: the text span the triple was read from, when known.
    """

    triple: Triple
    token_logprobs: tuple[float, ...] | None = None
    evidence: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.triple, Triple):
            _fail(self, "triple", f"must be a Triple, got {type(self.triple).__name__}")
        lps = _tuple_of(self, "token_logprobs", int | float, optional=True)
        if lps is not None:
            for i, lp in enumerate(lps):
                if isinstance(lp, bool) or not _finite(lp):
                    _fail(self, "token_logprobs", f"item {i} must be finite, got {lp!r}")
                if lp > 0:
                    _fail(
                        self, "token_logprobs", f"item {i} is a log-probability and must be <= 0, got {lp!r}"
                    )
            _set(self, "token_logprobs", tuple(float(x) for x in lps))
        _need_str(self, "evidence", optional=True)

    def to_dict(self) -> dict[str, Any]:
        lps = self.token_logprobs
        return {
            "triple": self.triple.to_dict(),
            "token_logprobs": None if lps is None else list(lps),
            "evidence": self.evidence,
        }

    def _json(self) -> str:
        lps = self.token_logprobs
        return _EXTRACTED_JSON % (
            self.triple._json(),
            "null" if lps is None else "[" + ", ".join(map(float.__repr__, lps)) + "]",
            _nstr(self.evidence),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExtractedTriple:
        lps = data.get("token_logprobs")
        return cls(
            triple=Triple.from_dict(data["triple"]),
            token_logprobs=None if lps is None else tuple(lps),
            evidence=data.get("evidence"),
        )


@dataclass(frozen=True, slots=True)
class Chunk:
    """A passage of a source document (TRIAGE's unit for SCR, EC and provenance).

    :param locator: where the chunk sits in its document (section / paragraph / sentence ...).
    """

    id: str
    doc_id: str
    text: str
    locator: Mapping[str, str | int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _need_id(self, "id")
        _need_id(self, "doc_id")
        _need_str(self, "text")
        loc = _frozen_mapping(self, "locator")
        for key, value in loc.items():
            if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, str | int):
                _fail(self, "locator", f"entries must map str to str or int, got {key!r}: {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "doc_id": self.doc_id, "text": self.text, "locator": dict(self.locator)}

    def _json(self) -> str:
        locator = ", ".join([_str(k) + ": " + _scalar(v) for k, v in self.locator.items()])
        return _CHUNK_JSON % (_str(self.id), _str(self.doc_id), _str(self.text), locator)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Chunk:
        return _build(cls, data)


@dataclass(frozen=True, slots=True)
class Gold:
    """Gold annotations of a query, when a benchmark has them (needed by CC, Hits@1, F1, GPC...).

    :param answers: node ids of the gold answer entities.
    :param paths: gold reasoning paths, each a sequence of triples.
    :param entities: gold topic entities of the question (seeds of the gold-entity retriever).
    """

    answers: tuple[str, ...] = ()
    paths: tuple[tuple[Triple, ...], ...] = ()
    entities: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _str_tuple(self, "answers")
        _str_tuple(self, "entities")
        paths = _tuple_of(self, "paths", Iterable)
        fixed = []
        for i, path in enumerate(paths):
            if isinstance(path, str):
                _fail(self, "paths", f"path {i} must be a sequence of Triple")
            items = tuple(path)
            if not all(isinstance(t, Triple) for t in items):
                _fail(self, "paths", f"path {i} must hold only Triple objects")
            fixed.append(items)
        _set(self, "paths", tuple(fixed))

    def to_dict(self) -> dict[str, Any]:
        return {
            "answers": list(self.answers),
            "paths": [[t.to_dict() for t in path] for path in self.paths],
            "entities": list(self.entities),
        }

    def _json(self) -> str:
        paths = "[" + ", ".join(map(_triples, self.paths)) + "]"
        return f'{{"answers": {_strs(self.answers)}, "paths": {paths}, "entities": {_strs(self.entities)}}}'

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Gold:
        return cls(
            answers=tuple(data.get("answers", ())),
            paths=tuple(tuple(Triple.from_dict(t) for t in p) for p in data.get("paths", ())),
            entities=tuple(data.get("entities", ())),
        )


# --------------------------------------------------------------------------- events


class Event:
    """Mixin of the hook events: kind name and JSON round trip."""

    __slots__ = ()
    kind: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """``{"event": kind, ...fields}`` with nested objects as dicts and tuples as lists."""
        # The classes of this module write their own; this generic walk serves only other subclasses.
        return {"event": self.kind, **{f.name: _plain(getattr(self, f.name)) for f in fields(self)}}  # type: ignore[arg-type]

    def to_json(self) -> str:
        """One line of JSON (DESIGN §6): ``json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False)``."""
        return self._json()

    def _json(self) -> str:
        return _ENCODER.encode(self.to_dict())


@dataclass(frozen=True, slots=True)
class ExtractionEvent(Event):
    """The triples extracted from one chunk in one extraction run (TRIAGE §4.1)."""

    kind: ClassVar[str] = "extraction"

    framework: str
    run_id: str
    chunk: Chunk
    triples: tuple[ExtractedTriple, ...] = ()
    model: str | None = None
    temperature: float | None = None

    def __post_init__(self) -> None:
        _need_id(self, "framework")
        _need_id(self, "run_id")
        if not isinstance(self.chunk, Chunk):
            _fail(self, "chunk", f"must be a Chunk, got {type(self.chunk).__name__}")
        _tuple_of(self, "triples", ExtractedTriple)
        _need_str(self, "model", optional=True)
        _need_number(self, "temperature", optional=True, low=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.kind,
            "framework": self.framework,
            "run_id": self.run_id,
            "chunk": self.chunk.to_dict(),
            "triples": [t.to_dict() for t in self.triples],
            "model": self.model,
            "temperature": self.temperature,
        }

    def _json(self) -> str:
        triples = "[" + ", ".join([t._json() for t in self.triples]) + "]"
        return (
            f'{{"event": "extraction", "framework": {_str(self.framework)}, "run_id": {_str(self.run_id)}, '
            f'"chunk": {self.chunk._json()}, "triples": {triples}, "model": {_nstr(self.model)}, '
            f'"temperature": {_number(self.temperature)}}}'
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExtractionEvent:
        return cls(
            framework=data["framework"],
            run_id=data["run_id"],
            chunk=Chunk.from_dict(data["chunk"]),
            triples=tuple(ExtractedTriple.from_dict(t) for t in data.get("triples", ())),
            model=data.get("model"),
            temperature=data.get("temperature"),
        )


@dataclass(frozen=True, slots=True)
class GraphEvent(Event):
    """The assembled graph after a (re)build or update (TRIAGE §4.2).

    :param graph: the read-only graph view.
    :param aliases: alias or surface form -> canonical node id (``None`` when known to be unlinked).
    :param ontology: the schema to validate against, when the user has one.
    """

    kind: ClassVar[str] = "graph"

    framework: str
    graph: GraphView
    aliases: Mapping[str, str | None] = field(default_factory=dict)
    ontology: Ontology | None = None

    def __post_init__(self) -> None:
        from triage_plugins.contract.graph_view import GraphView
        from triage_plugins.contract.ontology import Ontology

        _need_id(self, "framework")
        if not isinstance(self.graph, GraphView):
            _fail(self, "graph", f"must be a GraphView, got {type(self.graph).__name__}")
        aliases = _frozen_mapping(self, "aliases")
        for key, value in aliases.items():
            if not isinstance(key, str) or not key.strip():
                _fail(self, "aliases", f"alias keys must be non-blank strings, got {key!r}")
            if value is not None and (not isinstance(value, str) or not value.strip()):
                _fail(self, "aliases", f"alias {key!r} must map to a node id or None, got {value!r}")
        if self.ontology is not None and not isinstance(self.ontology, Ontology):
            _fail(self, "ontology", f"must be an Ontology or None, got {type(self.ontology).__name__}")

    def to_dict(self) -> dict[str, Any]:
        onto = self.ontology
        return {
            "event": self.kind,
            "framework": self.framework,
            "graph": self.graph.to_dict(),
            "aliases": dict(self.aliases),
            "ontology": None if onto is None else onto.to_dict(),
        }

    def _json(self) -> str:
        onto = self.ontology
        return (
            f'{{"event": "graph", "framework": {_str(self.framework)}, "graph": {_graph_json(self.graph)}, '
            f'"aliases": {_grounding(self.aliases)}, '
            f'"ontology": {"null" if onto is None else _ENCODER.encode(onto.to_dict())}}}'
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraphEvent:
        from triage_plugins.contract.graph_view import GraphView
        from triage_plugins.contract.ontology import Ontology

        onto = data.get("ontology")
        return cls(
            framework=data["framework"],
            graph=GraphView.from_dict(data["graph"]),
            aliases=dict(data.get("aliases", {})),
            ontology=None if onto is None else Ontology.from_dict(onto),
        )


@dataclass(frozen=True, slots=True)
class RetrievalEvent(Event):
    """What a retriever returned for one query, before the reader runs (TRIAGE §4.3).

    :param query_id: id joining retrieval, generation and feedback of one query.
    :param query: the question text.
    :param mentions: M_q, the entity mentions found in the query.
    :param grounding: γ_q, each mention -> node id, or ``None`` when it grounds to nothing.
    :param subgraph: K_S with V_S.
    :param paths: reasoning paths over ``subgraph`` triples, with the framework's own scores.
    :param chunks: retrieved text chunks, in rank order.
    :param expanded_nodes: RPC, the number of nodes the retriever expanded, or ``None``.
    :param expanded_nodes_note: why ``expanded_nodes`` is ``None`` or an estimate.
    :param seconds: wall time of the retrieval.
    :param retriever: the retriever or mode name (``"local"``, ``"krag"`` ...).
    :param gold: gold annotations when the query comes from a benchmark.
    """

    kind: ClassVar[str] = "retrieval"

    framework: str
    query_id: str
    query: str
    mentions: tuple[str, ...] = ()
    grounding: Mapping[str, str | None] = field(default_factory=dict)
    subgraph: Subgraph = field(default_factory=Subgraph)
    paths: tuple[Path, ...] = ()
    chunks: tuple[Chunk, ...] = ()
    expanded_nodes: int | None = None
    expanded_nodes_note: str | None = None
    seconds: float | None = None
    retriever: str = "default"
    gold: Gold | None = None

    def __post_init__(self) -> None:
        _need_id(self, "framework")
        _need_id(self, "query_id")
        _need_str(self, "query")
        mentions = _str_tuple(self, "mentions")
        grounding = _frozen_mapping(self, "grounding")
        known = set(mentions)
        for mention, node in grounding.items():
            if mention not in known:
                _fail(self, "grounding", f"names mention {mention!r} which is not in mentions")
            if node is not None and (not isinstance(node, str) or not node.strip()):
                _fail(
                    self, "grounding", f"mention {mention!r} must ground to a node id or None, got {node!r}"
                )
        if not isinstance(self.subgraph, Subgraph):
            _fail(self, "subgraph", f"must be a Subgraph, got {type(self.subgraph).__name__}")
        paths = _tuple_of(self, "paths", Path)
        present = set(self.subgraph.triple_ids)
        for i, path in enumerate(paths):
            for tid in path.triple_ids:
                if tid not in present:
                    _fail(self, "paths", f"path {i} uses triple {tid!r} which is not in subgraph.triples")
        chunks = _tuple_of(self, "chunks", Chunk)
        _unique(self, "chunks", (c.id for c in chunks))
        _need_number(self, "expanded_nodes", optional=True, low=0, integer=True)
        _need_str(self, "expanded_nodes_note", optional=True)
        _need_number(self, "seconds", optional=True, low=0.0)
        _need_id(self, "retriever")
        if self.gold is not None and not isinstance(self.gold, Gold):
            _fail(self, "gold", f"must be a Gold or None, got {type(self.gold).__name__}")

    @classmethod
    def trusted(cls, *values: Any) -> RetrievalEvent:
        """The event of every field's value, in order, in the checked constructor's normal form, from
        a caller that checked them (an adapter's translation): ids non-blank strings, ``mentions`` a
        tuple of non-blank strings, ``grounding`` a ``MappingProxyType`` of its own dict naming only
        those mentions (nodes non-blank strings or ``None``), ``paths`` / ``chunks`` tuples (paths over
        ``subgraph`` triples, chunk ids distinct), ``expanded_nodes`` an ``int`` >= 0 or ``None``,
        ``seconds`` a finite ``float`` >= 0 or ``None``. Not checked; equal to the checked event."""
        return _trusted(cls, values)

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.kind,
            "framework": self.framework,
            "query_id": self.query_id,
            "query": self.query,
            "mentions": list(self.mentions),
            "grounding": dict(self.grounding),
            "subgraph": self.subgraph.to_dict(),
            "paths": [p.to_dict() for p in self.paths],
            "chunks": [c.to_dict() for c in self.chunks],
            "expanded_nodes": self.expanded_nodes,
            "expanded_nodes_note": self.expanded_nodes_note,
            "seconds": self.seconds,
            "retriever": self.retriever,
            "gold": None if self.gold is None else self.gold.to_dict(),
        }

    def _json(self, parts: Callable[[tuple], list[str]] | None = None) -> str:
        """The JSON text; ``parts`` writes the triples and chunks (default: :func:`_texts`)."""
        paths = "[" + ", ".join([p._json() for p in self.paths]) + "]"
        chunks = "[" + ", ".join((parts or _texts)(self.chunks)) + "]"
        return _RETRIEVAL_JSON % (
            _str(self.framework),
            _str(self.query_id),
            _str(self.query),
            _strs(self.mentions),
            _grounding(self.grounding),
            self.subgraph._json(parts),
            paths,
            chunks,
            _number(self.expanded_nodes),
            _nstr(self.expanded_nodes_note),
            _number(self.seconds),
            _str(self.retriever),
            "null" if self.gold is None else self.gold._json(),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalEvent:
        gold = data.get("gold")
        return cls(
            framework=data["framework"],
            query_id=data["query_id"],
            query=data["query"],
            mentions=tuple(data.get("mentions", ())),
            grounding=dict(data.get("grounding", {})),
            subgraph=Subgraph.from_dict(data.get("subgraph", {})),
            paths=tuple(Path.from_dict(p) for p in data.get("paths", ())),
            chunks=tuple(Chunk.from_dict(c) for c in data.get("chunks", ())),
            expanded_nodes=data.get("expanded_nodes"),
            expanded_nodes_note=data.get("expanded_nodes_note"),
            seconds=data.get("seconds"),
            retriever=data.get("retriever", "default"),
            gold=None if gold is None else Gold.from_dict(gold),
        )


@dataclass(frozen=True, slots=True)
class GenerationEvent(Event):
    """The reader's answer to one query (TRIAGE §4.3).

    :param answer: the response text.
    :param answer_mentions: entity mentions found in the answer.
    :param answer_grounding: each answer mention -> node id or ``None``.
    :param prompt_tokens: size of the reader prompt, when known.
    :param context: ``"retrieved"`` (the normal run) or ``"none"`` (a closed-book run, for KNI).
    """

    kind: ClassVar[str] = "generation"

    framework: str
    query_id: str
    answer: str
    answer_mentions: tuple[str, ...] = ()
    answer_grounding: Mapping[str, str | None] = field(default_factory=dict)
    prompt_tokens: int | None = None
    seconds: float | None = None
    context: GenerationContext = "retrieved"

    def __post_init__(self) -> None:
        _need_id(self, "framework")
        _need_id(self, "query_id")
        _need_str(self, "answer")
        mentions = _str_tuple(self, "answer_mentions")
        grounding = _frozen_mapping(self, "answer_grounding")
        known = set(mentions)
        for mention, node in grounding.items():
            if mention not in known:
                _fail(self, "answer_grounding", f"names mention {mention!r} which is not in answer_mentions")
            if node is not None and (not isinstance(node, str) or not node.strip()):
                _fail(self, "answer_grounding", f"mention {mention!r} must ground to a node id or None")
        _need_number(self, "prompt_tokens", optional=True, low=0, integer=True)
        _need_number(self, "seconds", optional=True, low=0.0)
        if self.context not in GENERATION_CONTEXTS:
            _fail(self, "context", f"must be one of {GENERATION_CONTEXTS}, got {self.context!r}")

    @classmethod
    def trusted(cls, *values: Any) -> GenerationEvent:
        """The event of every field's value, in order, checked by the caller as for
        :meth:`RetrievalEvent.trusted` (``answer_grounding`` a ``MappingProxyType`` of its own dict,
        ``context`` one of :data:`GENERATION_CONTEXTS`). Not checked; equal to the checked event."""
        return _trusted(cls, values)

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.kind,
            "framework": self.framework,
            "query_id": self.query_id,
            "answer": self.answer,
            "answer_mentions": list(self.answer_mentions),
            "answer_grounding": dict(self.answer_grounding),
            "prompt_tokens": self.prompt_tokens,
            "seconds": self.seconds,
            "context": self.context,
        }

    def _json(self) -> str:
        return _GENERATION_JSON % (
            _str(self.framework),
            _str(self.query_id),
            _str(self.answer),
            _strs(self.answer_mentions),
            _grounding(self.answer_grounding),
            _number(self.prompt_tokens),
            _number(self.seconds),
            _str(self.context),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GenerationEvent:
        return _build(cls, data)


@dataclass(frozen=True, slots=True)
class FeedbackEvent(Event):
    """A score for an answered query (EvoRAG §4.1).

    :param score: in [0, 1]; use :meth:`from_rating` for a 1-5 rating (mapped to (r-1)/4).
    :param source: ``"llm"``, ``"human"`` or ``"gold"``.
    :param raw: the score as it was given (a rating, a label), for the record.
    """

    kind: ClassVar[str] = "feedback"

    framework: str
    query_id: str
    score: float
    source: FeedbackSource = "human"
    raw: str | int | float | None = None

    def __post_init__(self) -> None:
        _need_id(self, "framework")
        _need_id(self, "query_id")
        _need_number(self, "score", low=0.0, high=1.0)
        if self.source not in FEEDBACK_SOURCES:
            _fail(self, "source", f"must be one of {FEEDBACK_SOURCES}, got {self.source!r}")
        if self.raw is not None and (
            isinstance(self.raw, bool) or not isinstance(self.raw, str | int | float)
        ):
            _fail(self, "raw", f"must be a string, a number or None, got {type(self.raw).__name__}")
        if isinstance(self.raw, float) and not math.isfinite(self.raw):
            _fail(self, "raw", f"must be finite, got {self.raw!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.kind,
            "framework": self.framework,
            "query_id": self.query_id,
            "score": self.score,
            "source": self.source,
            "raw": self.raw,
        }

    def _json(self) -> str:
        return (
            f'{{"event": "feedback", "framework": {_str(self.framework)}, "query_id": {_str(self.query_id)}, '
            f'"score": {_number(self.score)}, "source": {_str(self.source)}, "raw": {_scalar(self.raw)}}}'
        )

    @classmethod
    def from_rating(
        cls, framework: str, query_id: str, rating: int | float, source: FeedbackSource = "human"
    ) -> FeedbackEvent:
        """A feedback event from a 1-5 rating: score = (rating - 1) / 4."""
        if isinstance(rating, bool) or not isinstance(rating, int | float) or not 1 <= rating <= 5:
            raise EventError(cls.__name__, "raw", f"a rating must be a number in [1, 5], got {rating!r}")
        return cls(framework, query_id, (float(rating) - 1.0) / 4.0, source, rating)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeedbackEvent:
        return _build(cls, data)


@dataclass(frozen=True, slots=True)
class RerankRequest(Event):
    """Candidates a framework is about to rank (EvoRAG §4.2 hybrid priority).

    :param unit: ``"triple"`` or ``"chunk"``.
    :param ids: stable ids of the candidates.
    :param relevance: the framework's own relevance S_r of each candidate, in [0, 1].
    """

    kind: ClassVar[str] = "rerank"

    framework: str
    query: str
    unit: RerankUnit
    ids: tuple[str, ...]
    relevance: tuple[float, ...]
    query_id: str | None = None

    def __post_init__(self) -> None:
        _need_id(self, "framework")
        _need_str(self, "query")
        if self.unit not in RERANK_UNITS:
            _fail(self, "unit", f"must be one of {RERANK_UNITS}, got {self.unit!r}")
        ids = _str_tuple(self, "ids")
        _unique(self, "ids", ids)
        rel = _tuple_of(self, "relevance", int | float)
        if len(rel) != len(ids):
            _fail(self, "relevance", f"has {len(rel)} values for {len(ids)} ids")
        for i, r in enumerate(rel):
            if isinstance(r, bool) or not _finite(r) or not 0.0 <= r <= 1.0:
                _fail(self, "relevance", f"item {i} must be a finite number in [0, 1], got {r!r}")
        _set(self, "relevance", tuple(float(r) for r in rel))
        if self.query_id is not None:
            _need_id(self, "query_id")

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.kind,
            "framework": self.framework,
            "query": self.query,
            "unit": self.unit,
            "ids": list(self.ids),
            "relevance": list(self.relevance),
            "query_id": self.query_id,
        }

    def _json(self) -> str:
        relevance = "[" + ", ".join(map(float.__repr__, self.relevance)) + "]"
        return (
            f'{{"event": "rerank", "framework": {_str(self.framework)}, "query": {_str(self.query)}, '
            f'"unit": {_str(self.unit)}, "ids": {_strs(self.ids)}, "relevance": {relevance}, '
            f'"query_id": {_nstr(self.query_id)}}}'
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RerankRequest:
        return _build(cls, data)


@dataclass(frozen=True, slots=True)
class GateDecision(Event):
    """The pre-inference gate's verdict (TRIAGE §4.5).

    :param action: ``"proceed"``, ``"warn"`` (answer, but flag it) or ``"reroute"``.
    :param reason: why, in words a user can act on.
    :param metrics: the metric values the decision read (``None`` where undefined).
    :param suggestion: for ``reroute``, what to change (for example ``{"top_k": 120}``).
    """

    kind: ClassVar[str] = "gate"

    action: GateAction
    reason: str = ""
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    suggestion: Mapping[str, str | int | float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.action not in GATE_ACTIONS:
            _fail(self, "action", f"must be one of {GATE_ACTIONS}, got {self.action!r}")
        _need_str(self, "reason")
        _frozen_mapping(self, "metrics")
        _frozen_mapping(self, "suggestion")

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.kind,
            "action": self.action,
            "reason": self.reason,
            "metrics": _plain(self.metrics),  # free-form values: converted as any JSON value
            "suggestion": _plain(self.suggestion),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateDecision:
        return _build(cls, data)


# --------------------------------------------------------------------------- JSON

# Each class writes its own JSON text from its fields (no reflection per event). Byte for byte it is
# ``json.dumps(obj.to_dict(), ensure_ascii=False, allow_nan=False)``: strings go through the same C
# escaper json uses, numbers through ``int.__repr__`` / ``float.__repr__`` as json's encoder does, and
# anything free-form through a json encoder with those options (tests/contract/test_encoding.py).
_str = encode_basestring
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_TRIPLE_JSON = (
    '{"id": %s, "subject": %s, "predicate": %s, "object": %s, "subject_type": %s, "object_type": %s}'
)
_EXTRACTED_JSON = '{"triple": %s, "token_logprobs": %s, "evidence": %s}'
_CHUNK_JSON = '{"id": %s, "doc_id": %s, "text": %s, "locator": {%s}}'
_RETRIEVAL_JSON = (
    '{"event": "retrieval", "framework": %s, "query_id": %s, "query": %s, "mentions": %s, '
    '"grounding": %s, "subgraph": %s, "paths": %s, "chunks": %s, "expanded_nodes": %s, '
    '"expanded_nodes_note": %s, "seconds": %s, "retriever": %s, "gold": %s}'
)
_GENERATION_JSON = (
    '{"event": "generation", "framework": %s, "query_id": %s, "answer": %s, "answer_mentions": %s, '
    '"answer_grounding": %s, "prompt_tokens": %s, "seconds": %s, "context": %s}'
)


def _nstr(value: str | None) -> str:
    return "null" if value is None else _str(value)


def _strs(items: Iterable[str]) -> str:
    return "[" + ", ".join(map(_str, items)) + "]"


def _triples(triples: Iterable[Triple]) -> str:
    return "[" + ", ".join(map(Triple._json, triples)) + "]"


def _number(value: float | None) -> str:
    """A number validated by ``_need_number`` (an int, or a finite float), or ``None``."""
    if value is None:
        return "null"
    return int.__repr__(value) if isinstance(value, int) else float.__repr__(value)


def _scalar(value: Any) -> str:
    """Any value (a string, a number, ``None`` ...) exactly as json writes it."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__repr__(value)
    if isinstance(value, float) and math.isfinite(value):
        return float.__repr__(value)
    return _ENCODER.encode(value)  # booleans, and whatever else (or json's own error)


def _grounding(mapping: Mapping[str, str | None]) -> str:
    """A mapping of strings to strings or ``None`` (grounding, aliases)."""
    return "{" + ", ".join([_str(k) + ": " + _nstr(v) for k, v in mapping.items()]) + "}"


def _graph_json(graph: GraphView) -> str:
    """:meth:`GraphView.to_dict` as JSON text, without building the dicts."""
    from triage_plugins.contract.graph_view import GraphView

    if type(graph) is not GraphView:
        return _ENCODER.encode(graph.to_dict())
    sources = ", ".join([_str(k) + ": " + _strs(v) for k, v in graph.sources.items()])
    return (
        f'{{"triples": {_triples(graph.triples)}, "nodes": {_strs(graph.nodes)}, '
        f'"labels": {_grounding(graph.labels)}, "sources": {{{sources}}}}}'
    )


# ---------------------------------------------------------------- shared fragments (DESIGN §6)

# Adapters reuse one Triple / Chunk object for an edge or chunk they read again (every query reads
# the same graph). An object seen once is only noted (by id(), with the object itself: while its
# entry lives the object does too, so no other object can have its id); seen again, its JSON text
# and part key are kept, so later events write it without encoding it. Objects never seen twice
# (an adapter building new ones per query) cost one note and stay inline in the stored skeleton.
# Bounded: past the budget of characters kept a new memo starts; past _SEEN_ONCE notes they are
# forgotten. Lookups map over a whole tuple of objects at once (C-level dict gets): a memoized object
# costs no Python call.
_FRAGMENT_BUDGET = 8_000_000  # characters of JSON text kept
_SEEN_ONCE = 20_000  # objects seen once remembered (forgotten all at once past it: a small dict)


class _Memo:
    """Objects seen once (``seen``) and, once seen again, kept with their text (``objs``, ``texts``);
    ``keep`` carries the kept ones of a memo whose seen-once notes were full."""

    __slots__ = ("chars", "keys", "objs", "refs", "seen", "texts")

    def __init__(self, keep: _Memo | None = None) -> None:
        self.seen: dict[int, Any] = {}  # id -> an object seen once (keeps the id taken)
        self.objs: dict[int, Any] = keep.objs if keep else {}  # id -> a kept object
        self.texts: dict[int, str] = keep.texts if keep else {}  # id -> JSON text of a kept object
        self.keys: dict[int, str] = keep.keys if keep else {}  # id -> part key, once it was one
        self.refs: dict[int, str] = keep.refs if keep else {}  # id -> PART_MARK key PART_MARK
        self.chars = keep.chars if keep else 0


_memo = _Memo()

#: Marks a shared part's key in a JSON skeleton. JSON text never holds it raw (json escapes every
#: control character), so a skeleton is told from a whole text, and split, without parsing.
PART_MARK = "\x01"


def _current() -> _Memo:
    """The memo, a new one once the one in use holds more than the budget."""
    global _memo
    memo = _memo
    if memo.chars > _FRAGMENT_BUDGET or len(memo.seen) > _SEEN_ONCE:
        memo = _memo = _Memo(memo if memo.chars <= _FRAGMENT_BUDGET else None)
    return memo


def _seen(memo: _Memo, i: int, obj: Any) -> str | None:
    """The object's JSON text if it was seen before (kept from now on); else note it, ``None``."""
    text = memo.texts.get(i)
    if text is not None:
        return text
    if memo.seen.pop(i, None) is not obj:
        memo.seen[i] = obj
        return None
    memo.objs[i] = obj
    text = memo.texts[i] = obj._json()
    memo.chars += len(text)
    return text


def _lookup(
    objs: tuple[Any, ...], table: str, miss: Callable[[_Memo, int, Any], str]
) -> tuple[list[str], _Memo | None, list[int]]:
    """The strings ``table`` of the memo holds for ``objs`` (one C-level pass), ``miss`` giving
    those it lacks; objects none of which was seen before are noted and written inline. Returns
    the strings, the memo that answered (``None`` when all were new) and the objects' ids."""
    memo = _memo
    ids = list(map(id, objs))
    out = list(map(getattr(memo, table).get, ids))
    if None in out:
        fresh = _current()
        if _all_new(fresh, ids, objs):
            return [obj._json() for obj in objs], None, ids
        if fresh is memo:  # what this memo answered stands: ``miss`` only for the others
            out = [miss(memo, i, obj) if s is None else s for s, i, obj in zip(out, ids, objs, strict=True)]
        else:
            memo = fresh
            out = [miss(memo, i, obj) for i, obj in zip(ids, objs, strict=True)]
    return out, memo, ids


def _texts(objs: tuple[Any, ...]) -> list[str]:
    """The JSON texts of triples or chunks (a text seen before is not written again)."""
    return _lookup(objs, "texts", _text)[0]


def _text(memo: _Memo, i: int, obj: Any) -> str:
    return _seen(memo, i, obj) or obj._json()


def _all_new(memo: _Memo, ids: list[int], objs: tuple[Any, ...]) -> bool:
    """Note the objects and say ``True`` when none was seen before (one C-level pass: a stream of
    new objects pays no Python call per object); ``False`` changes nothing."""
    if any(map(memo.seen.__contains__, ids)) or any(map(memo.texts.__contains__, ids)):
        return False
    memo.seen.update(zip(ids, objs, strict=True))
    return True


def split_json(event: Event, parts: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """``event.to_json()`` with each retrieved triple and chunk seen before replaced by
    ``PART_MARK key PART_MARK``.

    Returns the skeleton and ``{key: part text}`` (``parts`` when given, added to: one dict for a
    batch of events); the key is the BLAKE2b-128 hex digest of the part's UTF-8 bytes, so equal parts
    share a key in every process. An object met for the first time stays inline (a part pays when it
    comes back). :func:`join_json` puts the text back, byte for byte. Events of other kinds are
    returned whole, adding no parts.
    """
    if parts is None:
        parts = {}
    if not isinstance(event, RetrievalEvent):
        return event.to_json(), parts

    def refs(objs: tuple[Any, ...]) -> list[str]:
        out, memo, ids = _lookup(objs, "refs", _ref)
        if memo is not None:
            keys = list(map(memo.keys.get, ids))
            if None in keys:  # some written inline
                parts.update((k, memo.texts[i]) for i, k in zip(ids, keys, strict=True) if k is not None)
            else:
                parts.update(zip(keys, map(memo.texts.get, ids), strict=True))
        return out

    return event._json(refs), parts


def _ref(memo: _Memo, i: int, obj: Any) -> str:
    """The part reference of an object seen before, or its inline JSON text if it was not."""
    ref = memo.refs.get(i)
    if ref is not None:
        return ref
    text = _seen(memo, i, obj)
    if text is None:
        return obj._json()
    key = memo.keys[i] = _blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    ref = memo.refs[i] = PART_MARK + key + PART_MARK
    return ref


def part_keys(skeleton: str) -> list[str]:
    """The part keys a skeleton of :func:`split_json` names (none for a whole JSON text)."""
    return skeleton.split(PART_MARK)[1::2] if PART_MARK in skeleton else []


def join_json(skeleton: str, parts: Mapping[str, str]) -> str:
    """The JSON text a :func:`split_json` skeleton stands for; ``KeyError`` names a missing part."""
    if PART_MARK not in skeleton:
        return skeleton
    pieces = skeleton.split(PART_MARK)
    pieces[1::2] = [parts[key] for key in pieces[1::2]]
    return "".join(pieces)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        ExtractionEvent,
        GraphEvent,
        RetrievalEvent,
        GenerationEvent,
        FeedbackEvent,
        RerankRequest,
        GateDecision,
    )
}


def _plain(obj: Any) -> Any:
    """Any value as plain JSON data (for free-form values such as :attr:`GateDecision.metrics`)."""
    if type(obj).__module__ != __name__ and hasattr(obj, "to_dict") and not isinstance(obj, Mapping):
        return obj.to_dict()  # GraphView, Ontology: they own their JSON form
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [_plain(v) for v in obj]
    return obj


_FIELDS: dict[type, tuple[tuple[str, ...], frozenset[str], tuple[str, ...]]] = {}


def _field_names(cls: type) -> tuple[tuple[str, ...], frozenset[str], tuple[str, ...]]:
    """``cls``'s field names in order, as a set with ``"event"``, and the required ones (cached per class)."""
    known = _FIELDS.get(cls)
    if known is None:
        fs = fields(cls)
        names = tuple(f.name for f in fs)
        required = tuple(f.name for f in fs if f.default is MISSING and f.default_factory is MISSING)
        known = _FIELDS[cls] = (names, frozenset(names) | {"event"}, required)
    return known


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    if not isinstance(data, Mapping):
        raise EventError(cls.__name__, "event", f"expected a JSON object, got {type(data).__name__}")
    names, allowed, required = _field_names(cls)
    if not allowed.issuperset(data):
        raise EventError(cls.__name__, sorted(set(data) - allowed)[0], "is not a field of this event")
    for name in required:
        if name not in data:
            raise EventError(cls.__name__, name, "is required")
    kwargs = {}
    for name in names:
        if name in data:
            value = data[name]
            kwargs[name] = tuple(value) if isinstance(value, list) else value
    return cls(**kwargs)


def from_dict(data: Mapping[str, Any]) -> Event:
    """Rebuild an event from its :meth:`Event.to_dict` form (the ``"event"`` key picks the class)."""
    if not isinstance(data, Mapping):
        raise EventError("Event", "event", f"expected a JSON object, got {type(data).__name__}")
    kind = data.get("event")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        shown = repr(kind) if len(repr(kind)) <= 80 else repr(kind)[:77] + "..."
        raise EventError("Event", "event", f"unknown kind {shown}; expected one of {sorted(EVENT_TYPES)}")
    try:
        return cls.from_dict(data)  # type: ignore[attr-defined]
    except EventError:
        raise
    except KeyError as exc:
        raise EventError(cls.__name__, str(exc.args[0])[:80], "is required") from None
    except RecursionError:
        raise EventError(cls.__name__, "event", "nested too deeply") from None
    except (TypeError, AttributeError, ValueError, OverflowError) as exc:
        raise EventError(cls.__name__, "event", f"malformed JSON object: {str(exc)[:200]}") from None


def from_json(text: str) -> Event:
    """Parse one JSON line into an event; malformed JSON raises :class:`EventError`."""
    if not isinstance(text, str | bytes | bytearray):
        raise EventError("Event", "json", f"expected a JSON text, got {type(text).__name__}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EventError("Event", "json", f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise EventError("Event", "json", "nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:  # e.g. an integer of more than 4,300 digits
        raise EventError("Event", "json", f"not valid JSON ({str(exc)[:120]})") from None
    return from_dict(data)
