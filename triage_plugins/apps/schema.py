"""``triage schema``: the JSON Schema (draft 2020-12) of an event line (DESIGN §6).

Generated, not written by hand: every event class of :data:`~triage_plugins.contract.events.EVENT_TYPES`
is walked field by field through its type hints, nested dataclasses become ``$defs``, and the document
is one ``oneOf`` branch per kind, told apart by the constant ``"event"`` field. Two types write their
own JSON form and are walked through what defines it: :class:`GraphView` through its constructor's
parameters, :class:`Ontology` through its fields (a ``predicates`` entry is keyed by the predicate's
name, so :class:`PredicateSpec`'s ``name`` is not in the entry).

The schema checks types, required fields, enumerations and unknown fields; value rules the event
classes check at construction (non-blank ids, scores in [0, 1], unique ids) are left to them.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Union

from triage_plugins import __version__

__all__ = ["SCHEMA_ID", "event_schema"]

SCHEMA_ID = "https://triage-plugins.invalid/schema/event.json"
_DRAFT = "https://json-schema.org/draft/2020-12/schema"
_SCALARS: dict[type, dict[str, Any]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    type(None): {"type": "null"},
}


class _Walker:
    """Turns type hints into schemas, collecting each class's schema once under ``$defs``."""

    def __init__(self) -> None:
        from triage_plugins.contract import events
        from triage_plugins.contract.graph_view import GraphView
        from triage_plugins.kg.ontology import Ontology, PredicateSpec

        self.defs: dict[str, dict[str, Any]] = {}
        self.namespace = {**vars(events), "GraphView": GraphView, "Ontology": Ontology}
        self.own_form = {GraphView: self._from_init, PredicateSpec: self._keyed_by_name}

    def ref(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}  # placeholder: a recursive type refers to itself
            self.defs[name] = self.own_form.get(cls, self._dataclass)(cls)
        return {"$ref": f"#/$defs/{name}"}

    def of(self, hint: Any) -> dict[str, Any]:
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if hint in _SCALARS:
            return dict(_SCALARS[hint])
        if hint is Any:
            return {}
        if origin is Literal:
            return {"enum": list(args)}
        if origin in (Union, types.UnionType):
            return {"anyOf": [self.of(a) for a in args]}
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.of(args[0])}
            return {"type": "array", "prefixItems": [self.of(a) for a in args], "items": False}
        if origin in (list, Iterable) or (isinstance(origin, type) and issubclass(origin, Iterable)
                                          and not issubclass(origin, Mapping)):  # fmt: skip
            return {"type": "array", "items": self.of(args[0]) if args else {}}
        if origin is not None and issubclass(origin, Mapping):
            return {"type": "object", "additionalProperties": self.of(args[1]) if args else {}}
        if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or hint in self.own_form):
            return self.ref(hint)
        raise TypeError(f"no JSON Schema for type hint {hint!r}")

    def _object(self, cls: type, params: Iterable[tuple[str, Any, bool]]) -> dict[str, Any]:
        props, required = {}, []
        for name, hint, has_default in params:
            props[name] = self.of(hint)
            if not has_default:
                required.append(name)
        doc = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        out: dict[str, Any] = {"type": "object", "description": doc, "properties": props}
        if required:
            out["required"] = required
        out["additionalProperties"] = False
        return out

    def _dataclass(self, cls: type, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
        hints = typing.get_type_hints(cls, globalns={**vars(sys.modules[cls.__module__]), **self.namespace})
        return self._object(
            cls,
            (
                (
                    f.name,
                    hints[f.name],
                    f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING,
                )  # fmt: skip
                for f in dataclasses.fields(cls)
                if f.name not in skip
            ),
        )

    def _keyed_by_name(self, cls: type) -> dict[str, Any]:
        return self._dataclass(cls, skip=frozenset({"name"}))

    def _from_init(self, cls: type) -> dict[str, Any]:
        hints = typing.get_type_hints(cls.__init__, globalns=self.namespace)
        params = inspect.signature(cls.__init__).parameters.values()
        return self._object(
            cls,
            (
                (p.name, _drop_none(hints[p.name]), p.default is not inspect.Parameter.empty)
                for p in params
                if p.name != "self"
            ),
        )

    def event(self, cls: type) -> dict[str, Any]:
        schema = self._dataclass(cls)
        schema["properties"] = {"event": {"const": cls.kind}, **schema["properties"]}  # type: ignore[attr-defined]
        schema["required"] = ["event", *schema.get("required", [])]
        return schema


def _drop_none(hint: Any) -> Any:
    """``X | None`` as ``X`` (a constructor parameter defaulting to ``None`` is written as a value)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (Union, types.UnionType) and len(args) == 1:
        return args[0]
    return hint


def event_schema() -> dict[str, Any]:
    """The JSON Schema of one event line: ``oneOf`` one object per event kind, keyed by ``"event"``."""
    from triage_plugins.contract.events import EVENT_TYPES

    walker = _Walker()
    branches = []
    for cls in EVENT_TYPES.values():
        name = cls.__name__
        walker.defs[name] = walker.event(cls)
        branches.append({"$ref": f"#/$defs/{name}"})
    return {
        "$schema": _DRAFT,
        "$id": SCHEMA_ID,
        "title": "triage-plugins event line",
        "description": (
            f"One line of a triage events JSONL file (triage-plugins {__version__}), generated from "
            'the event classes of triage_plugins.contract.events. The "event" field names the kind.'
        ),
        "oneOf": branches,
        "$defs": dict(sorted(walker.defs.items())),
    }
