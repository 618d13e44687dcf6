"""Entry-point plugin of the llamaindex adapter (group ``triage``): registers its compare runner.

Imports nothing from the framework, so ``triage plugins`` can list it cheaply; the runner imports
the framework only when it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from triage_plugins import hookimpl

if TYPE_CHECKING:
    from triage_plugins.adapter_kit.runner import FrameworkRunner

FRAMEWORK = "llamaindex"


@hookimpl
def triage_register_runners(register: Callable[[FrameworkRunner], None]) -> None:
    """Register :class:`~triage_llamaindex.runner.LlamaIndexRunner` (``triage compare --frameworks llamaindex``)."""
    from triage_llamaindex.runner import LlamaIndexRunner

    register(LlamaIndexRunner())
