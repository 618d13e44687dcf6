"""The core's folders import each other without a cycle (DESIGN §2: dependencies point inward).

The graph is read from the source with :mod:`ast`, not from ``sys.modules``: every ``import`` counts,
at module top or inside a function (a late import hides a cycle from Python, not from the design).
Imports under ``if TYPE_CHECKING:`` are left out of the cycles: they never run, so they cannot tie two
folders together at import time. They count where a folder must not know another at all: ``report``
names nothing of ``apps``, not even in an annotation (issue 32).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

import triage_plugins

ROOT = Path(triage_plugins.__file__).parent
PACKAGE = ROOT.name

Edges = dict[str, dict[str, list[str]]]  # folder -> imported folder -> where ("module:line")


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _folder(module: str, root: Path) -> str | None:
    """``apps`` for ``triage_plugins.apps.score``; ``None`` outside the package or for its root face."""
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2 or not (root / parts[1]).is_dir():
        return None
    return parts[1]


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return out


def _imported(node: ast.AST, package: str) -> list[str]:
    """The modules an import statement names (``from a import b`` names ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join([*anchor, *([node.module] if node.module else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _imports(paths: Iterable[Path], root: Path, *, annotations: bool) -> Iterator[tuple[str, list[str], ast.AST]]:
    """``(module, the modules it names, node)`` for every import statement in ``paths``; those under
    ``if TYPE_CHECKING:`` only with ``annotations``."""
    for path in paths:
        module = _module_name(path, root)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = set() if annotations else _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) not in skipped and (names := _imported(node, package)):
                yield module, names, node


def folder_imports(root: Path = ROOT) -> Edges:
    """Which folder of the core imports which, with the places that do it."""
    edges: Edges = defaultdict(lambda: defaultdict(list))
    for module, names, node in _imports(sorted(root.rglob("*.py")), root, annotations=False):
        source = _folder(module, root)
        if source is None:
            continue
        for target in names:
            folder = _folder(target, root)
            if folder is not None and folder != source:
                edges[source][folder].append(f"{module}:{node.lineno}")  # type: ignore[attr-defined]
    return edges


def imports_into(folder: str, target: str, root: Path = ROOT) -> list[str]:
    """Every import in ``folder`` of a module of the folder ``target`` (``"module:line"``), those under
    ``if TYPE_CHECKING:`` included."""
    return [
        f"{module}:{node.lineno}"  # type: ignore[attr-defined]
        for module, names, node in _imports(sorted((root / folder).rglob("*.py")), root, annotations=True)
        if any(_folder(name, root) == target for name in names)
    ]


def _is_module(name: str, root: Path) -> bool:
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return False
    path = root.joinpath(*parts[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def module_imports(folder: str, root: Path = ROOT) -> Edges:
    """Which module of one folder imports which other module of it (``from a import b`` counts as an
    import of the module ``a.b`` when ``b`` is one, else of ``a``), with the places that do it."""
    edges: Edges = defaultdict(lambda: defaultdict(list))
    inside = f"{PACKAGE}.{folder}"
    for module, names, node in _imports(sorted((root / folder).rglob("*.py")), root, annotations=False):
        if isinstance(node, ast.ImportFrom):  # the submodules named, or else the module itself
            names = [n for n in names[1:] if _is_module(n, root)] or names[:1]
        for target in names:
            if target != module and (target == inside or target.startswith(inside + ".")):
                edges[module][target].append(f"{module}:{node.lineno}")  # type: ignore[attr-defined]
    return edges


def cycles(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one folder (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _explain(component: list[str], edges: Edges) -> str:
    return "\n".join(
        f"  {a} -> {b}: {', '.join(edges[a][b][:3])}" for a in component for b in edges[a] if b in component
    )


def test_no_import_cycle_among_the_core_folders():
    edges = folder_imports()
    found = cycles(edges)
    assert not found, "\n".join(f"cycle {c}:\n{_explain(c, edges)}" for c in found)


def test_no_import_cycle_among_the_metric_modules():
    """The registry imports the metric modules for their functions; none of them imports it back
    (the per-module ``METRICS`` views that did are gone, issue 32)."""
    edges = module_imports("metrics")
    found = cycles(edges)
    assert not found, "\n".join(f"cycle {c}:\n{_explain(c, edges)}" for c in found)
    registry = f"{PACKAGE}.metrics.registry"
    assert {f"{PACKAGE}.metrics.usage", f"{PACKAGE}.metrics.extraction"} <= set(edges[registry])


def test_report_imports_nothing_from_apps():
    """The report renders records and rows (issue 32): the commands call it, it calls no command, and
    it names none of their types either: what it renders is :mod:`triage_plugins.report.results`."""
    assert "apps" not in folder_imports()["report"]
    assert not imports_into("report", "apps"), imports_into("report", "apps")


def test_the_contract_imports_only_itself():
    """What every plugin and adapter imports is the innermost layer."""
    assert not folder_imports()["contract"]


def test_a_late_import_counts(tmp_path: Path):
    """The walk sees imports inside functions and skips ``TYPE_CHECKING`` blocks."""
    pkg = tmp_path / PACKAGE
    for folder in ("a", "b"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text(f"def f():\n    from {PACKAGE}.b import y\n")
    (pkg / "b" / "y.py").write_text(
        f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {PACKAGE}.a import x\nfrom ..a import x\n"
    )
    edges = folder_imports(pkg)
    assert "b" in edges["a"] and "a" in edges["b"]
    assert cycles(edges) == [["a", "b"]]


def test_an_import_for_annotations_only_counts_for_imports_into(tmp_path: Path):
    """``imports_into`` sees ``TYPE_CHECKING`` blocks, relative imports and ``from package import folder``."""
    pkg = tmp_path / PACKAGE
    for folder in ("apps", "report"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "apps" / "score.py").write_text("class QueryScore: ...\n")
    (pkg / "report" / "a.py").write_text(
        f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {PACKAGE}.apps.score import QueryScore\n"
    )
    (pkg / "report" / "b.py").write_text("from ..apps import score\n")
    (pkg / "report" / "c.py").write_text(f"def f():\n    from {PACKAGE} import apps\n")
    (pkg / "report" / "d.py").write_text(f"from {PACKAGE}.report import a\n")
    assert "apps" in folder_imports(pkg)["report"]  # b and c; a is only an annotation
    assert imports_into("report", "apps", pkg) == [
        f"{PACKAGE}.report.a:3",
        f"{PACKAGE}.report.b:1",
        f"{PACKAGE}.report.c:2",
    ]


def test_a_module_cycle_inside_a_folder_is_found(tmp_path: Path):
    """``registry`` imports ``usage``, whose late import of ``registry`` closes a cycle."""
    pkg = tmp_path / PACKAGE / "metrics"
    (pkg / "usage").mkdir(parents=True)
    for init in (tmp_path / PACKAGE / "__init__.py", pkg / "__init__.py", pkg / "usage" / "__init__.py"):
        init.write_text("")
    (pkg / "registry.py").write_text(f"from {PACKAGE}.metrics import usage\n")
    (pkg / "usage" / "query.py").write_text(f"def f():\n    from {PACKAGE}.metrics.registry import X\n")
    (pkg / "usage" / "__init__.py").write_text("from .query import f\n")
    edges = module_imports("metrics", tmp_path / PACKAGE)
    assert cycles(edges) == [
        [f"{PACKAGE}.metrics.registry", f"{PACKAGE}.metrics.usage", f"{PACKAGE}.metrics.usage.query"]
    ]
