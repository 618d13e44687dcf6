"""Token log-probabilities of extraction completions, matched to the record of each triple (TRIAGE §4.1).

TCS needs, per extracted triple, the log-probabilities of the tokens that wrote its record. Every
framework parses records out of a completion its own way, but the matching is the same: tokens are
``(text, logprob)`` pairs whose texts concatenate to the completion; a record is a character span;
its log-probabilities are those of the tokens overlapping the span (:func:`span_logprobs`). No
pairs, or pairs that do not reach the end of the span, mean ``None`` (TCS N/A), never a made-up 1.0.

For frameworks that pass completions around as plain strings (so log-probabilities cannot travel
with them), the convention:

1. the LLM function returns a :class:`LogprobText` — a ``str`` carrying ``.logprobs``;
2. :func:`capture_logprobs` (a decorator) or :func:`record_logprobs` files the pairs under the
   completion text in a bounded, process-wide registry;
3. the adapter finds the completion again (in the framework's cache, say) and calls
   :func:`lookup_logprobs`.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from triage_plugins.adapter_kit.lru import LRU

__all__ = [
    "LogprobText",
    "Pairs",
    "capture_logprobs",
    "logprob_pairs",
    "lookup_logprobs",
    "record_logprobs",
    "span_logprobs",
    "spells",
]

Pairs = tuple[tuple[str, float], ...]

REGISTRY_SIZE = 4096
_registry: LRU[str, Pairs] = LRU(REGISTRY_SIZE)


# --------------------------------------------------------------------------- span matching


def spells(pairs: Sequence[tuple[str, float]], text: str) -> bool:
    """Whether the token texts concatenate to exactly ``text`` (else offsets would be misaligned)."""
    return "".join(t for t, _ in pairs) == text


def span_logprobs(
    pairs: Sequence[tuple[str, float]] | None, start: int, end: int, *, skip_blank: bool = False
) -> tuple[float, ...] | None:
    """Log-probabilities (each capped at 0) of the tokens overlapping characters ``[start, end)``.

    :param pairs: ``(token_text, logprob)`` whose texts concatenate to the completion.
    :param skip_blank: leave out whitespace-only tokens.
    :return: ``None`` when there are no pairs, none overlaps, or they end before the span does.
    """
    if not pairs:
        return None
    out: list[float] = []
    pos = 0
    for token, lp in pairs:
        nxt = pos + len(token)
        if nxt > start and pos < end and not (skip_blank and not token.strip()):
            out.append(min(0.0, float(lp)))
        if nxt >= end:
            return tuple(out) if out else None
        pos = nxt
    return None


def logprob_pairs(logprobs: Any) -> list[tuple[str, float]] | None:
    """``(token, logprob)`` pairs of an OpenAI-style ``choices[i].logprobs`` (object or dict).

    ``None`` when it holds no content or a token lacks its text or log-probability.
    """
    content = getattr(logprobs, "content", None) if logprobs is not None else None
    if content is None and isinstance(logprobs, dict):
        content = logprobs.get("content")
    if not content:
        return None
    out = []
    for t in content:
        token = t.get("token") if isinstance(t, dict) else getattr(t, "token", None)
        lp = t.get("logprob") if isinstance(t, dict) else getattr(t, "logprob", None)
        if token is None or lp is None:
            return None
        out.append((str(token), min(0.0, float(lp))))
    return out


# --------------------------------------------------------------------------- the string convention


class LogprobText(str):
    """A completion string that carries its token log-probabilities as ``.logprobs``."""

    logprobs: Pairs

    def __new__(cls, text: str, logprobs: Sequence[tuple[str, float]] = ()) -> LogprobText:
        obj = super().__new__(cls, text)
        obj.logprobs = tuple((str(t), float(lp)) for t, lp in logprobs)
        return obj


def _key(text: str) -> str:
    return hashlib.md5(str(text).strip().encode("utf-8")).hexdigest()


def record_logprobs(text: str, logprobs: Sequence[tuple[str, float]]) -> None:
    """File ``(token, logprob)`` pairs under a completion text (the last 4096 are kept)."""
    pairs = tuple((str(t), float(lp)) for t, lp in logprobs)
    if pairs:
        _registry.put(_key(text), pairs)


def lookup_logprobs(text: str) -> Pairs | None:
    """The pairs recorded for this completion text, or ``None``."""
    return _registry.get(_key(text))


def capture_logprobs(func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an (async) LLM function so any :class:`LogprobText` it returns is recorded."""

    def _note(result: Any) -> Any:
        pairs = getattr(result, "logprobs", None)
        if isinstance(result, str) and pairs:
            record_logprobs(result, pairs)
        return result

    if inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            return _note(await func(*args, **kwargs))

        return async_wrapper

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _note(func(*args, **kwargs))

    return wrapper
