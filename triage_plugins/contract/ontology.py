"""A small ontology format for KG validation (TRIAGE §4.2: LC, OC, SC, CVR).

File format (JSON; YAML with the same keys when PyYAML is installed)::

    {
      "classes": ["Person", "Film", "Organisation"],
      "subclass_of": {"Director": "Person"},
      "disjoint": [["Person", "Film"]],
      "predicates": {
        "directed_by": {"domain": "Film", "range": "Person", "functional": false, "max_cardinality": 3},
        "born_in": {"domain": "Person", "range": "Place", "functional": true}
      }
    }

``functional: true`` means at most one object per subject (max cardinality 1). Unknown keys,
classes used but not declared, and malformed values raise :class:`OntologyError` naming the key.

Part of the contract because :class:`~triage_plugins.contract.events.GraphEvent` carries an ontology;
:mod:`triage_plugins.kg.ontology` keeps the names importable where the KG code looks for them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from triage_plugins.contract.errors import OntologyError

__all__ = ["Ontology", "PredicateSpec", "load_ontology"]

_TOP_KEYS = {"classes", "subclass_of", "disjoint", "predicates"}
_PRED_KEYS = {"domain", "range", "functional", "max_cardinality"}


@dataclass(frozen=True, slots=True)
class PredicateSpec:
    """Constraints of one predicate."""

    name: str
    domain: str | None = None
    range: str | None = None
    functional: bool = False
    max_cardinality: int | None = None

    @property
    def cardinality_limit(self) -> int | None:
        """The effective maximum number of objects per subject (1 when functional)."""
        if self.functional:
            return 1 if self.max_cardinality is None else min(1, self.max_cardinality)
        return self.max_cardinality


@dataclass(frozen=True, slots=True)
class Ontology:
    """Classes, a subclass hierarchy, disjointness axioms and predicate constraints."""

    classes: tuple[str, ...] = ()
    subclass_of: Mapping[str, str] = field(default_factory=dict)
    disjoint: tuple[tuple[str, str], ...] = ()
    predicates: Mapping[str, PredicateSpec] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", tuple(self.classes))
        object.__setattr__(self, "subclass_of", MappingProxyType(dict(self.subclass_of)))
        object.__setattr__(self, "disjoint", tuple(tuple(p) for p in self.disjoint))  # type: ignore[misc]
        object.__setattr__(self, "predicates", MappingProxyType(dict(self.predicates)))
        known = set(self.classes)
        for child, parent in self.subclass_of.items():
            for c in (child, parent):
                if c not in known:
                    raise OntologyError(f"subclass_of: class {c!r} is not declared in 'classes'")
        for pair in self.disjoint:
            if len(pair) != 2:
                raise OntologyError(f"disjoint: each entry must be a pair of classes, got {list(pair)!r}")
            for c in pair:
                if c not in known:
                    raise OntologyError(f"disjoint: class {c!r} is not declared in 'classes'")
        for name, spec in self.predicates.items():
            for c in (spec.domain, spec.range):
                if c is not None and c not in known:
                    raise OntologyError(f"predicates.{name}: class {c!r} is not declared in 'classes'")

    def ancestors(self, cls: str) -> tuple[str, ...]:
        """``cls`` and every superclass of it, nearest first (cycles are cut)."""
        out = [cls]
        seen = {cls}
        while cls in self.subclass_of:
            cls = self.subclass_of[cls]
            if cls in seen:
                break
            seen.add(cls)
            out.append(cls)
        return tuple(out)

    def is_a(self, cls: str | None, target: str) -> bool:
        return cls is not None and target in self.ancestors(cls)

    def are_disjoint(self, a: str, b: str) -> bool:
        anc_a, anc_b = set(self.ancestors(a)), set(self.ancestors(b))
        return any((x in anc_a and y in anc_b) or (y in anc_a and x in anc_b) for x, y in self.disjoint)

    def to_dict(self) -> dict[str, Any]:
        preds: dict[str, Any] = {}
        for name, spec in self.predicates.items():
            entry: dict[str, Any] = {}
            if spec.domain is not None:
                entry["domain"] = spec.domain
            if spec.range is not None:
                entry["range"] = spec.range
            if spec.functional:
                entry["functional"] = True
            if spec.max_cardinality is not None:
                entry["max_cardinality"] = spec.max_cardinality
            preds[name] = entry
        return {
            "classes": list(self.classes),
            "subclass_of": dict(self.subclass_of),
            "disjoint": [list(p) for p in self.disjoint],
            "predicates": preds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ontology:
        if not isinstance(data, Mapping):
            raise OntologyError(f"an ontology must be a mapping at the top level, got {type(data).__name__}")
        unknown = set(data) - _TOP_KEYS
        if unknown:
            raise OntologyError(f"unknown top-level key {sorted(unknown)[0]!r}; allowed: {sorted(_TOP_KEYS)}")
        classes = data.get("classes", [])
        if not isinstance(classes, list) or not all(isinstance(c, str) and c.strip() for c in classes):
            raise OntologyError("classes: must be a list of non-empty class names")
        sub = data.get("subclass_of", {})
        if not isinstance(sub, Mapping) or not all(isinstance(v, str) for v in sub.values()):
            raise OntologyError("subclass_of: must map a class name to its parent class name")
        disjoint = data.get("disjoint", [])
        if not isinstance(disjoint, list) or not all(isinstance(p, list | tuple) for p in disjoint):
            raise OntologyError("disjoint: must be a list of [classA, classB] pairs")
        raw_preds = data.get("predicates", {})
        if not isinstance(raw_preds, Mapping):
            raise OntologyError("predicates: must map a predicate name to its constraints")
        preds: dict[str, PredicateSpec] = {}
        for name, spec in raw_preds.items():
            if spec is None:
                spec = {}
            if not isinstance(spec, Mapping):
                raise OntologyError(f"predicates.{name}: must be a mapping of constraints")
            bad = set(spec) - _PRED_KEYS
            if bad:
                raise OntologyError(
                    f"predicates.{name}: unknown key {sorted(bad)[0]!r}; allowed: {sorted(_PRED_KEYS)}"
                )
            functional = spec.get("functional", False)
            if not isinstance(functional, bool):
                raise OntologyError(f"predicates.{name}.functional: must be true or false")
            card = spec.get("max_cardinality")
            if card is not None and (isinstance(card, bool) or not isinstance(card, int) or card < 1):
                raise OntologyError(f"predicates.{name}.max_cardinality: must be a whole number >= 1")
            for key in ("domain", "range"):
                if spec.get(key) is not None and not isinstance(spec.get(key), str):
                    raise OntologyError(f"predicates.{name}.{key}: must be a class name")
            preds[name] = PredicateSpec(name, spec.get("domain"), spec.get("range"), functional, card)
        return cls(tuple(classes), dict(sub), tuple(tuple(p) for p in disjoint), preds)  # type: ignore[arg-type]


def load_ontology(path: str | Path) -> Ontology:
    """Read an ontology from a ``.json`` (or ``.yaml``/``.yml``, needs PyYAML) file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise OntologyError(f"cannot read ontology file {p}: {exc.strerror or exc}") from None
    if p.suffix.lower() in {".yaml", ".yml"}:
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            raise OntologyError(
                f"{p}: YAML ontologies need PyYAML (pip install pyyaml), or use JSON"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise OntologyError(f"{p}: not valid YAML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OntologyError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    try:
        return Ontology.from_dict(data)
    except OntologyError as exc:
        raise OntologyError(f"{p}: {exc}") from None
