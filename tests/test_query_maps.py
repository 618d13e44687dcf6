"""Score once (issue #32): the core holds at most two per-query maps.

A query's pending state has one owner, the scorer (``plugins/usage.py``); the OTel exporter keeps one
map of span contexts its later spans parent to. Every other consumer (the gate, probe, demo, compare,
offline scoring) works from the :class:`~triage_plugins.contract.records.QueryRecord` s the scorer
broadcasts. This scan finds the maps an object holds, annotated on ``self.<name>`` or as a
(data)class field, that are keyed by ``(framework, query id)`` or hold query events or records; it
relies on attributes being annotated, as the project's style asks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import triage_plugins

ROOT = Path(triage_plugins.__file__).parent
MAPS = {"dict", "Dict", "OrderedDict", "LRU", "defaultdict", "Mapping", "MutableMapping"}
#: Names of what a per-query map holds: query events, records, decisions, the scorer's entries.
QUERY_VALUES = {"RetrievalEvent", "GenerationEvent", "QueryRecord", "GateDecision", "_Query", "_QuerySpans"}
#: The per-query maps the core may hold (at most two).
ALLOWED = {
    "plugins/usage.py: UsageRecorder._queries",  # the scorer: the one owner of pending query state
    "plugins/otel.py: OtelExporter._spans",  # retrieval span contexts (and gate spans waiting for one)
}
#: Maps keyed by a pair of strings that is not ``(framework, query id)``: each says what its key is.
NOT_QUERIES = {
    "feedback/scores.py: MemoryScoreStore._scores": "(unit, item id): learned scores",
    "runtime/isolation.py: SyncBudget._until": "(plugin, hook): a budget's cooldown",
    "runtime/manager.py: TriageManager._callers": "(lane, hook): hook callers",
}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def _is_query_map(annotation: ast.AST) -> bool:
    """A mapping type keyed by ``tuple[str, str]`` or whose values name a query type."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if not isinstance(annotation, ast.Subscript):
        return False
    base = annotation.value
    name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
    if name not in MAPS or not isinstance(annotation.slice, ast.Tuple) or len(annotation.slice.elts) != 2:
        return False
    key, value = annotation.slice.elts
    keyed_by_query = ast.unparse(key).replace(" ", "") == "tuple[str,str]"
    return keyed_by_query or bool(_names(value) & QUERY_VALUES)


def per_query_maps(root: Path) -> set[str]:
    """``"<module>: <Class>.<attribute>"`` of every per-query map held by an object under ``root``."""
    found: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        for cls in (n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)):
            for node in ast.walk(cls):
                if not isinstance(node, ast.AnnAssign) or not _is_query_map(node.annotation):
                    continue
                target = node.target
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                    found.add(f"{module}: {cls.name}.{target.attr}")
                elif isinstance(target, ast.Name) and node in cls.body:
                    found.add(f"{module}: {cls.name}.{target.id}")
    return found


def test_the_core_holds_at_most_two_per_query_maps() -> None:
    found = per_query_maps(ROOT) - set(NOT_QUERIES)
    assert found <= ALLOWED, f"per-query maps outside the allow-list: {sorted(found - ALLOWED)}"
    assert len(ALLOWED) <= 2


def test_the_scan_finds_the_maps_it_allows() -> None:
    assert per_query_maps(ROOT) == ALLOWED | set(NOT_QUERIES)  # the scan is not blind, and no name is stale


def test_the_scan_finds_a_query_map_and_ignores_other_maps(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "class A:\n"
        "    by_line: dict[int, bool]\n"
        "    graphs: dict[str, GraphRecord]\n"
        "    parts: dict[tuple[str, str], list[int]]\n"
        "    def __init__(self):\n"
        "        self._early: OrderedDict[str, list[GenerationEvent]] = OrderedDict()\n"
        "        self._seen: LRU[tuple[str, str], 'QueryRecord'] = LRU(8)\n"
        "        self._names: dict[tuple[str, bool], tuple[str, ...]] = {}\n"
    )
    assert per_query_maps(tmp_path) == {"m.py: A.parts", "m.py: A._early", "m.py: A._seen"}
