"""Offline stand-ins that let a real LightRAG 1.5.7 instance run without a network (DESIGN §5).

Used by the adapter's tests, example and benchmark; useful to anyone who wants to try the adapter
before wiring a real model:

- :class:`ByteTokenizer`: one token per UTF-8 byte (LightRAG's default tokenizer downloads tiktoken
  data, so an explicit one is required offline);
- :func:`hashing_embedding`: the core's :class:`~triage_plugins.offline.embedder.HashingEmbedder`
  wrapped in LightRAG's ``EmbeddingFunc``;
- :class:`ScriptedLightRAGLLM`: an ``llm_model_func`` that answers LightRAG's prompts — extraction
  (the core's rule-based extractor, formatted as LightRAG ``<|#|>`` records), keyword JSON,
  description summaries and a plain answer built from the retrieved context;
- :func:`build_rag`: a fresh, initialized instance in its own ``working_dir`` and ``workspace``.
- :func:`postgres_settings`: the ``POSTGRES_*`` variables LightRAG's PostgreSQL storages read, for a URL;
- :func:`server_args` and :func:`upload_and_wait`: ``lightrag-server``'s parsed arguments for an
  offline app, and a document uploaded to a running app and waited for.

Importing this module imports LightRAG (never ``lightrag.llm.*``, which pip-installs at import).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from triage_lightrag.offline import scripted_extractor
from triage_plugins.adapter_kit.logprobs import LogprobText, capture_logprobs
from triage_plugins.adapter_kit.offline import HashingEmbedder, answer_from_context, query_names

__all__ = [
    "ByteTokenizer",
    "ScriptedLightRAGLLM",
    "build_rag",
    "hashing_embedding",
    "offline_embedding_functions",
    "offline_server_functions",
    "offline_tokenizer",
    "postgres_settings",
    "server_args",
    "upload_and_wait",
]

_WORD = re.compile(r"\b[a-z]{4,}\b")
_STOP = frozenset(
    re.findall(
        r"\w+",
        "what which where when who whom whose that this with from have does did also were was been "
        "into about than then them they their there is the and for are",
    )
)


class ByteTokenizer:
    """One token per UTF-8 byte: deterministic, thread-safe, survives ``copy.deepcopy``."""

    def encode(self, content: str) -> list[int]:
        return list(content.encode("utf-8"))

    def decode(self, tokens: list[int]) -> str:
        return bytes(tokens).decode("utf-8", errors="ignore")


def offline_tokenizer() -> Any:
    """LightRAG's ``Tokenizer`` over :class:`ByteTokenizer`."""
    from lightrag.utils import Tokenizer

    return Tokenizer("bytes", ByteTokenizer())


def hashing_embedding(dim: int = 128) -> Any:
    """LightRAG's ``EmbeddingFunc`` over the core's hashing embedder."""
    from lightrag.utils import EmbeddingFunc

    embedder = HashingEmbedder(dim=dim)

    async def embed(texts: list[str], **_: Any) -> np.ndarray:
        return embedder.embed(texts)

    return EmbeddingFunc(embedding_dim=dim, func=embed, max_token_size=8192, model_name=f"hashing-{dim}")


def _query_keywords(query: str) -> dict[str, list[str]]:
    low = [name for name in query_names(query) if name.lower() not in _STOP]  # one rule for every stand-in
    high = list(dict.fromkeys(w for w in _WORD.findall(query) if w not in _STOP))
    return {"high_level_keywords": high, "low_level_keywords": low}


class ScriptedLightRAGLLM:
    """A deterministic ``llm_model_func`` for LightRAG 1.5.7.

    :param known_chunks: the corpus texts, so the extractor recognises the input in a prompt.
    :param logprobs: return extraction completions as :class:`~triage_plugins.adapter_kit.logprobs.LogprobText`
        with one made-up, deterministic log-probability per whitespace-delimited token (for testing
        the log-probability path; a real model's values are what TCS is for).
    :param answer: ``"reader"`` (default) answers with the offline extractive reader over the
        retrieved context; ``"list"`` names the first three entities of the context (a context-
        dependent answer that names what LightRAG ranked first, handy to test feedback).
    """

    def __init__(
        self, known_chunks: Iterable[str] = (), *, logprobs: bool = False, answer: str = "reader"
    ) -> None:
        if answer not in ("reader", "list"):
            raise ValueError(f"answer must be 'reader' or 'list', got {answer!r}")
        self.extractor = scripted_extractor(known_chunks)
        self.logprobs = logprobs
        self.answer_style = answer
        self.calls: dict[str, int] = {"extract": 0, "keywords": 0, "summary": 0, "answer": 0, "glean": 0}
        self._last = ""

    async def __call__(
        self,
        prompt: str,
        system_prompt: str | None = None,
        history_messages: Sequence[dict[str, str]] | None = None,
        stream: bool = False,
        **_: Any,
    ) -> Any:
        text = self.complete(prompt, system_prompt, history_messages)
        if stream and self._last == "answer":
            return _pieces(text)
        return text

    def complete(
        self,
        prompt: str,
        system_prompt: str | None = None,
        history_messages: Sequence[dict[str, str]] | None = None,
    ) -> str:
        self._last = ""
        if "high_level_keywords" in prompt and "User Query:" in prompt:
            self.calls["keywords"] += 1
            query = prompt.rsplit("User Query:", 1)[1].strip().splitlines()[0]
            return json.dumps(_query_keywords(query))
        if history_messages:  # gleaning: nothing more to add
            self.calls["glean"] += 1
            return "<|COMPLETE|>"
        if "---Input Text---" in prompt:
            self.calls["extract"] += 1
            text = self.extractor.complete(prompt)
            return _with_logprobs(text) if self.logprobs else text
        if "Description List" in prompt:
            self.calls["summary"] += 1
            body = prompt.split("```", 2)[1] if prompt.count("```") >= 2 else prompt
            return " ".join(
                json.loads(line).get("description", "")
                for line in body.strip().splitlines()
                if line.strip().startswith("{")
            )
        self.calls["answer"] += 1
        self._last = "answer"
        if self.answer_style == "list":
            return _list_answer(system_prompt or "")
        return answer_from_context(prompt, system_prompt or "")


async def _pieces(text: str) -> AsyncIterator[str]:
    for piece in re.findall(r"\S+\s*", text):
        yield piece


def _with_logprobs(text: str) -> LogprobText:
    tokens = re.findall(r"\S+|\s+", text)
    return LogprobText(text, tuple((tok, -0.001 * (1 + len(tok) % 7)) for tok in tokens))


def _list_answer(context: str) -> str:
    """A plain answer that depends on the retrieved context: the first entities it lists."""
    names = re.findall(r'"entity":\s*"([^"]+)"', context)
    if not names:
        return "I found nothing relevant in the knowledge base."
    return "According to the knowledge base: " + ", ".join(names[:3]) + "."


async def build_rag(
    working_dir: str | Path,
    texts: Iterable[str],
    *,
    workspace: str = "triage",
    llm: ScriptedLightRAGLLM | None = None,
    insert: bool = True,
    **kwargs: Any,
) -> Any:
    """A fresh LightRAG instance (storages initialized), optionally with ``texts`` inserted.

    The answer cache is off (it ignores context) and gleaning is off (the scripted LLM has nothing
    more to add); ``kwargs`` override any LightRAG field.
    """
    from lightrag import LightRAG

    texts = list(texts)
    llm = llm or ScriptedLightRAGLLM(texts)
    options: dict[str, Any] = {
        "working_dir": str(working_dir),
        "workspace": workspace,
        "llm_model_func": capture_logprobs(llm),
        "embedding_func": hashing_embedding(),
        "tokenizer": offline_tokenizer(),
        "enable_llm_cache": False,
        "entity_extract_max_gleaning": 0,
        "cosine_better_than_threshold": 0.0,
    }
    options.update(kwargs)
    rag = LightRAG(**options)
    await rag.initialize_storages()
    if insert and texts:
        await rag.ainsert(texts)
    return rag


def offline_server_functions(args: Any = None) -> dict[str, Any]:
    """``LightRAG(...)`` overrides for :mod:`triage_lightrag.server` without a network
    (``TRIAGE_LIGHTRAG_FUNCS=triage_lightrag.testing:offline_server_functions``): the scripted LLM
    (it reads the chunk out of LightRAG's extraction prompt), the hashing embedder, the byte
    tokenizer, and no answer cache (it ignores context)."""
    return {
        "llm_model_func": capture_logprobs(ScriptedLightRAGLLM()),
        "embedding_func": hashing_embedding(),
        "tokenizer": offline_tokenizer(),
        "enable_llm_cache": False,
        "entity_extract_max_gleaning": 0,
        "cosine_better_than_threshold": 0.0,
    }


def offline_embedding_functions(args: Any = None) -> dict[str, Any]:
    """Like :func:`offline_server_functions` but without an ``llm_model_func``: the server's own
    LLM binding (``--llm-binding openai`` pointed at a local OpenAI-compatible server, say) writes
    the extractions and answers; only the embedder and tokenizer are offline."""
    return {
        "embedding_func": hashing_embedding(),
        "tokenizer": offline_tokenizer(),
        "enable_llm_cache": False,
        "entity_extract_max_gleaning": 0,
        "cosine_better_than_threshold": 0.0,
    }


def postgres_settings(url: str) -> dict[str, str]:
    """LightRAG's ``POSTGRES_*`` settings naming the database at ``url`` (its PostgreSQL storages read
    their connection from them; a password is required even under trust authentication)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return {
        "POSTGRES_HOST": parts.hostname or "127.0.0.1",
        "POSTGRES_PORT": str(parts.port or 5432),
        "POSTGRES_USER": parts.username or "postgres",
        "POSTGRES_PASSWORD": parts.password or "unused",
        "POSTGRES_DATABASE": parts.path.lstrip("/"),
    }


def server_args(working_dir: str | Path, input_dir: str | Path, workspace: str) -> Any:
    """lightrag-server's own parsed arguments for an app of ``workspace`` (its parser reads
    ``sys.argv``, restored after): the ``openai`` bindings, whose functions ``--triage-funcs`` /
    ``TRIAGE_LIGHTRAG_FUNCS`` replace offline (:func:`offline_server_functions`)."""
    import sys

    from lightrag.api.config import parse_args

    saved = sys.argv
    sys.argv = [
        "lightrag-server", "--working-dir", str(working_dir), "--input-dir", str(input_dir),
        "--llm-binding", "openai", "--embedding-binding", "openai", "--workspace", workspace,
    ]  # fmt: skip
    try:
        return parse_args()
    finally:
        sys.argv = saved


def upload_and_wait(client: Any, text: str, name: str, *, seconds: float = 60.0) -> None:
    """POST ``text`` to the app's ``/documents/text`` (``client``: a test or HTTP client of it) and
    wait until every document of its track is ``processed`` (uploads are processed in the background);
    an ``AssertionError`` when the upload is refused or not processed within ``seconds``."""
    import time

    r = client.post("/documents/text", json={"text": text, "file_source": name})
    assert r.status_code == 200, r.text
    track = r.json()["track_id"]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        docs = client.get(f"/documents/track_status/{track}").json().get("documents") or []
        if docs and all(str(d.get("status")).lower().endswith("processed") for d in docs):
            return
        time.sleep(0.05)
    raise AssertionError(f"documents of {track} were not processed in {seconds} s")
