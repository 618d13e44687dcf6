"""Compare runner for Microsoft GraphRAG (`triage compare --frameworks graphrag`).

Declared with ``[project.entry-points."triage.compare"] graphrag = "triage_graphrag.compare:GraphRAGRunner"``.
Indexes the corpus chunks (one input file per chunk) with ``offline_config`` and ``observe_index``
(extraction + graph events), then asks each question with the adapter's ``local_search`` or
``global_search`` under the compare query ids; gold feedback rounds with reweighting. It emits only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from triage_plugins.apps.compare import Corpus, Progress, Question, missing_package, query_id

_TABLES = ("entities", "communities", "community_reports", "text_units", "relationships")


class GraphRAGRunner:
    name = "graphrag"
    framework = "graphrag"
    modes = ("local", "global")

    def available(self) -> tuple[bool, str]:
        missing = missing_package("graphrag", "graphrag")
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
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LANCE_LOG", "error")  # lancedb's "will be created" notices
        # The offline stand-ins fill GraphRAG's token budget on purpose; its notice is not a problem.
        logging.getLogger("graphrag.query.structured_search.local_search.mixed_context").setLevel(logging.ERROR)
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(
                self._run(Path(tmp) / "project", corpus, questions, mode, manager, feedback_rounds, progress)
            )

    async def _run(self, root, corpus, questions, mode, manager, feedback_rounds, progress) -> None:
        import graphrag.api as api
        import pandas as pd

        from triage_graphrag import feedback, global_search, local_search, observe_index
        from triage_graphrag.offline import offline_config

        (root / "input").mkdir(parents=True)
        for chunk in corpus.chunks:
            name = re.sub(r"[^\w.-]+", "_", chunk.id) + ".txt"
            (root / "input" / name).write_text(chunk.text, encoding="utf-8")
        config = offline_config(root)
        tick = progress(f"graphrag/{mode}: index", 1)
        obs = observe_index(config, manager=manager)
        await api.build_index(obs.config, callbacks=obs.callbacks)
        tick()
        t = {n: pd.read_parquet(root / "output" / f"{n}.parquet") for n in _TABLES}
        for round_ in range(feedback_rounds + 1):
            tick = progress(
                f"graphrag/{mode}: questions" + (f" (round {round_})" if round_ else ""), len(questions)
            )
            answers = []
            for q in questions:
                qid = query_id(q.id, mode, round_)
                if mode == "local":
                    result = await local_search(
                        config, t["entities"], t["communities"], t["community_reports"], t["text_units"],
                        t["relationships"], None, 2, "Multiple Paragraphs", q.text, manager=manager, query_id=qid,
                    )  # fmt: skip
                else:
                    result = await global_search(
                        config, t["entities"], t["communities"], t["community_reports"], 2, False,
                        "Multiple Paragraphs", q.text, relationships=t["relationships"],
                        text_units=t["text_units"], manager=manager, query_id=qid,
                    )  # fmt: skip
                answers.append((q, qid, str(result.response)))
                tick()
            if round_ < feedback_rounds:
                for q, qid, answer in answers:
                    if q.gold is not None:
                        hit = any(a.casefold() in answer.casefold() for a in q.gold.answers)
                        feedback(qid, 1.0 if hit else 0.0, manager=manager)
                manager.flush()
