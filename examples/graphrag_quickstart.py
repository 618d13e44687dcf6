"""GraphRAG + triage, offline: observe an index, observe queries, learn from feedback.

Runs without network or API keys: the chat and embedding models are the scripted offline stand-ins
of ``triage_graphrag.offline``; swap ``offline_config`` for your own ``GraphRagConfig`` to use real ones.

    python examples/graphrag_quickstart.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm stays offline

import graphrag.api as api
import pandas as pd

from triage_graphrag import GraphRAGInstrumentor
from triage_graphrag.offline import offline_config

DOCS = {
    "inception.txt": "Inception was directed by Christopher Nolan. Inception was produced by Syncopy. "
    "Leonardo DiCaprio starred in Inception.",
    "nolan.txt": "Christopher Nolan was born in London. Christopher Nolan is married to Emma Thomas. "
    "Christopher Nolan directed Interstellar.",
    "interstellar.txt": "Interstellar was written by Jonathan Nolan. Interstellar was produced by Syncopy. "
    "Matthew McConaughey starred in Interstellar.",
    "syncopy.txt": "Syncopy was founded by Emma Thomas. Syncopy is headquartered in London. London is a city in England.",
    "thomas.txt": "Emma Thomas was born in London. Jonathan Nolan is married to Lisa Joy. Lisa Joy was born in Chicago.",
}
QUESTION = "Who starred in Interstellar?"


async def main(root: Path) -> None:
    (root / "input").mkdir(parents=True)
    for name, text in DOCS.items():
        (root / "input" / name).write_text(text, encoding="utf-8")
    # "last-row": the offline chat model answers with the last relationship in its context, so a
    # bad rating demotes exactly what GraphRAG put in front of it
    config = offline_config(root, local_search={"top_k_entities": 1, "top_k_relationships": 1}, answer="last-row")

    # reweight=True: the default feedback learner answers triage_rerank, GraphRAG's ranking follows P
    inst = GraphRAGInstrumentor().instrument(store=root / "triage.sqlite", reweight=True, unit="triple")

    # 1. index: extraction events per text unit (with token log-probs) and a graph event
    obs = inst.observe_index(config)
    await api.build_index(obs.config, callbacks=obs.callbacks)
    print("index events:", obs.events)

    # 2. query: same parameters as graphrag.api.local_search, same (response, context) result
    tables = {n: pd.read_parquet(root / "output" / f"{n}.parquet") for n in
              ("entities", "communities", "community_reports", "text_units", "relationships")}  # fmt: skip
    for round_ in range(4):
        with inst.query(f"round-{round_}") as query_id:
            result = await inst.local_search(
                config, tables["entities"], tables["communities"], tables["community_reports"],
                tables["text_units"], tables["relationships"], None, 2, "Multiple Paragraphs", QUESTION,
            )  # fmt: skip
        rels = [f"{s}->{t}" for s, t in result.context["relationships"][["source", "target"]].values]
        print(
            f"round {round_}: gate={result.gate.action} answer={result.response!r}\n  relationships: {rels}"
        )
        # 3. feedback: this answer was not helpful; the learner lowers the contribution of its triples
        inst.feedback(query_id, 0.0)
        inst.flush()  # events are delivered by a background worker: let the learner catch up

    inst.flush()
    print("store:", inst.manager.store.counts())
    inst.uninstrument()  # closes the observation and the manager it created

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp) / "project"))
