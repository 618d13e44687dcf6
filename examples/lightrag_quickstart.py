"""LightRAG quickstart: instrument an existing instance, ask, give feedback, read the diagnosis.

Runs offline in a few seconds: the LightRAG instance is built with the project's stand-ins (scripted
LLM, hashing embedder, byte tokenizer). With your own deployment, skip ``build_rag`` and pass your
initialized ``LightRAG`` to ``instrument`` (``triage_lightrag.instrument(rag, ...)`` is the same shortcut).

    python examples/lightrag_quickstart.py
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
from pathlib import Path

from lightrag import QueryParam

from triage_lightrag import LightRAGInstrumentor
from triage_lightrag.testing import build_rag
from triage_plugins.offline.world import generate_world


async def main() -> None:
    world = generate_world(0, n_documents=12, n_questions=6)
    with tempfile.TemporaryDirectory() as tmp:
        rag = await build_rag(tmp, [d.text for d in world.documents])  # <- your LightRAG instance
        inst = LightRAGInstrumentor().instrument(rag, store=Path(tmp) / "triage.sqlite", reweight=True)
        answers = {}
        for question in world.questions:
            with inst.query(question.id):
                answer = await rag.aquery(question.text, QueryParam(mode="hybrid"))  # LightRAG's own str
            correct = any(a in answer for a in question.answers)
            inst.feedback(question.id, 1.0 if correct else 0.0, source="gold")
            answers[question] = answer
        written = await inst.aflush()  # deliver events, learn, write triage_score onto the edges
        for question, answer in answers.items():
            # The default gate only records its decision (warn mode); it never changes the answer.
            decision = inst.gate_decision(question.id)
            action = decision.action if decision else "no decision"
            sys.stdout.write(f"{question.id}  {question.text}\n    -> {answer}  [gate: {action}]\n")
        sys.stdout.write(f"\nlearned scores written to {written} graph edges\n")
        store = inst.manager.store
        final = {row.scope_id: row for row in store.metrics(scope="query", name="signature")}  # last row wins
        for qid, row in final.items():
            sys.stdout.write(f"{qid:8} signature: {row.reason}  (failed link: {row.details.get('failed')})\n")
        inst.uninstrument()  # restores every wrapped attribute, closes the manager it created
        await rag.finalize_storages()


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("lightrag").setLevel(logging.ERROR)
    asyncio.run(main())
