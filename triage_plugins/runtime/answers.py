"""Checks of what a synchronous hook answers, run inside the isolation boundary (DESIGN §2).

A ``triage_rerank`` or ``triage_gate`` answer that fails these checks counts as that plugin's failure
and is treated as no answer, so pluggy asks the next implementation (the defaults still answer).
Reads are bounded: a rerank answer is never iterated past ``len(request.ids) + 1`` items, so an
infinite iterator cannot hang the host.
"""

from __future__ import annotations

import itertools
import math
import numbers
import time
from collections.abc import Mapping
from typing import Any

from triage_plugins.contract.events import GATE_ACTIONS, GateDecision

__all__ = [
    "SUGGESTION_KEYS",
    "InvalidAnswer",
    "SlowAnswer",
    "check_gate",
    "check_learned_scores",
    "check_rerank",
    "check_seeded",
    "is_finite_real",
    "is_real",
]

#: What a gate suggestion may ask a host to change (DESIGN §3; adapters read these keys).
SUGGESTION_KEYS: frozenset[str] = frozenset({"widen_top_k", "expand_hops", "top_k", "chunk_top_k", "mode"})
_MAX_SUGGESTION = 10_000.0


class InvalidAnswer(ValueError):
    """A synchronous hook answered something the contract does not allow."""


class SlowAnswer(InvalidAnswer):
    """Reading or converting an answer went past the time budget (a lazy or slow answer)."""


def is_real(value: object) -> bool:
    """A real number: ints, floats and numpy reals; bools (Python's or numpy's) and strings are not."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__name__ != "bool_"


def is_finite_real(value: object) -> bool:
    """A real number (:func:`is_real`) that is finite."""
    return is_real(value) and math.isfinite(float(value))  # type: ignore[arg-type]


def _real(value: Any, where: str) -> float:
    if not is_real(value):
        raise InvalidAnswer(f"{where} is {type(value).__name__}, not a real number")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidAnswer(f"{where} is {number}, not finite")
    return number


def check_rerank(answer: Any, n_ids: int, deadline: float | None = None) -> list[float]:
    """One finite real priority per id, read without consuming more than ``n_ids + 1`` items.

    :param deadline: ``time.perf_counter()`` value past which reading a lazy answer, or converting a
        value that is not a plain ``float``/``int``, stops with :class:`SlowAnswer`.
    """
    if isinstance(answer, str | bytes | dict) or not hasattr(answer, "__iter__"):
        raise InvalidAnswer(f"a rerank answer must be a sequence of numbers, got {type(answer).__name__}")
    if deadline is None or type(answer) is list or type(answer) is tuple:
        items = list(itertools.islice(iter(answer), n_ids + 1))
    else:
        items = _read_until(iter(answer), n_ids + 1, deadline)
    if len(items) != n_ids:
        count = f"more than {n_ids}" if len(items) > n_ids else str(len(items))
        raise InvalidAnswer(f"a rerank answer has {count} value(s) for {n_ids} id(s)")
    out = [
        float(v) if type(v) is float or type(v) is int else _real_by(v, f"priority {i}", deadline)
        for i, v in enumerate(items)
    ]
    if not all(map(math.isfinite, out)):
        raise InvalidAnswer("a rerank answer has a value that is not finite")
    return out


def _read_until(it: Any, limit: int, deadline: float) -> list[Any]:
    """Up to ``limit`` items of ``it``; :class:`SlowAnswer` once ``deadline`` passed between two."""
    items = []
    for item in itertools.islice(it, limit):
        items.append(item)
        if time.perf_counter() > deadline:
            raise SlowAnswer(f"reading the answer took past the budget ({len(items)} value(s) read)")
    return items


def _real_by(value: Any, where: str, deadline: float | None) -> float:
    number = _real(value, where)
    if deadline is not None and time.perf_counter() > deadline:
        raise SlowAnswer(f"converting {where} took past the budget")
    return number


def check_gate(answer: Any) -> GateDecision:
    """A :class:`GateDecision` with a known action and a suggestion of known keys and sane values."""
    if not isinstance(answer, GateDecision):
        raise InvalidAnswer(f"a gate answer must be a GateDecision, got {type(answer).__name__}")
    if answer.action not in GATE_ACTIONS:
        raise InvalidAnswer(f"unknown gate action {answer.action!r}")
    for key, value in answer.suggestion.items():
        if key not in SUGGESTION_KEYS:
            raise InvalidAnswer(
                f"unknown gate suggestion {key!r}; known: {', '.join(sorted(SUGGESTION_KEYS))}"
            )
        if key == "mode":
            if not isinstance(value, str) or not value.strip():
                raise InvalidAnswer(f"gate suggestion mode must be a name, got {value!r}")
            continue
        number = _real(value, f"gate suggestion {key}")
        if not 0.0 < number <= _MAX_SUGGESTION:
            raise InvalidAnswer(f"gate suggestion {key}={number} is outside (0, {_MAX_SUGGESTION:g}]")
    return answer


def check_learned_scores(answer: Any) -> dict[str, float]:
    """A mapping of id (``str``) to a finite real score."""
    if not isinstance(answer, Mapping):
        raise InvalidAnswer(
            f"a learned-scores answer must be a mapping of id to score, got {type(answer).__name__}"
        )
    out: dict[str, float] = {}
    for key, value in answer.items():
        if not isinstance(key, str):
            raise InvalidAnswer(f"a learned-scores id is {type(key).__name__}, not a string")
        out[key] = _real(value, f"the score of {key[:80]!r}")
    return out


def check_seeded(answer: Any) -> int:
    """How many scores were seeded: a whole number >= 0."""
    if isinstance(answer, bool) or not isinstance(answer, int) or answer < 0:
        raise InvalidAnswer(f"a seed-scores answer must be a count >= 0, got {answer!r}")
    return answer
