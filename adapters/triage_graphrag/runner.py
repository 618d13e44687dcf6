"""Compare runner for Microsoft GraphRAG (`triage compare --frameworks graphrag`).

Registered by :mod:`triage_graphrag.plugin` through ``triage_register_runners``. Indexes the corpus
chunks (one input file per chunk) with ``offline_config`` and ``observe_index`` (extraction + graph
events), then asks each question with the adapter's ``local_search`` or ``global_search`` under the
compare query ids; gold feedback rounds with reweighting
(:func:`~triage_plugins.adapter_kit.runner.arun_rounds`). It emits only. GraphRAG is imported only
inside :meth:`GraphRAGRunner.run`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import tempfile
from pathlib import Path

from triage_plugins.adapter_kit.runner import Question, RunJob, Runner, Setup, arun_rounds

_TABLES = ("entities", "communities", "community_reports", "text_units", "relationships")


class GraphRAGRunner(Runner):
    name = "graphrag"
    modes = ("local", "global")
    requires = ("graphrag", "graphrag", "graphrag")
    #: the arguments ``graphrag query`` uses by default (community level 2, "Multiple Paragraphs")
    setups = {
        "local": Setup('framework default: local_search, community_level=2, "Multiple Paragraphs"'),
        "global": Setup(
            "framework default: global_search, community_level=2, no dynamic community selection, "
            '"Multiple Paragraphs"'
        ),
    }
    #: mode -> metric -> why that row's value is not comparable with the other rows' (compare shows N/A)
    not_comparable = {
        "global": {
            "CC": "global search retrieves community reports, so K_S is every relationship of the reports' "
            "communities and CC is 1 by construction (not comparable with entity/path retrieval)",
        }
    }

    def _run(self, job: RunJob) -> None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LANCEDB_LOG", "error")  # lancedb's "will be created" notices
        # The offline stand-ins fill GraphRAG's token budget on purpose; its notice is not a problem.
        logging.getLogger("graphrag.query.structured_search.local_search.mixed_context").setLevel(logging.ERROR)
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(self._arun(Path(tmp) / "project", job))

    async def _arun(self, root: Path, job: RunJob) -> None:
        import graphrag.api as api
        import pandas as pd

        from triage_graphrag import feedback, global_search, local_search, observe_index
        from triage_graphrag.offline import offline_config

        mode, manager = job.mode, job.manager
        (root / "input").mkdir(parents=True)
        for chunk in job.corpus.chunks:
            name = re.sub(r"[^\w.-]+", "_", chunk.id) + ".txt"
            (root / "input" / name).write_text(chunk.text, encoding="utf-8")
        config = offline_config(root)
        tick = job.progress(f"graphrag/{mode}: index", 1)
        obs = observe_index(config, manager=manager)
        await api.build_index(obs.config, callbacks=obs.callbacks)
        tick()
        t = {n: pd.read_parquet(root / "output" / f"{n}.parquet") for n in _TABLES}

        async def ask(q: Question, qid: str) -> str:
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
            return str(result.response)

        await arun_rounds(
            self.name,
            mode,
            job.questions,
            ask,
            lambda qid, score: feedback(qid, score, manager=manager),
            manager.flush,
            feedback_rounds=job.feedback_rounds,
            progress=job.progress,
        )
