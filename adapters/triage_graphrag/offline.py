"""Deterministic offline model types for GraphRAG 3.3 (DESIGN §5): a scripted chat model and a hashing embedder.

GraphRAG's built-in ``mock`` completion cannot stream, so queries need a model type of their own.
:func:`register_offline_models` registers, with ``graphrag_llm``'s public factories:

- ``"triage_offline_chat"`` (:class:`OfflineChatModel`): answers each GraphRAG prompt the way a
  real model would be parsed —
  graph extraction: ``("entity"<|>NAME<|>TYPE<|>desc)##("relationship"<|>SRC<|>TGT<|>desc<|>strength)<|COMPLETE|>``
  read from the chunk in the prompt by the offline extractor, with per-token log-probabilities
  when ``logprobs=True`` is asked; gleaning: nothing more (``<|COMPLETE|>`` / ``N``); description
  summaries: the descriptions joined; community reports: JSON naming the community's entities;
  global-search map: JSON points (one per report); global reduce: the first analyst point; local
  answers (streamed or not): the description of the last relationship row in the context; DRIFT:
  the primer asks one follow-up (the question itself), each action answers as local search does,
  in DRIFT's JSON, with no further follow-ups.
- ``"triage_offline_embedding"`` (:class:`OfflineEmbedding`): character n-gram hashing vectors,
  so similarity is meaningful offline.

The extractor is :func:`triage_plugins.offline.extractor.extract_records` with
:func:`format_graphrag` (GraphRAG 3.3.0's ``GraphExtractor._process_result`` format: records joined by
``##``, ``("entity"<|>name<|>type<|>description)`` and ``("relationship"<|>source<|>target<|>description<|>strength)``,
closed by ``<|COMPLETE|>``; the predicate travels as the first words of the relationship description,
``"directed_by: <sentence>"``) on the synthetic world's sentence templates; without
them, a small rule reader over sentences ``Subject relation Object.`` (capitalized names) — enough for the tests and the
quickstart corpus. None of this fakes a measurement: the log-probabilities are scripted, and say so
(``model="triage-offline"``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from triage_plugins.adapter_kit.offline import NOTHING_FOUND, Record, answer_from_context, entity_rows

__all__ = [
    "CHAT_TYPE",
    "EMBEDDING_TYPE",
    "OfflineChatModel",
    "OfflineEmbedding",
    "extract_records",
    "extraction_answer",
    "format_graphrag",
    "format_records",
    "hash_embed",
    "offline_config",
    "register_offline_models",
]

CHAT_TYPE = "triage_offline_chat"
EMBEDDING_TYPE = "triage_offline_embedding"
DIMENSION = 256
TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"
COMPLETION_DELIMITER = "<|COMPLETE|>"

_NAME = r"[A-Z][\w'-]*(?: [A-Z][\w'-]*)*"
_SENTENCE = re.compile(rf"({_NAME}) ((?:[a-z][\w'-]* ?)+?) ({_NAME})\s*[.!?]")
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def extract_records(text: str) -> list[tuple[str, str, str, str]]:
    """``(subject, relation, object, sentence)`` per sentence ``Subject relation Object.`` of ``text``."""
    return [(m.group(1), m.group(2).strip(), m.group(3), m.group(0)) for m in _SENTENCE.finditer(text)]


def format_records(records: list[tuple[str, str, str, str]]) -> str:
    """GraphRAG's tuple record format for entities and relationships (one relationship per record)."""
    lines: list[str] = []
    seen: set[str] = set()
    for s, _, o, _ in records:
        for name in (s, o):
            if name.upper() not in seen:
                seen.add(name.upper())
                lines.append(f'("entity"<|>{name.upper()}<|>ENTITY<|>{name} is mentioned in the text)')
    for s, _, o, sentence in records:
        lines.append(f'("relationship"<|>{s.upper()}<|>{o.upper()}<|>{sentence}<|>1)')
    return "##\n".join(lines) + "\n<|COMPLETE|>"


def format_graphrag(records: Sequence[Record], *, strength: int = 1) -> str:
    """GraphRAG's ``("entity"<|>…)`` / ``("relationship"<|>…)`` tuples joined by ``##``."""
    d = TUPLE_DELIMITER
    rows = [f'("entity"{d}{name}{d}{type_}{d}{desc})' for name, type_, desc in entity_rows(records)]
    rows += [
        f'("relationship"{d}{r.subject}{d}{r.object}{d}{r.predicate}: {r.description}{d}{strength})'
        for r in records
    ]
    return f"\n{RECORD_DELIMITER}\n".join(rows) + ("\n" if rows else "") + COMPLETION_DELIMITER


def extraction_answer(text: str) -> str:
    """The records of ``text`` in GraphRAG's format: the project's offline extractor when installed, else ours."""
    try:
        from triage_plugins.adapter_kit.offline import extract_records as shared_records
    except ImportError:
        return format_records(extract_records(text))
    return format_graphrag(shared_records(text))


_EMBEDDERS: dict[int, Any] = {}


def hash_embed(texts: list[str], dimension: int = DIMENSION) -> list[list[float]]:
    """Unit vectors of hashed character n-grams: :class:`triage_plugins.offline.embedder.HashingEmbedder`
    when installed, else a local equivalent (character 3-grams and words, signed hashing)."""
    try:
        from triage_plugins.adapter_kit.offline import HashingEmbedder
    except ImportError:
        return [_local_embed(t, dimension) for t in texts]
    if dimension not in _EMBEDDERS:
        _EMBEDDERS[dimension] = HashingEmbedder(dim=dimension)
    return [[float(x) for x in row] for row in _EMBEDDERS[dimension].embed(texts)]


def _local_embed(text: str, dimension: int) -> list[float]:
    vec = [0.0] * dimension
    words = re.findall(r"\w+", text.casefold())
    grams = words + [f" {w} "[i : i + 3] for w in words for i in range(len(w))]
    for g in grams:
        h = int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little")
        vec[h % dimension] += 1.0 if (h >> 63) else -1.0
    norm = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [x / norm for x in vec]


# --------------------------------------------------------------------------- prompt routing


def _text_of(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def _messages(kwargs: dict[str, Any]) -> list[Any]:
    messages = kwargs.get("messages", [])
    return [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)


def _extraction_input(prompt: str) -> str | None:
    marker = prompt.rfind("-Real Data-")
    if marker < 0:
        return None
    start = prompt.find("Text: ", marker)
    end = prompt.rfind("\n######################\nOutput:")
    if start < 0 or end < start:
        return None
    return prompt[start + len("Text: ") : end]


def _answer(messages: list[Any], response_format: Any, style: str = "reader") -> str:
    first_user = next((_text_of(m) for m in messages if m.get("role") == "user"), "")
    last = _text_of(messages[-1]) if messages else ""
    system = next((_text_of(m) for m in messages if m.get("role") == "system"), "")
    if len(messages) > 1 and last.startswith("It appears some entities"):
        return "N"
    if len(messages) > 1 and last.startswith("MANY entities"):
        return "<|COMPLETE|>"
    chunk = _extraction_input(first_user)
    if chunk is not None:
        return extraction_answer(chunk)
    fields = getattr(response_format, "model_fields", None) or {}
    if "intermediate_answer" in fields:  # DRIFT primer: one follow-up, the question again
        query = first_user.split("For the query:", 1)[-1].split("The top-ranked community summaries:", 1)[0]
        return json.dumps(
            {
                "intermediate_answer": "# Primer\n" + query.strip(),
                "score": 50,
                "follow_up_queries": [f"{query.strip()} In detail?"],
            }
        )
    if "Description List:" in first_user:
        tail = first_user.rsplit("Description List:", 1)[1].split("#######", 1)[0]
        return " ".join(re.findall(r'"([^"]+)"', tail)) or tail.strip()
    if response_format is not None or "# Report Structure" in first_user:
        data = first_user.rsplit("# Real Data", 1)[-1]
        names = sorted(set(re.findall(r"\n\d+,([A-Z][A-Z0-9 '&-]+),", data)))[:4]
        title = " and ".join(names) or "Community"
        return json.dumps(
            {
                "title": f"Community of {title}",
                "summary": f"Entities {', '.join(names)} and their relationships.",
                "findings": [{"summary": n, "explanation": f"{n} belongs to this community."} for n in names],
                "rating": float(len(names)),
                "rating_explanation": "number of entities",
            }
        )
    if '"points"' in system:  # global map: one point per report row "id|title|..."
        rows = [r.split("|") for r in system.split("---Data tables---", 1)[-1].splitlines()]
        points = [
            {"description": cells[1], "score": 100 - i}
            for i, cells in enumerate(c for c in rows if len(c) >= 3 and c[0].strip().isdigit())
        ]
        return json.dumps({"points": points[:3] or [{"description": "nothing", "score": 0}]})
    if "'follow_up_queries': List[str]" in system:  # a DRIFT action's local search: JSON, no follow-ups
        answer = _local_answer(system, last, style)
        return json.dumps({"response": answer, "score": 50, "follow_up_queries": []})
    lines = system.splitlines()
    for i, line in enumerate(lines):  # global reduce: the first analyst's point
        if line.startswith("Importance Score:") and i + 1 < len(lines):
            return lines[i + 1].strip()
    return _local_answer(system, last, style)


def _local_answer(system: str, question: str, style: str) -> str:
    """Local search's answer: the offline reader (``"reader"``) or the last relationship row's description."""
    rows = [
        c
        for c in (line.split("|") for line in system.splitlines())
        if len(c) >= 4 and c[0].isdigit() and c[1].isupper()
    ]
    if rows:
        if style == "reader":  # the shared offline reader over the descriptions and sources
            answer = answer_from_context(question, system)
            if answer != NOTHING_FOUND:
                return answer
        return rows[-1][3]  # "last-row": the last relationship that made it into the context
    return "I do not know."


def _logprob(token: str) -> float:
    """A scripted token log-probability in (-0.5, 0]: deterministic, not a model measurement."""
    h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=2).digest(), "little")
    return -round((h % 50) / 100.0, 2)


class OfflineChatModel:
    """A scripted ``LLMCompletion`` for GraphRAG prompts (see the module docstring).

    Built by ``graphrag_llm``'s completion factory from a ``ModelConfig`` whose ``type`` is
    :data:`CHAT_TYPE`. Counts its calls in :attr:`calls`.
    """

    calls = 0

    def __init__(self, *, model_config: Any, tokenizer: Any, metrics_store: Any, **_: Any) -> None:
        self._tokenizer = tokenizer
        self._metrics_store = metrics_store
        self.model_config = model_config

    def _response(self, content: str, logprobs: bool) -> Any:
        from graphrag_llm.utils import create_completion_response

        response = create_completion_response(content)
        if logprobs:
            from openai.types.chat.chat_completion import ChoiceLogprobs
            from openai.types.chat.chat_completion_token_logprob import ChatCompletionTokenLogprob

            tokens = [
                ChatCompletionTokenLogprob(
                    token=t, logprob=_logprob(t), bytes=list(t.encode()), top_logprobs=[]
                )
                for t in _TOKEN.findall(content)
            ]
            response.choices[0].logprobs = ChoiceLogprobs(content=tokens)
        return response

    def _stream(self, content: str) -> Iterator[Any]:
        from graphrag_llm.types import LLMChoiceChunk, LLMChoiceDelta, LLMCompletionChunk

        for piece in re.findall(r"\S+\s*", content) or [""]:
            yield LLMCompletionChunk(
                id="offline",
                object="chat.completion.chunk",
                created=0,
                model="triage-offline",
                choices=[LLMChoiceChunk(index=0, delta=LLMChoiceDelta(content=piece), finish_reason=None)],
            )

    def completion(self, /, **kwargs: Any) -> Any:
        type(self).calls += 1
        response_format = kwargs.pop("response_format", None)
        style = str((self.model_config.model_extra or {}).get("answer", "reader"))
        content = _answer(_messages(kwargs), response_format, style)
        if kwargs.get("stream"):
            return self._stream(content)
        response = self._response(content, bool(kwargs.get("logprobs")))
        if response_format is not None:
            from graphrag_llm.utils import structure_completion_response

            response.formatted_response = structure_completion_response(response.content, response_format)
        return response

    async def completion_async(self, /, **kwargs: Any) -> Any:
        result = self.completion(**kwargs)
        if not kwargs.get("stream"):
            return result

        async def agen() -> AsyncIterator[Any]:
            for chunk in result:
                yield chunk

        return agen()

    @property
    def metrics_store(self) -> Any:
        return self._metrics_store

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer


class OfflineEmbedding:
    """A hashing ``LLMEmbedding`` (:func:`hash_embed`), built from a ``ModelConfig`` of type :data:`EMBEDDING_TYPE`."""

    def __init__(self, *, model_config: Any, tokenizer: Any, metrics_store: Any, **_: Any) -> None:
        self._tokenizer = tokenizer
        self._metrics_store = metrics_store
        self.dimension = int((model_config.model_extra or {}).get("dimension", DIMENSION))

    def embedding(self, /, **kwargs: Any) -> Any:
        from graphrag_llm.types import LLMEmbedding, LLMEmbeddingResponse, LLMEmbeddingUsage

        texts = kwargs.get("input") or []
        if isinstance(texts, str):
            texts = [texts]
        return LLMEmbeddingResponse(
            object="list",
            model="triage-offline",
            data=[
                LLMEmbedding(object="embedding", index=i, embedding=vector)
                for i, vector in enumerate(hash_embed(list(texts), self.dimension))
            ],
            usage=LLMEmbeddingUsage(prompt_tokens=0, total_tokens=0),
        )

    async def embedding_async(self, /, **kwargs: Any) -> Any:
        return self.embedding(**kwargs)

    @property
    def metrics_store(self) -> Any:
        return self._metrics_store

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer


def offline_config(root: Any, *, answer: str = "reader", **overrides: Any) -> Any:
    """A ``GraphRagConfig`` for an offline index under ``root`` (input/, output/, update_output/, lancedb/,
    logs/; cache off).

    Uses the offline model types (registered here), a raw-graph snapshot, small chunks and no
    gleaning. ``answer`` picks how the offline chat model answers local search: ``"reader"`` (the
    shared offline extractive reader over the context) or ``"last-row"`` (the description of the
    last relationship in the context — it names what GraphRAG ranked last in, handy to test
    feedback). ``overrides`` are merged into the top-level config fields.
    """
    if answer not in ("reader", "last-row"):
        raise ValueError(f"answer must be 'reader' or 'last-row', got {answer!r}")
    from pathlib import Path

    from graphrag.config.models.graph_rag_config import GraphRagConfig
    from graphrag_llm.config import ModelConfig

    register_offline_models()
    root = Path(root).resolve()
    fields: dict[str, Any] = {
        "completion_models": {
            "default_completion_model": ModelConfig(
                type=CHAT_TYPE, model_provider="offline", model="chat", answer=answer
            )
        },
        "embedding_models": {
            "default_embedding_model": ModelConfig(
                type=EMBEDDING_TYPE, model_provider="offline", model="hash"
            )
        },
        "input_storage": {"base_dir": str(root / "input")},
        "output_storage": {"base_dir": str(root / "output")},
        "update_output_storage": {"base_dir": str(root / "update_output")},
        "reporting": {"base_dir": str(root / "logs")},
        "cache": {
            "type": "none",
            "storage": {"type": "file", "base_dir": str(root / "cache")},
        },  # never ./cache
        "vector_store": {"db_uri": str(root / "lancedb"), "vector_size": DIMENSION},
        "snapshots": {"raw_graph": True},
        "chunking": {"size": 200, "overlap": 0},
        "extract_graph": {"max_gleanings": 0},
        "concurrent_requests": 4,
    }
    fields.update(overrides)
    return GraphRagConfig(**fields)


def _as_abc(cls: type, base: type) -> type:
    """``cls`` as a subclass of GraphRAG's abstract base (created lazily: importing this module stays cheap)."""
    return type(cls.__name__, (cls, base), {"__init__": cls.__init__, "__module__": cls.__module__})


_registered = False


def register_offline_models() -> None:
    """Register :data:`CHAT_TYPE` and :data:`EMBEDDING_TYPE` with graphrag_llm's factories (idempotent)."""
    global _registered
    if _registered:
        return
    from graphrag_llm.completion import LLMCompletion, register_completion
    from graphrag_llm.embedding import LLMEmbedding, register_embedding

    register_completion(CHAT_TYPE, _as_abc(OfflineChatModel, LLMCompletion))
    register_embedding(EMBEDDING_TYPE, _as_abc(OfflineEmbedding, LLMEmbedding))
    _registered = True
