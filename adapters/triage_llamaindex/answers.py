"""After the retrieval: generation events (plain and streamed) and feedback (DESIGN §3, adapter).

:class:`AnswersMixin` is the part of :class:`~triage_llamaindex.instrument.LlamaIndexInstrumentor`
that follows a query past its retrieval:

- a ``Response`` gives its ``GenerationEvent`` when the outermost query ends;
- a ``StreamingResponse`` / ``AsyncStreamingResponse`` has its token generator wrapped (the caller
  gets the same tokens, from the same attribute); the ``GenerationEvent`` is emitted when the stream
  has been read to its end (``response_gen``, ``get_response()``, ``print_response_stream()``,
  ``str(response)``, ``async_response_gen()``);
- :meth:`AnswersMixin.feedback` is the kit's ``feedback`` (the same signature), learned before it
  returns when reweighting is on, and logs, once per cause, feedback it cannot tie to what it
  observed.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from triage_plugins import FeedbackEvent, GenerationEvent

if TYPE_CHECKING:
    from triage_llamaindex.translate import KnownGraph
    from triage_plugins import TriageManager
    from triage_plugins.adapter_kit.lru import LRU

__all__ = ["AnswersMixin"]

log = logging.getLogger("triage.llamaindex")

FRAMEWORK = "llamaindex"
UNKNOWN_QUERY = "query id never retrieved through this instrumentor"
NO_ANSWER = "query has a retrieval but no answer (no generation event)"
UNREAD_STREAM = "streamed answer not read to its end (no generation event yet)"


class AnswersMixin:
    """Generation events and feedback of :class:`~triage_llamaindex.instrument.LlamaIndexInstrumentor`.

    :ivar unattributed: feedback the instrumentor could not tie to what it observed, per cause
        (each cause is logged once; the event is still sent).
    """

    manager: TriageManager
    unattributed: Counter[str]
    _answered: LRU[str, bool]  # query id -> generation emitted (False: retrieval only so far)
    _streaming: LRU[str, bool]  # query ids whose stream is not read to its end
    _query_graph: LRU[str, KnownGraph | None]
    # and, from the instrumentor and the kit's base: _ground, _guard, flush, Instrumentor.feedback

    def _emit_generation(self, query_id: str, answer: str, started: float) -> None:
        mentions, grounding = self._ground(self._query_graph.get(query_id), answer, answer=True)
        self._answered.put(query_id, True)
        self.manager.emit_generation(
            GenerationEvent(
                FRAMEWORK,
                query_id,
                answer,
                answer_mentions=mentions,
                answer_grounding=grounding,
                seconds=time.perf_counter() - started,
            )
        )

    def _follow_stream(self, response: Any, query_id: str, started: float) -> bool:
        """Wrap a streaming response's token generator: the generation event is emitted when the
        stream has been read to its end (the same tokens reach the caller, unchanged)."""
        tokens = getattr(response, "response_gen", None)
        if getattr(response, "response_txt", None) is not None or tokens is None:
            return False

        def done(parts: list[str]) -> None:
            self._streaming.pop(query_id)
            self._guard("streamed generation", self._emit_generation, query_id, "".join(parts), started)

        if hasattr(tokens, "__anext__"):
            response.response_gen = _follow_async(tokens, done)
        elif hasattr(tokens, "__next__"):
            response.response_gen = _follow_sync(tokens, done)
        else:
            return False
        self._streaming.put(query_id, True)
        return True

    # ------------------------------------------------------------------ feedback

    #: whether :meth:`feedback` waits until the learner has it: ``None`` = when the manager's
    #: reweighting is on (then the next query's ranking depends on it)
    feedback_waits: bool | None = None
    #: seconds :meth:`feedback` waits at most (a warning when they run out)
    feedback_timeout: float = 10.0

    def feedback(
        self, query_id: str, score: float, source: str = "human", raw: str | int | float | None = None
    ) -> FeedbackEvent:
        """Send a score in [0, 1] for an answered query (the kit's ``feedback``), learned before it returns.

        With reweighting on (or :attr:`feedback_waits` true) the event, and everything queued before
        it, is delivered before the call returns, so the next query is ranked with what it taught
        the learner; observe-only, it is queued as in every adapter.

        Feedback this instrumentor cannot tie to what it saw (an unknown query id, a streamed answer
        not read to its end, a query without an answer) is still sent, and logged once per cause
        (counted in :attr:`unattributed`).
        """
        self._check_attribution(query_id)
        event = super().feedback(query_id, score, source, raw)
        waits = self.manager.config.reweight if self.feedback_waits is None else self.feedback_waits
        if waits and not self.flush(self.feedback_timeout):
            log.warning(
                "feedback(%r): not learned within %s s; it stays queued", query_id, self.feedback_timeout
            )
        return event

    def _check_attribution(self, query_id: str) -> None:
        if self._streaming.get(query_id):
            cause = UNREAD_STREAM
        elif query_id not in self._answered:
            cause = UNKNOWN_QUERY
        elif not self._answered.get(query_id):
            cause = NO_ANSWER
        else:
            return
        self.unattributed[cause] += 1
        if self.unattributed[cause] == 1:
            log.warning(
                "feedback for %r: %s; sent anyway (the learner may still find it in the store); "
                "logged once per cause, counted in LlamaIndexInstrumentor.unattributed",
                query_id, cause,
            )  # fmt: skip
        else:
            log.debug("feedback for %r: %s", query_id, cause)


def _follow_sync(tokens: Iterator[str], done: Any) -> Iterator[str]:
    parts: list[str] = []
    for token in tokens:
        parts.append(token)
        yield token
    done(parts)


async def _follow_async(tokens: AsyncIterator[str], done: Any) -> AsyncIterator[str]:
    parts: list[str] = []
    async for token in tokens:
        parts.append(token)
        yield token
    done(parts)
