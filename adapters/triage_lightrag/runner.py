"""Compare runner for LightRAG (`triage compare --frameworks lightrag`).

Registered by :mod:`triage_lightrag.plugin` through ``triage_register_runners``. Drives a fresh offline
LightRAG instance (``triage_lightrag.testing.build_rag``) over the corpus chunks: insert (extraction +
graph events via the instrumentation), each question in one query mode with the compare query ids, then
gold feedback rounds with reweighting (:func:`~triage_plugins.adapter_kit.runner.arun_rounds`). It emits
only; compare scores the events. LightRAG is imported only inside :meth:`LightRAGRunner.run`.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import uuid

from triage_plugins.adapter_kit.runner import Question, RunJob, Runner, Setup, arun_rounds


class LightRAGRunner(Runner):
    name = "lightrag"
    modes = ("local", "global", "hybrid", "mix", "naive")
    requires = ("lightrag", "lightrag", "lightrag-hku")
    # enable_rerank=False changes nothing here: with no reranker configured LightRAG skips reranking
    setups = {
        mode: Setup(
            f"framework default: QueryParam(mode={mode!r}), no reranker configured "
            "(documents inserted one at a time, for a reproducible graph order)"
        )
        for mode in modes
    }

    def _run(self, job: RunJob) -> None:
        asyncio.run(self._arun(job))

    async def _arun(self, job: RunJob) -> None:
        from lightrag import QueryParam

        from triage_lightrag import instrument
        from triage_lightrag.testing import build_rag

        mode = job.mode
        quiet = not logging.getLogger().isEnabledFor(logging.INFO)  # the CLI without -v
        with tempfile.TemporaryDirectory() as tmp:
            if quiet:  # LightRAG sets INFO on its own logger at import and again at init
                logging.getLogger("lightrag").setLevel(logging.WARNING)
            # a fresh workspace per run: LightRAG keeps per-workspace state in process-wide storage
            # one document at a time: with LightRAG's default of 2 in parallel, the order in which
            # entities and edges enter the graph (and so local mode's ties) varies run to run
            rag = await build_rag(
                tmp,
                [],
                insert=False,
                workspace=f"compare-{mode}-{uuid.uuid4().hex[:8]}",
                max_parallel_insert=1,
            )
            if quiet:
                logging.getLogger("lightrag").setLevel(logging.WARNING)
            inst = instrument(rag, manager=job.manager, reweight=job.feedback_rounds > 0)

            async def ask(q: Question, qid: str) -> str:
                with inst.query(qid):
                    # no reranker is configured offline (triplet-level learning needs none)
                    return str(await rag.aquery(q.text, QueryParam(mode=mode, enable_rerank=False)))

            try:
                tick = job.progress(f"lightrag/{mode}: insert", 1)
                await rag.ainsert([c.text for c in job.corpus.chunks])
                inst.flush()
                tick()
                await arun_rounds(
                    self.name,
                    mode,
                    job.questions,
                    ask,
                    lambda qid, score: inst.feedback(qid, score, source="gold"),
                    inst.aflush,
                    feedback_rounds=job.feedback_rounds,
                    progress=job.progress,
                )
                inst.flush()
            finally:
                inst.uninstrument()
                await rag.finalize_storages()
