"""Compare runner for LightRAG (`triage compare --frameworks lightrag`).

Declared with ``[project.entry-points."triage.compare"] lightrag = "triage_lightrag.compare:LightRAGRunner"``.
Drives a fresh offline LightRAG instance (``triage_lightrag.testing.build_rag``) over the corpus chunks:
insert (extraction + graph events via the instrumentation), each question in one query mode with the
compare query ids, then gold feedback rounds with reweighting. It emits only; compare scores the events.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import uuid
from collections.abc import Sequence
from typing import Any

from triage_plugins.apps.compare import Corpus, Progress, Question, missing_package, query_id


class LightRAGRunner:
    name = "lightrag"
    framework = "lightrag"
    modes = ("local", "global", "hybrid", "mix", "naive")

    def available(self) -> tuple[bool, str]:
        missing = missing_package("lightrag", "lightrag", "lightrag-hku")
        return missing is None, missing or ""

    def retriever_of(self, mode: str) -> str:
        return mode

    def run(
        self,
        corpus: Corpus,
        questions: Sequence[Question],
        mode: str,
        manager: Any,
        *,
        feedback_rounds: int,
        seed: int,
        progress: Progress,
    ) -> None:
        asyncio.run(self._run(corpus, questions, mode, manager, feedback_rounds, progress))

    async def _run(self, corpus, questions, mode, manager, feedback_rounds, progress) -> None:
        from lightrag import QueryParam

        from triage_lightrag import instrument
        from triage_lightrag.testing import build_rag

        with tempfile.TemporaryDirectory() as tmp:
            # a fresh workspace per run: LightRAG keeps per-workspace state in process-wide storage
            rag = await build_rag(tmp, [], insert=False, workspace=f"compare-{mode}-{uuid.uuid4().hex[:8]}")
            if not logging.getLogger().isEnabledFor(logging.INFO):
                logging.getLogger("lightrag").setLevel(logging.WARNING)  # LightRAG re-arms INFO at init
            inst = instrument(rag, manager=manager, reweight=feedback_rounds > 0)
            try:
                tick = progress(f"lightrag/{mode}: insert", 1)
                await rag.ainsert([c.text for c in corpus.chunks])
                inst.flush()
                tick()
                for round_ in range(feedback_rounds + 1):
                    tick = progress(
                        f"lightrag/{mode}: questions" + (f" (round {round_})" if round_ else ""),
                        len(questions),
                    )
                    answers = []
                    for q in questions:
                        qid = query_id(q.id, mode, round_)
                        with inst.query(qid):
                            # no reranker is configured offline (triplet-level learning needs none)
                            answer = await rag.aquery(q.text, QueryParam(mode=mode, enable_rerank=False))
                        answers.append((q, qid, str(answer)))
                        tick()
                    if round_ < feedback_rounds:
                        for q, qid, answer in answers:
                            if q.gold is not None:
                                hit = any(a.casefold() in answer.casefold() for a in q.gold.answers)
                                inst.feedback(qid, 1.0 if hit else 0.0, source="gold")
                        await inst.aflush()
                inst.flush()
            finally:
                inst.uninstrument()
                await rag.finalize_storages()
