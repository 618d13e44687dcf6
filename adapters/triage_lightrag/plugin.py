"""Entry-point plugin of the lightrag adapter (group ``triage``): registers its compare runner.

Imports nothing from the framework, so ``triage plugins`` can list it cheaply; the runner imports
the framework only when it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from triage_plugins import hookimpl

if TYPE_CHECKING:
    from triage_plugins.adapter_kit.runner import FrameworkRunner

FRAMEWORK = "lightrag"


@hookimpl
def triage_register_runners(register: Callable[[FrameworkRunner], None]) -> None:
    """Register :class:`~triage_lightrag.runner.LightRAGRunner` (``triage compare --frameworks lightrag``)."""
    from triage_lightrag.runner import LightRAGRunner

    register(LightRAGRunner())
