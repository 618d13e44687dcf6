"""Write a plugin, run the built-in pipeline with it, and read what the default plugins measured.

Offline, a few seconds: ``python examples/custom_plugin.py``.
"""

from __future__ import annotations

from triage_plugins import TriageManager, hookimpl
from triage_plugins.offline.extractor import extract_chunk
from triage_plugins.offline.world import generate_world
from triage_plugins.reference.pipeline import ReferencePipeline


class WideRetrievalAlarm:
    """Counts queries whose retrieved subgraph is large (a cost signal, like RPC)."""

    triage_name = "wide-retrieval-alarm"

    def __init__(self, limit: int = 60) -> None:
        self.limit = limit
        self.flagged: list[str] = []

    @hookimpl
    def triage_retrieval(self, event):
        if len(event.subgraph.triples) > self.limit:
            self.flagged.append(event.query_id)


def main() -> None:
    world = generate_world(seed=3)
    with TriageManager(":memory:", entry_points=False) as manager:
        alarm = WideRetrievalAlarm()
        manager.register(alarm)
        pipeline = ReferencePipeline(manager)
        pipeline.index_chunks(world.chunks(), extract_chunk, ontology=world.ontology())
        for question in world.questions[:20]:
            answer = pipeline.ask(question.text, retriever="krag", gold=question.gold())
            print(f"{question.text:<70} -> {answer.text or '(no answer)'}")
        manager.flush()
        latest = {}  # the usage plugin re-reads the chain once the answer is in: the last row counts
        for row in manager.store.metrics(scope="query", name="signature"):
            latest[row.scope_id] = row.reason
        signatures = {sig: list(latest.values()).count(sig) for sig in set(latest.values())}
        print("\nplugins:", ", ".join(p.name for p in manager.plugins()))
        print("wide retrievals:", len(alarm.flagged), "of 20")
        print("chain signatures recorded by triage.usage:", signatures)


if __name__ == "__main__":
    main()
