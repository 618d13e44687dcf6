"""The reference pipeline's plugin (``triage.reference``, a default plugin): it registers the
reference runner of ``triage compare`` through ``triage_register_runners``, as each adapter's plugin
registers its framework's runner."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from triage_plugins.contract.hookspecs import hookimpl

if TYPE_CHECKING:
    from triage_plugins.adapter_kit.runner import FrameworkRunner
    from triage_plugins.contract.context import PluginContext

__all__ = ["ReferencePlugin"]


class ReferencePlugin:
    """Registers :class:`~triage_plugins.reference.runner.ReferenceRunner`.

    :param context: the manager (unused: registering a runner needs nothing from it).
    """

    def __init__(self, context: PluginContext | None = None) -> None:
        del context

    @hookimpl
    def triage_register_runners(self, register: Callable[[FrameworkRunner], None]) -> None:
        from triage_plugins.reference.runner import ReferenceRunner  # late: a manager start stays cheap

        register(ReferenceRunner())
