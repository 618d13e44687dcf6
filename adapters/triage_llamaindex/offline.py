"""Deterministic offline stand-ins shaped as LlamaIndex components (DESIGN §5).

Thin LlamaIndex wrappers around the core's offline parts (:mod:`triage_plugins.offline`):

- :class:`OfflineLLM` — a ``CustomLLM`` answering the three prompts a PropertyGraphIndex sends:
  triplet extraction (the core's rule-based :func:`~triage_plugins.offline.extractor.
  extract_records` on the chunk found in the prompt, formatted by
  :func:`format_llamaindex` as ``(subject, predicate, object)`` lines (what LlamaIndex 0.14's
  ``default_parse_triplets_fn`` reads),
  with per-token log-probabilities when ``logprobs=True``), synonym expansion (the capitalized
  names of the query as :func:`~triage_plugins.offline.keywords.query_names` reads them, possessives
  stripped, ``^``-separated) and answering (extractive: from the first ``s -> p -> o``
  line of the context, the endpoint the question does not name).
- :class:`OfflineEmbedding` — the core's character n-gram
  :class:`~triage_plugins.offline.embedder.HashingEmbedder` (``MockEmbedding`` gives every text the
  same vector, so similarity would be meaningless).

The log-probabilities are a fixed rule (``-0.01 × token length``), not a measurement: they exist
so the log-probability path can be exercised and checked by hand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata, LogProb
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from pydantic import Field, PrivateAttr

from triage_plugins.adapter_kit import normalize_label
from triage_plugins.adapter_kit.offline import (
    NOTHING_FOUND,
    HashingEmbedder,
    Record,
    answer_from_context,
    extract_records,
    find_chunk_text,
    query_names,
)

__all__ = ["INPUT_MARKER", "OfflineEmbedding", "OfflineLLM", "format_llamaindex", "token_logprob", "tokens"]

INPUT_MARKER = re.compile(r"\nText: ((?:(?!\nText: ).)*?)\n(?:Triplets|Output):\s*\Z", re.DOTALL)
"""Where LlamaIndex's triplet-extraction prompt holds the chunk (the last ``Text:`` before the answer)."""


def _plain(text: str) -> str:
    # LlamaIndex splits a triplet on commas and stops at the first ")": keep them out of the fields.
    return re.sub(r"\s+", " ", re.sub(r"[,()]", " ", text)).strip()


def format_llamaindex(records: Sequence[Record]) -> str:
    """LlamaIndex's ``(subject, predicate, object)`` lines; the predicate is the record's relation."""
    return "\n".join(f"({_plain(r.subject)}, {_plain(r.predicate)}, {_plain(r.object)})" for r in records)


_TOKEN = re.compile(r"\S+|\s+")
_CONTEXT_MARK = "Context information is below."


def tokens(text: str) -> list[str]:
    """The offline LLM's tokens: runs of non-space and runs of space."""
    return _TOKEN.findall(text)


def token_logprob(token: str) -> float:
    """The offline LLM's log-probability of a token: ``-0.01 × len(token)``."""
    return -0.01 * len(token)


class OfflineLLM(CustomLLM):
    """Scripted LLM for PropertyGraphIndex prompts (see the module docstring).

    :param extractor: chunk text -> records (default: the core's rule-based extractor).
    :param logprobs: attach per-token log-probabilities to extraction completions.
    :param answer: ``"reader"`` answers a query with the shared offline extractive reader over the
        retrieved context; ``"first-line"`` (the default, so a bad rating demotes exactly the first
        triplet the engine handed it) with the first ``s -> p -> o`` line's other endpoint.
    """

    logprobs: bool = Field(default=True)
    answer: str = Field(default="first-line")
    model_name: str = Field(default="triage-offline")
    _extractor: Callable[[str], Sequence[Record]] = PrivateAttr()

    def __init__(self, extractor: Callable[[str], Sequence[Record]] = extract_records, **data: Any) -> None:
        super().__init__(**data)
        self._extractor = extractor

    @classmethod
    def class_name(cls) -> str:
        return "OfflineLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model_name, is_chat_model=False)

    def _respond(self, prompt: str) -> CompletionResponse:
        if "Triplets:" in prompt:
            text = find_chunk_text(prompt, markers=(INPUT_MARKER,))
            out = format_llamaindex(self._extractor(text)) if text else ""
            lps = (
                [[LogProb(token=t, logprob=token_logprob(t))] for t in tokens(out)] if self.logprobs else None
            )
            return CompletionResponse(text=out, logprobs=lps)
        if "KEYWORDS:" in prompt and "QUERY:" in prompt:
            query = prompt.rsplit("QUERY:", 1)[1].split("----", 1)[0]
            return CompletionResponse(text="^".join(query_names(query)))
        context, _, query = prompt.partition("Query:")
        if _CONTEXT_MARK in context:
            context = context.split(_CONTEXT_MARK, 1)[1]
        if self.answer == "reader":  # the shared offline reader, from the retrieved context only
            answer = answer_from_context(query, context)
            if answer != NOTHING_FOUND:
                return CompletionResponse(text=answer)
        asked = normalize_label(query)
        for line in context.splitlines():
            parts = [p.strip() for p in line.split(" -> ")]
            if len(parts) == 3:
                named = normalize_label(parts[2]) in asked
                return CompletionResponse(text=parts[0] if named else parts[2])
        return CompletionResponse(text="I don't know.")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self._respond(prompt)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        response = self._respond(prompt)

        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text=response.text, delta=response.text, logprobs=response.logprobs)

        return gen()


class OfflineEmbedding(BaseEmbedding):
    """The core's hashing embedder as a LlamaIndex embedding (stable across runs and processes)."""

    dim: int = Field(default=128)
    _embedder: HashingEmbedder = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._embedder = HashingEmbedder(dim=self.dim)

    @classmethod
    def class_name(cls) -> str:
        return "OfflineEmbedding"

    def _vector(self, text: str) -> list[float]:
        return self._embedder.embed([text])[0].tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)
