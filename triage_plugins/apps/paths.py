"""Up-front checks of the paths a command reads and writes, so a mistake is said before long work.

Each check raises :class:`~triage_plugins.contract.errors.TriageError` with a one-line message the CLI
prints as ``error: ...``.
"""

from __future__ import annotations

import os
from pathlib import Path

from triage_plugins.contract.errors import TriageError

__all__ = ["check_input_file", "check_output_file", "is_store_url"]


def is_store_url(target: str) -> bool:
    """Whether ``target`` is a URL (``postgresql://``, ``sqlite:///``) rather than a file path."""
    return "://" in target


def check_input_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` as a :class:`Path` when it is an existing, readable file."""
    p = Path(path)
    if not p.exists():
        raise TriageError(f"no {what} at {p}")
    if p.is_dir():
        raise TriageError(f"{p} is a folder; {what} must be a file")
    if not os.access(p, os.R_OK):
        raise TriageError(f"cannot read {what} {p}: permission denied")
    return p


def check_output_file(path: str | os.PathLike[str], what: str, *, force: bool = True) -> Path:
    """``path`` as a :class:`Path` when a file can be written there.

    :param force: an existing file may be replaced; with ``False`` it is refused (say ``--force``).
    """
    p = Path(path)
    if p.is_dir():
        raise TriageError(f"{what} {p} is a folder; give a file name")
    if p.exists() and not force:
        raise TriageError(f"{what} {p} exists; pass --force to replace it")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise TriageError(f"cannot write {what} {p}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise TriageError(f"cannot write {what} {p}: permission denied")
    return p
