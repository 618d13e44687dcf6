"""Adapters import only the package face and the adapter kit (issue 32 §4, DESIGN §2).

Every ``import`` statement of ``adapters/**.py`` is read with :mod:`ast` (at module top, inside a
function or under ``TYPE_CHECKING``): a ``triage_plugins`` module an adapter may name is
``triage_plugins`` itself or ``triage_plugins.adapter_kit`` and its modules; the rest is private.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import triage_plugins
import triage_plugins.adapter_kit as kit
import triage_plugins.adapter_kit.offline as kit_offline

ADAPTERS = Path(__file__).resolve().parents[2] / "adapters"
ALLOWED = ("triage_plugins", "triage_plugins.adapter_kit")


def _allowed(module: str) -> bool:
    return module in ALLOWED or module.startswith("triage_plugins.adapter_kit.")


def private_imports(root: Path = ADAPTERS) -> list[str]:
    """``path:line module`` of every import of a private ``triage_plugins`` module under ``root``."""
    out: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module.split(".")[0] == "triage_plugins" and not _allowed(module):
                    out.append((str(path.relative_to(root)), node.lineno, module))
    return [f"{where}:{line} {module}" for where, line, module in sorted(out)]


def test_adapters_import_only_the_face_and_the_kit() -> None:
    found = private_imports()
    assert not found, (
        "adapters import private modules (re-export from triage_plugins.adapter_kit):\n" + "\n".join(found)
    )


def test_a_private_import_is_found(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        "from triage_plugins import hookimpl\nfrom triage_plugins.adapter_kit.lru import LRU\n"
        "def f():\n    from triage_plugins.runtime.manager import TriageManager\n"
        "import triage_plugins.kg.grounding\n"
    )
    assert private_imports(tmp_path) == [
        "pkg/a.py:4 triage_plugins.runtime.manager",
        "pkg/a.py:5 triage_plugins.kg.grounding",
    ]


@pytest.mark.parametrize("module", [triage_plugins, kit, kit_offline], ids=lambda m: m.__name__)
def test_every_re_exported_name_resolves(module: object) -> None:
    for name in module.__all__:  # type: ignore[attr-defined]
        assert getattr(module, name) is not None, name
