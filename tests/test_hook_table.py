"""README's "## Hooks" table and the hook specification name the same hooks (datasette's habit:
its tests check that every hook in ``hookspecs.py`` is documented, and only those)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from triage_plugins.contract import hookspecs

README = Path(__file__).resolve().parents[1] / "README.md"


def _specified() -> set[str]:
    """The hooks ``hookspecs.py`` declares (functions marked with ``@hookspec``)."""
    return {
        name
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(fn, f"{hookspecs.PROJECT}_spec")
    }


def _readme_table(text: str) -> list[str]:
    """The hook names of the first column of the table under ``## Hooks``."""
    section = text.split("\n## Hooks\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [m[1] for row in rows if (m := re.match(r"\| `(\w+)\(", row))]


def test_every_hook_is_in_the_readme_table_and_only_those() -> None:
    documented = _readme_table(README.read_text(encoding="utf-8"))
    specified = _specified()
    assert len(documented) == len(set(documented)), "a hook is listed twice in README's table"
    assert sorted(specified - set(documented)) == [], "hooks missing from README's ## Hooks table"
    assert sorted(set(documented) - specified) == [], "README's ## Hooks table lists hooks with no spec"


def test_the_table_is_read() -> None:
    rows = _readme_table(
        "intro\n## Hooks\n\n| hook | when |\n|---|---|\n| `triage_x(event)` | now |\n## Next\n| `triage_y()` | |\n"
    )
    assert rows == ["triage_x"]
    assert {"triage_retrieval", "triage_register_metrics", "triage_query_scored"} <= _specified()
