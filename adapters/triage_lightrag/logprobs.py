"""Token log-probabilities of extraction completions (the convention TCS needs, TRIAGE §4.1).

LightRAG passes completions around as plain strings and stores them in its LLM cache as text, so
log-probabilities cannot travel with them. The convention:

1. your ``llm_model_func`` returns a :class:`LogprobText` — a ``str`` subclass carrying
   ``.logprobs``, a sequence of ``(token_text, logprob)`` pairs whose texts concatenate to the
   completion (what OpenAI-compatible APIs return as ``choices[0].logprobs.content``);
2. decorate the function with :func:`capture_logprobs` (or call :func:`record_logprobs` yourself),
   which files the pairs under the completion text in a bounded, process-wide registry;
3. after an insert the adapter reads each chunk's completion back from LightRAG's cache and looks
   its pairs up here, keeping the tokens that fall inside each relation record.

No pairs recorded means ``token_logprobs=None`` and TCS is N/A — never a made-up 1.0.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["LogprobText", "capture_logprobs", "lookup_logprobs", "record_logprobs"]

Pairs = tuple[tuple[str, float], ...]

_CAPACITY = 4096
_registry: OrderedDict[str, Pairs] = OrderedDict()
_lock = threading.Lock()


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
    if not pairs:
        return
    with _lock:
        _registry[_key(text)] = pairs
        _registry.move_to_end(_key(text))
        while len(_registry) > _CAPACITY:
            _registry.popitem(last=False)


def lookup_logprobs(text: str) -> Pairs | None:
    """The pairs recorded for this completion text, or ``None``."""
    with _lock:
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
