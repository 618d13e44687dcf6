"""Token log-probabilities of LightRAG's extraction completions (TRIAGE §4.1: TCS).

Two ways in, one registry (:mod:`triage_plugins.adapter_kit.logprobs`, shared by every adapter):

- **your own function**: LightRAG passes completions around as plain strings, so your
  ``llm_model_func`` returns a :class:`LogprobText` and is decorated with :func:`capture_logprobs`;
- **lightrag-server's OpenAI-compatible bindings** (``--llm-binding openai`` / ``azure_openai``):
  :func:`request_openai_logprobs` wraps the ``extract`` role's function so that each call asks
  for log-probabilities (``logprobs=True``) and hands LightRAG's binding an HTTP client whose
  response hook files the ``(token, logprob)`` pairs of each chat completion under its text.
  The binding itself returns the text only, unchanged (LightRAG 1.5.7's
  ``openai_complete_if_cache`` drops ``choices[0].logprobs``), so answers and graphs are the
  ones the stock server builds.

The ingestion path then finds the completion again in LightRAG's extraction cache
(``remove_think_tags`` output: stripped) and looks its pairs up (:func:`lookup_logprobs`); pairs are
filed aligned to the stripped text. A completion whose tokens do not spell it (a reasoning trace
removed, byte tokens) is not filed: TCS stays N/A rather than misaligned.

An endpoint that refuses the ``logprobs`` parameter (HTTP 400 naming it) is asked once more without
it, and never again in this process: extraction goes on, TCS is N/A.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from triage_plugins.adapter_kit.logprobs import (
    LogprobText,
    capture_logprobs,
    logprob_pairs,
    lookup_logprobs,
    record_logprobs,
    spells,
)

__all__ = [
    "OPENAI_COMPATIBLE",
    "LogprobText",
    "capture_logprobs",
    "lookup_logprobs",
    "record_completion",
    "record_logprobs",
    "request_openai_logprobs",
    "stripped_pairs",
    "with_openai_logprobs",
]

log = logging.getLogger("triage.lightrag.logprobs")

#: lightrag-server bindings that call ``lightrag.llm.openai.openai_complete_if_cache``.
OPENAI_COMPATIBLE = frozenset({"openai", "azure_openai"})
#: The LightRAG role whose function writes the extraction records (and description summaries).
EXTRACT_ROLE = "extract"


# --------------------------------------------------------------------------- recording


def stripped_pairs(text: str, pairs: Sequence[tuple[str, float]]) -> list[tuple[str, float]] | None:
    """``pairs`` cut to spell ``text.strip()`` (what LightRAG caches), or ``None`` when they do not
    spell ``text`` at all."""
    if not spells(pairs, text):
        return None
    lead, trail = len(text) - len(text.lstrip()), len(text) - len(text.rstrip())
    out: list[tuple[str, float]] = []
    pos, end = 0, len(text) - trail
    for token, lp in pairs:
        nxt = pos + len(token)
        piece = token[max(0, lead - pos) : max(0, min(len(token), end - pos))]
        if piece:
            out.append((piece, lp))
        pos = nxt
    return out


def record_completion(body: Mapping[str, Any]) -> int:
    """File the log-probabilities of an OpenAI chat-completion body's choices; how many were filed."""
    filed = 0
    for choice in body.get("choices") or ():
        if not isinstance(choice, Mapping):
            continue
        content = (choice.get("message") or {}).get("content")
        pairs = logprob_pairs(choice.get("logprobs"))
        if not isinstance(content, str) or not content.strip() or not pairs:
            continue
        aligned = stripped_pairs(content, pairs)
        if aligned is None:
            log.debug("triage_lightrag: completion tokens do not spell its text; logprobs not filed")
            continue
        record_logprobs(content.strip(), aligned)
        filed += 1
    return filed


async def _record_response(response: Any) -> None:
    """httpx response hook: a JSON chat completion's log-probabilities into the registry."""
    try:
        if response.status_code != 200 or not str(response.request.url.path).endswith("/chat/completions"):
            return
        if "json" not in response.headers.get("content-type", ""):
            return  # a stream (text/event-stream) is left to the SDK untouched
        await response.aread()
        body = response.json()
        if isinstance(body, Mapping):
            record_completion(body)
    except Exception as exc:  # noqa: BLE001 - observing must never fail the host's call
        log.debug("triage_lightrag: could not read logprobs from a completion: %s", exc)


# --------------------------------------------------------------------------- the HTTP client

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def _recording_client() -> Any:
    """The event loop's shared HTTP client with :func:`_record_response` as its response hook.

    LightRAG's binding builds an ``AsyncOpenAI`` per call and closes it (and so its HTTP client)
    after the call, also between its own retries; this client ignores ``aclose`` so it can serve
    every call (and retry) of the loop, with one connection pool.
    """
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _client_class()(event_hooks={"response": [_record_response]})
        _clients[loop] = client
    return client


@functools.lru_cache(maxsize=1)
def _client_class() -> type:
    from openai import DefaultAsyncHttpxClient  # the binding's own dependency, imported by it anyway

    class RecordingHttpxClient(DefaultAsyncHttpxClient):  # type: ignore[misc, valid-type]
        """The SDK's default client, kept open across the binding's per-call ``close()``."""

        async def aclose(self) -> None:
            return None

    return RecordingHttpxClient


# --------------------------------------------------------------------------- the role function


def _asking(kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """``kwargs`` asking for log-probabilities through the recording client; ``None`` when the
    caller brought its own HTTP client (nothing to hook) or streams."""
    configs = dict(kwargs.get("openai_client_configs") or {})
    if kwargs.get("stream") or "http_client" in configs:
        return None
    configs["http_client"] = _recording_client()
    return {**kwargs, "logprobs": kwargs.get("logprobs", True), "openai_client_configs": configs}


def _refuses_logprobs(exc: BaseException) -> bool:
    """An HTTP 400 that names the ``logprobs`` parameter (the endpoint does not support it)."""
    while exc is not None:
        if getattr(exc, "status_code", None) == 400 and "logprob" in str(exc).lower():
            return True
        exc = exc.__cause__  # type: ignore[assignment]
    return False


def with_openai_logprobs(func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a lightrag-server OpenAI-compatible role function so it asks for log-probabilities and
    files them (see the module docstring); its return value is the binding's, unchanged."""
    state = {"on": True}

    @functools.wraps(func)
    async def complete(prompt: Any, *args: Any, **kwargs: Any) -> Any:
        asking = _asking(kwargs) if state["on"] else None
        if asking is None:
            return await func(prompt, *args, **kwargs)
        try:
            return await func(prompt, *args, **asking)
        except Exception as exc:
            if not _refuses_logprobs(exc):
                raise
            state["on"] = False
            log.warning(
                "triage_lightrag: the LLM endpoint refuses logprobs (%s); extraction goes on "
                "without them (TCS N/A)", exc,
            )  # fmt: skip
            return await func(prompt, *args, **kwargs)

    complete.triage_logprobs = True  # type: ignore[attr-defined]
    return complete


def request_openai_logprobs(role_llm_configs: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """lightrag-server's ``role_llm_configs`` with the ``extract`` role's function wrapped by
    :func:`with_openai_logprobs` when that role's binding is OpenAI-compatible; else as given."""
    if not role_llm_configs:
        return role_llm_configs
    cfg = role_llm_configs.get(EXTRACT_ROLE)
    func = getattr(cfg, "func", None)
    binding = (getattr(cfg, "metadata", None) or {}).get("binding")
    if func is None or binding not in OPENAI_COMPATIBLE or getattr(func, "triage_logprobs", False):
        return role_llm_configs
    return {**role_llm_configs, EXTRACT_ROLE: dataclasses.replace(cfg, func=with_openai_logprobs(func))}
