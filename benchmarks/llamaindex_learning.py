"""Does the README's LlamaIndex engine learn? (issue #16) — this tree against an earlier revision.

For each question of the README prelude's corpus, plain and streaming, on the README engine
``index.as_query_engine(node_postprocessors=[TriagePostprocessor()])`` (LlamaIndex's defaults:
``include_text=True``; the learner's ``unit="triple"``) with ``reweight=True`` and the offline
first-line reader: how many bad feedbacks until the triple on top of the context leaves the top
(capped at ``--rounds``), and how many triple scores the learner holds afterwards. Then: how many
chunk ids are identical across two builds of the same documents, and how many chunks a retrieval
event lists from another index built in the same process.

Each revision runs in its own interpreter; the earlier one with ``adapters/triage_llamaindex`` read
from git (``git show REV:path``, nothing in the checkout changes)::

    python benchmarks/llamaindex_learning.py --old 9741cda
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "adapters/triage_llamaindex"
TEXTS = ("Nolan directed Inception.", "Nolan was born in London.", "Nolan directed Interstellar.")
OTHER_INDEX = (
    "Nolan directed Inception. Caine starred in Inception.",
    "Nolan was born in London. Nolan directed Tenet.",
)
QUESTIONS = (
    "Where was Nolan born?",
    "Who directed Inception?",
    "Tell me about Nolan",
    "Who directed Interstellar?",
)


def _offline() -> tuple[object, object]:
    """The README prelude's models, and a builder of the README's index over ``texts``."""
    import logging

    from llama_index.core import Document, PropertyGraphIndex, Settings

    from triage_llamaindex import TriageExtractionTap, TriageLLMPathExtractor
    from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM

    logging.disable(logging.WARNING)
    llm = OfflineLLM()
    Settings.llm, Settings.embed_model = llm, OfflineEmbedding()

    def build(texts=TEXTS):
        docs = [Document(text=t) for t in texts]
        return PropertyGraphIndex.from_documents(
            docs, kg_extractors=[TriageLLMPathExtractor(llm=llm), TriageExtractionTap()]
        )

    return llm, build


def _top(response) -> str:
    from triage_llamaindex.translate import parse_triples

    if hasattr(response, "response_gen"):
        "".join(response.response_gen)
    return next(t.id for n in response.source_nodes for t in parse_triples(n.node.get_content(), None))


def _learning(build, question: str, streaming: bool, rounds: int) -> dict:
    """Bad feedbacks until the top triple of the README engine's context leaves the top."""
    from triage_llamaindex import TriagePostprocessor, instrument

    with tempfile.TemporaryDirectory() as tmp:
        inst = instrument(store=str(Path(tmp) / "t.sqlite"), reweight=True)
        try:
            engine = build().as_query_engine(streaming=streaming, node_postprocessors=[TriagePostprocessor()])
            with inst.query() as qid:
                first = _top(engine.query(question))
            moved = None
            for k in range(1, rounds + 1):
                inst.feedback(qid, 0.0)
                inst.flush()
                with inst.query() as qid:
                    if _top(engine.query(question)) != first:
                        moved = k
                        break
            learned = len(inst.manager.learned_scores("triple"))
        finally:
            inst.uninstrument()
    return {"streaming": streaming, "question": question, "moved_after": moved, "scores": learned}


def _identities(build) -> dict:
    """Chunk ids kept across a rebuild; chunks a retrieval event lists from another index."""
    from triage_llamaindex import instrument
    from triage_plugins import hookimpl

    class Events:
        def __init__(self) -> None:
            self.extraction: list = []
            self.retrieval: list = []

        @hookimpl
        def triage_extraction(self, event):
            self.extraction.append(event.chunk.id)

        @hookimpl
        def triage_retrieval(self, event):
            self.retrieval.append([c.id for c in event.chunks])

    events = Events()
    inst = instrument()
    inst.manager.register(events)
    try:
        build()
        build()
        inst.flush()
        n = len(TEXTS)
        out = {"rebuild_identical": [len(set(events.extraction[:n]) & set(events.extraction[n:])), n]}
        events.extraction.clear()
        a = build(TEXTS[:2])
        inst.flush()
        own_a = set(events.extraction)
        build(OTHER_INDEX)
        for question in QUESTIONS:
            for include_text in (False, True):
                a.as_query_engine(include_text=include_text).query(question)
        inst.flush()
    finally:
        inst.uninstrument()
    listed = sum(len(chunks) for chunks in events.retrieval)
    foreign = sum(1 for chunks in events.retrieval for c in chunks if c not in own_a)
    out["other_index_chunks"] = [foreign, listed]
    return out


def child(rounds: int) -> dict:
    """Measure in this interpreter (whichever ``triage_llamaindex`` it imports)."""
    _, build = _offline()
    learning = [_learning(build, q, streaming, rounds) for streaming in (False, True) for q in QUESTIONS]
    return {"learning": learning, **_identities(build)}


def run(revision: str | None, rounds: int) -> dict:
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    with tempfile.TemporaryDirectory() as tmp:
        if revision is not None:
            target = Path(tmp) / "triage_llamaindex"
            target.mkdir()
            names = subprocess.run(
                ["git", "ls-tree", "--name-only", f"{revision}:{PACKAGE}"], cwd=ROOT, check=True,
                capture_output=True, text=True,
            ).stdout.split()  # fmt: skip
            for name in names:
                blob = subprocess.run(["git", "show", f"{revision}:{PACKAGE}/{name}"], cwd=ROOT, check=True,
                                      capture_output=True).stdout  # fmt: skip
                (target / name).write_bytes(blob)
            env["PYTHONPATH"] = tmp + os.pathsep + env.get("PYTHONPATH", "")
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--rounds", str(rounds)], env=env, check=True,
            capture_output=True, text=True,
        )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="git revision to compare with (default: this tree only)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.rounds)))
        return
    results = {"this tree": run(None, args.rounds)}
    if args.old:
        results[args.old] = run(args.old, args.rounds)
    for name, r in results.items():
        print(f"== {name}")
        for row in r["learning"]:
            mode = "streaming" if row["streaming"] else "plain    "
            moved = row["moved_after"] if row["moved_after"] is not None else f">{args.rounds}"
            print(f"  {mode} {row['question']:<28} top triple left the top after {moved} bad feedbacks; "
                  f"{row['scores']} triple scores learned")  # fmt: skip
        same, total = r["rebuild_identical"]
        foreign, listed = r["other_index_chunks"]
        print(f"  chunk ids identical across two builds: {same}/{total}")
        print(f"  retrieval-event chunks from the other index: {foreign}/{listed}")


if __name__ == "__main__":
    main()
