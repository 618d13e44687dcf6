"""The value a metric function returns: a number, or ``None`` with the reason it is undefined."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["MetricResult", "na", "ok"]


@dataclass(frozen=True, slots=True)
class MetricResult:
    """One metric value.

    :param name: the paper's symbol (``"ERC"``, ``"TCS"`` ...), the registry key.
    :param value: the value, or ``None`` when undefined (shown ``N/A``; never a made-up 0 or 1).
    :param reason: why ``value`` is ``None`` (required then), or a caveat.
    :param n: the size of the denominator / population the value was computed over.
    :param details: extra numbers worth showing (degenerate-input counts, per-type breakdowns).
    """

    name: str
    value: float | None
    reason: str | None = None
    n: int | None = None
    details: Mapping[str, float | int | str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.value is None:
            if not self.reason:
                raise ValueError(f"{self.name}: an undefined metric needs a reason")
        else:
            v = float(self.value)
            if not math.isfinite(v):
                raise ValueError(f"{self.name}: value must be finite or None, got {self.value!r}")
            object.__setattr__(self, "value", v)
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    @property
    def defined(self) -> bool:
        return self.value is not None

    def display(self, digits: int = 3) -> str:
        """``0.667`` or ``N/A (reason)``."""
        if self.value is None:
            return f"N/A ({self.reason})"
        return f"{self.value:.{digits}f}"


def ok(
    name: str, value: float, *, n: int | None = None, reason: str | None = None, **details
) -> MetricResult:
    """A defined metric value."""
    return MetricResult(name, value, reason, n, details)


def na(name: str, reason: str, *, n: int | None = None, **details) -> MetricResult:
    """An undefined metric (N/A) with the reason."""
    return MetricResult(name, None, reason, n, details)
