"""The ontology format for KG validation (TRIAGE §4.2), defined in :mod:`triage_plugins.contract.ontology`
because :class:`~triage_plugins.contract.events.GraphEvent` carries one; named here beside the KG code."""

from __future__ import annotations

from triage_plugins.contract.ontology import Ontology, PredicateSpec, load_ontology

__all__ = ["Ontology", "PredicateSpec", "load_ontology"]
