"""Session configuration shared by the default plugins (thresholds, reweighting switch).

Defaults follow DESIGN §4: chain thresholds QGR 0.5, ERC 0.67 (TRIAGE's Youden point), RRS 0.5,
ARF 0.5, AGR 0.5. Reweighting is off unless the user turns it on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from triage_plugins.contract.errors import ConfigError

__all__ = ["DEFAULT_THRESHOLDS", "TriageConfig"]

DEFAULT_THRESHOLDS: dict[str, float] = {"QGR": 0.5, "ERC": 0.67, "RRS": 0.5, "ARF": 0.5, "AGR": 0.5}


@dataclass
class TriageConfig:
    """What the default plugins read.

    :param thresholds: chain thresholds θ per metric symbol.
    :param reweight: let the feedback learner answer ``triage_rerank`` (EvoRAG hybrid priority).
    :param unit: what the feedback learner scores: ``"triple"`` or ``"chunk"``.
    :param gate: let the default gate answer ``triage_gate`` (otherwise every query proceeds).
    :param options: plugin-specific settings, keyed ``"<plugin>.<name>"``.
    """

    thresholds: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
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
