"""The reference pipeline as a ``triage compare`` runner, registered by the default plugin
``triage.reference`` (:mod:`triage_plugins.reference.plugin`) as an adapter registers its own."""

from __future__ import annotations

from triage_plugins.adapter_kit.runner import RunJob, Runner, run_rounds
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import ExtractionEvent

__all__ = ["ReferenceRunner"]


class ReferenceRunner(Runner):
    """The built-in networkx pipeline (:class:`~triage_plugins.reference.pipeline.ReferencePipeline`).

    Modes are the reference retrievers of TRIAGE §5.1. The corpus is extracted ``extraction_runs``
    times (default 2, so EC is defined; the offline extractor is deterministic, so EC = 1 there) and
    the graph assembled from the first run.
    """

    name = "reference"
    framework = "reference"

    def __init__(self, *, extraction_runs: int = 2) -> None:
        from triage_plugins.reference.retrievers import RETRIEVERS

        self.modes: tuple[str, ...] = tuple(RETRIEVERS)  # type: ignore[misc]
        self.extraction_runs = extraction_runs

    def _run(self, job: RunJob) -> None:
        from triage_plugins.reference.pipeline import ReferencePipeline

        corpus, mode, manager, progress = job.corpus, job.mode, job.manager, job.progress
        if mode not in self.modes:
            raise ConfigError(f"reference: unknown mode {mode!r}; choose from {', '.join(self.modes)}")
        extract = corpus.extract
        if extract is None:
            from triage_plugins.offline.extractor import extract_chunk as extract
        pipeline = ReferencePipeline(manager, retriever=mode)
        for run in range(2, self.extraction_runs + 1):
            tick = progress(f"reference/{mode}: extraction run {run}", len(corpus.chunks))
            for chunk in corpus.chunks:
                ets = tuple(extract(chunk))
                manager.emit_extraction(
                    ExtractionEvent(self.framework, f"run-{run}", chunk, ets, "offline", 0.0)
                )
                tick()
        tick = progress(f"reference/{mode}: extraction run 1 + graph", len(corpus.chunks))
        pipeline.index_chunks(
            corpus.chunks, extract, run_id="run-1", ontology=corpus.ontology, progress=lambda n: tick()
        )
        run_rounds(
            self.name,
            mode,
            job.questions,
            lambda q, qid: pipeline.ask(q.text, query_id=qid, gold=q.gold).text,
            lambda qid, score: pipeline.feedback(qid, score, source="gold"),
            manager.flush,
            feedback_rounds=job.feedback_rounds,
            progress=progress,
        )
