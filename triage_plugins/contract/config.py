"""Session configuration shared by the default plugins (thresholds, reweighting switch).

Defaults follow DESIGN §4: chain thresholds QGR 0.5, ERC 0.67 (TRIAGE's Youden point), RRS 0.5,
ARF 0.5, AGR 0.5, declared with the chain links in :mod:`triage_plugins.metrics.registry` and read
here as :data:`DEFAULT_THRESHOLDS` (a fresh dict each time). Reweighting is off unless the user turns
it on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from triage_plugins.contract.errors import ConfigError

__all__ = ["DEFAULT_THRESHOLDS", "TriageConfig", "default_thresholds"]

DEFAULT_THRESHOLDS: dict[str, float]  # θ per chain link, from the metric registry (__getattr__ below)


def default_thresholds() -> dict[str, float]:
    """The default θ of each chain link, from its :class:`~triage_plugins.metrics.registry.MetricSpec`."""
    from triage_plugins.metrics.registry import BUILTIN_METRICS  # late: keeps the contract light

    return BUILTIN_METRICS.thresholds()


def __getattr__(name: str) -> Any:
    if name == "DEFAULT_THRESHOLDS":
        return default_thresholds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class TriageConfig:
    """What the default plugins read.

    :param thresholds: chain thresholds θ per metric symbol.
    :param reweight: let the feedback learner answer ``triage_rerank`` (EvoRAG hybrid priority).
    :param unit: what the feedback learner scores: ``"triple"`` or ``"chunk"``.
    :param gate: let the default gate answer ``triage_gate`` (otherwise every query proceeds).
    :param options: plugin-specific settings, keyed ``"<plugin>.<name>"``.
    """

    thresholds: dict[str, float] = field(default_factory=default_thresholds)
    reweight: bool = False
    unit: Literal["triple", "chunk"] = "triple"
    gate: bool = True
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in self.thresholds.items():
            if not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
                raise ConfigError(f"threshold {name} must be a number in [0, 1], got {value!r}")
        if self.unit not in ("triple", "chunk"):
            raise ConfigError(f"unit must be 'triple' or 'chunk', got {self.unit!r}")

    def threshold(self, name: str) -> float:
        try:
            return float(self.thresholds[name])
        except KeyError:
            raise ConfigError(f"no threshold configured for {name!r}") from None
