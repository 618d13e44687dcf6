"""Session configuration shared by the default plugins (thresholds, reweighting switch).

Defaults follow DESIGN §4: chain thresholds QGR 0.5, ERC 0.67 (TRIAGE's Youden point), RRS 0.5,
ARF 0.5, AGR 0.5, declared here once (:data:`CHAIN_THRESHOLDS`) and read by
the chain links of :mod:`triage_plugins.metrics.registry`: the contract imports nothing from the
layers above it. Reweighting is off unless the user turns it on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from triage_plugins.contract.errors import ConfigError

__all__ = ["CHAIN_THRESHOLDS", "TriageConfig", "check_namespace", "default_thresholds"]

#: The default θ of each built-in chain link (DESIGN §4), read-only; the registry's links take theirs from here.
CHAIN_THRESHOLDS: Mapping[str, float] = MappingProxyType(
    {"QGR": 0.5, "ERC": 0.67, "RRS": 0.5, "ARF": 0.5, "AGR": 0.5}
)


def default_thresholds() -> dict[str, float]:
    """The default θ of each built-in chain link, as a fresh dict the caller may change."""
    return dict(CHAIN_THRESHOLDS)


def check_namespace(namespace: object, what: str = "namespace") -> str | None:
    """``namespace`` itself when it is ``None`` or a usable name; ``""`` (the default scope) is ``None``.

    :raises ConfigError: not a string, or containing whitespace or control characters.
    """
    if namespace is None or namespace == "":
        return None
    if not isinstance(namespace, str):
        raise ConfigError(f"{what} must be a string, got {type(namespace).__name__}")
    if any(c.isspace() or not c.isprintable() for c in namespace):
        raise ConfigError(f"{what} must not contain whitespace or control characters, got {namespace!r}")
    return namespace


@dataclass
class TriageConfig:
    """What the default plugins read.

    :param thresholds: chain thresholds θ per metric symbol.
    :param reweight: let the feedback learner answer ``triage_rerank`` (EvoRAG hybrid priority).
    :param unit: what the feedback learner scores: ``"triple"`` or ``"chunk"``.
    :param gate: let the default gate answer ``triage_gate`` (otherwise every query proceeds).
    :param options: plugin-specific settings, keyed ``"<plugin>.<name>"``.
    :param namespace: the scope of the learned state (contribution scores, parameters, runs) in a
        shared store: one learner per namespace (:mod:`triage_plugins.store.scoped`). ``None`` or
        ``""``, the default scope, is the store's unprefixed keys (where scores learned before
        namespaces existed live). An adapter may derive it from the framework's own scope (a workspace).
    """

    thresholds: dict[str, float] = field(default_factory=default_thresholds)
    reweight: bool = False
    unit: Literal["triple", "chunk"] = "triple"
    gate: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    namespace: str | None = None

    def __post_init__(self) -> None:
        self.namespace = check_namespace(self.namespace, "TriageConfig.namespace")
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
