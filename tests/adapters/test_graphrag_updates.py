"""GraphRAG identities that survive updates, and learning through plain ``graphrag.api`` (issue #16).

Real graphrag 3.3 (``build_index`` standard and ``standard-update``, ``api.local_search`` /
``global_search`` / ``drift_search`` / ``basic_search``) with the offline models of
``triage_graphrag.offline``. One index per module; the update test runs GraphRAG's incremental
update pipeline on a copy of it.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("graphrag")

from triage_plugins import hookimpl  # noqa: E402
from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402

from .test_graphrag import CORPUS, LOCAL, QUERY, TABLES, _pairs, _same_context  # noqa: E402

TARGET = "INTERSTELLAR|CHRISTOPHER NOLAN"  # the relationship plain GraphRAG shows for QUERY (top_k 1)
ADDED = {"kip.txt": "Interstellar was directed by Christopher Nolan. Kip Thorne was born in Utah."}


class Events:
    """Collects the events a manager delivers."""

    def __init__(self) -> None:
        self.seen: dict[str, list] = {}

    def _add(self, kind: str, event) -> None:
        self.seen.setdefault(kind, []).append(event)

    @hookimpl
    def triage_graph(self, event):
        self._add("graph", event)

    @hookimpl
    def triage_extraction(self, event):
        self._add("extraction", event)

    @hookimpl
    def triage_retrieval(self, event):
        self._add("retrieval", event)

    @hookimpl
    def triage_generation(self, event):
        self._add("generation", event)


def _frames(root: Path) -> dict:
    import pandas as pd

    return {n: pd.read_parquet(root / "output" / f"{n}.parquet") for n in TABLES}


def _build(root: Path, inst, *, update: bool = False):
    import graphrag.api as api

    from triage_graphrag.offline import offline_config

    config = offline_config(root, local_search=LOCAL, answer="last-row")
    obs = inst.observe_index(config, method="standard-update" if update else "standard")
    results = asyncio.run(api.build_index(obs.config, is_update_run=update, callbacks=obs.callbacks))
    assert [r.workflow for r in results if r.error is not None] == []
    return config, obs


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    from triage_graphrag import instrument

    root = tmp_path_factory.mktemp("graphrag16")
    (root / "input").mkdir()
    for name, text in CORPUS.items():
        (root / "input" / name).write_text(text, encoding="utf-8")
    manager = TriageManager(store=":memory:", synchronous=True, entry_points=False)
    inst = instrument(manager=manager)
    config, _ = _build(root, inst)
    inst.uninstrument()
    return SimpleNamespace(root=root, config=config, frames=_frames(root))


def _plain(config, f: dict, kind: str, callbacks=None, query: str = QUERY):
    import graphrag.api as api

    calls = list(callbacks or [])
    if kind == "local":
        return asyncio.run(
            api.local_search(
                config,
                f["entities"],
                f["communities"],
                f["community_reports"],
                f["text_units"],
                f["relationships"],
                None,
                2,
                "Multiple Paragraphs",
                query,
                callbacks=calls,
            )  # fmt: skip
        )
    if kind == "global":
        return asyncio.run(
            api.global_search(
                config,
                f["entities"],
                f["communities"],
                f["community_reports"],
                2,
                False,
                "Multiple Paragraphs",
                query,
                callbacks=calls,
            )  # fmt: skip
        )
    if kind == "drift":
        return asyncio.run(
            api.drift_search(
                config,
                f["entities"],
                f["communities"],
                f["community_reports"],
                f["text_units"],
                f["relationships"],
                2,
                "Multiple Paragraphs",
                query,
                callbacks=calls,
            )  # fmt: skip
        )
    return asyncio.run(
        api.basic_search(config, f["text_units"], "Multiple Paragraphs", query, callbacks=calls)
    )


def _callbacks(inst, f: dict, query: str = QUERY):
    return inst.query_callbacks(query, f["entities"], f["relationships"], f["text_units"], f["communities"])


# --------------------------------------------------------------------------- pure parts


def test_keys_are_the_ordered_pair_and_old_keys_map_to_it() -> None:
    from triage_graphrag import legacy_triple_id, stable_key, triple_id

    old = legacy_triple_id("ALICE", "BOB", ["u2", "u1"])
    assert old.startswith("ALICE|BOB|") and len(old.rsplit("|", 1)[1]) == 12
    assert triple_id("ALICE", "BOB") == "ALICE|BOB" != triple_id("BOB", "ALICE")
    assert stable_key(old) == "ALICE|BOB" and stable_key("ALICE|BOB") == "ALICE|BOB"
    assert stable_key("ALICE|BOB|not-hex") == "ALICE|BOB|not-hex"  # not an old key: kept


def test_old_style_scores_are_carried_over_never_lost() -> None:
    from triage_graphrag import legacy_triple_id, migrate_legacy_scores

    m = TriageManager(store=":memory:", synchronous=True, entry_points=False)
    a, b = legacy_triple_id("ALICE", "BOB", ["u1"]), legacy_triple_id("ALICE", "BOB", ["u1", "u2"])
    m.seed_scores("triple", {a: 40.0, b: 60.0, legacy_triple_id("CAROL", "DAN", ["u3"]): 10.0})
    m.seed_scores("triple", {"EVE|FRANK": 80.0, legacy_triple_id("EVE", "FRANK", ["u4"]): 5.0})
    seeded = migrate_legacy_scores(m, ["ALICE|BOB", "EVE|FRANK", "GINA|HAL"])
    assert seeded == {"ALICE|BOB": 50.0}  # the mean of its old keys; EVE|FRANK keeps its own score
    scores = m.learned_scores("triple")
    assert scores["ALICE|BOB"] == 50.0 and scores["EVE|FRANK"] == 80.0
    assert scores[a] == 40.0 and scores[b] == 60.0  # old rows are kept
    assert migrate_legacy_scores(m, ["ALICE|BOB"]) == {}  # idempotent
    m.close()


def test_keeps_ranking_detects_order_changes_only() -> None:
    from triage_graphrag.reweight import keeps_ranking

    assert keeps_ranking([0.9, 0.5, 0.5], [3, 1, 1])  # monotone in GraphRAG's key: untouched
    assert not keeps_ranking([0.4, 0.5], [3, 1])  # P reverses the order
    assert not keeps_ranking([0.5, 0.6], [1, 1])  # P breaks a tie GraphRAG leaves to its own order


def test_a_failed_earlier_workflow_gives_a_warning(tmp_path, caplog) -> None:
    import graphrag.api as api
    from graphrag.index.workflows.factory import PipelineFactory

    from triage_graphrag import instrument
    from triage_graphrag.offline import offline_config

    async def boom(config, context):
        raise RuntimeError("disk full")

    PipelineFactory.register("triage_test_boom", boom)
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "a.txt").write_text(CORPUS["syncopy.txt"], encoding="utf-8")
    m = TriageManager(store=":memory:", synchronous=True, entry_points=False, defaults=False)
    spy = Events()
    m.register(spy)
    inst = instrument(manager=m)
    config = offline_config(tmp_path, workflows=["load_input_documents", "triage_test_boom"])
    obs = inst.observe_index(config)
    with caplog.at_level(logging.WARNING, logger="triage.graphrag.indexing"):
        results = asyncio.run(api.build_index(obs.config, callbacks=obs.callbacks))
    inst.uninstrument()
    PipelineFactory.workflows.pop("triage_test_boom", None)
    assert [r.workflow for r in results if r.error is not None] == ["triage_test_boom"]
    assert obs.error and "triage_test_boom" in obs.error and not obs.ran and spy.seen == {}
    warnings = [
        r.getMessage() for r in caplog.records if "did not reach the triage workflow" in r.getMessage()
    ]
    assert len(warnings) == 1 and "disk full" in warnings[0]


# --------------------------------------------------------------------------- plain graphrag.api


@pytest.mark.parametrize("kind", ["local", "global", "drift", "basic"])
def test_reweight_on_without_feedback_equals_plain_graphrag(project, kind) -> None:
    """With the learner on and nothing learned, what the LLM sees (and answers) is plain GraphRAG's."""
    from triage_graphrag import instrument

    plain_response, plain_context = _plain(project.config, project.frames, kind)
    m = TriageManager(
        store=":memory:", synchronous=True, entry_points=False, config=TriageConfig(reweight=True)
    )
    spy = Events()
    m.register(spy)
    inst = instrument(manager=m)
    cb = _callbacks(inst, project.frames)
    response, context = _plain(project.config, project.frames, kind, [cb])
    inst.feedback(cb.query_id, 1.0)
    inst.uninstrument()
    assert response == plain_response
    _same_context(context, plain_context)
    if kind == "global":  # GraphRAG's own occurrence weights, not P
        assert list(context["reports"]["occurrence weight"]) == list(
            plain_context["reports"]["occurrence weight"]
        )
    (retrieval,) = spy.seen["retrieval"]  # exactly one retrieval event per query, of the right kind
    assert retrieval.retriever == kind and retrieval.query_id == cb.query_id
    assert retrieval.chunks  # every kind retrieves text units
    (generation,) = spy.seen["generation"]  # the streamed answer, emitted before the feedback
    assert generation.answer == response


def test_drift_through_callbacks_gives_one_event_and_no_warning(project, caplog) -> None:
    from triage_graphrag import instrument

    m = TriageManager(store=":memory:", synchronous=True, entry_points=False)
    spy = Events()
    m.register(spy)
    inst = instrument(manager=m)
    cb = _callbacks(inst, project.frames)
    with caplog.at_level(logging.WARNING, logger="triage.graphrag"):
        _plain(project.config, project.frames, "drift", [cb])
    inst.uninstrument()
    assert [e.retriever for e in spy.seen["retrieval"]] == ["drift"]  # not one per DRIFT action
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("triage.graphrag")]
    # at most the gate's one reading of the merged event (here: DRIFT's local steps selected no
    # entity within their token budget), never one per action, and no reroute
    assert len(messages) <= 1 and not any("reroute" in msg or "failed" in msg for msg in messages)


def test_uninstrument_restores_graphrag_factories() -> None:
    import graphrag.api.query as query
    import graphrag.query.factory as factory

    from triage_graphrag import hooks, instrument

    before = hooks.users()  # instrumentors of other tests may still be instrumented
    a = instrument(store=None)
    b = instrument(store=None)
    assert hooks.users() == before + 2 and getattr(query.get_local_search_engine, "triage_hook", False)
    a.uninstrument()
    a.uninstrument()  # idempotent: released once
    assert hooks.users() == before + 1 and hooks.installed()  # b still needs them
    b.uninstrument()
    assert hooks.users() == before
    if before == 0:
        assert query.get_local_search_engine is factory.get_local_search_engine and not hooks.installed()


# --------------------------------------------------------------------------- done when (issue #16)


def test_penalties_survive_an_added_document_and_graphrag_update(project, tmp_path) -> None:
    """10 penalties through plain graphrag.api on queries that showed the relationship, one added
    document mentioning it, a real ``standard-update`` run: the key, its learned score and its
    demotion are kept."""
    from triage_graphrag import instrument
    from triage_graphrag.offline import offline_config

    root = tmp_path / "project"
    shutil.copytree(project.root, root)
    config = offline_config(root, local_search=LOCAL, answer="last-row")
    frames = _frames(root)
    plain_before = _pairs(_plain(config, frames, "local")[1])
    assert ("INTERSTELLAR", "CHRISTOPHER NOLAN") in plain_before

    # the documented switch: instrument(reweight=True), then pass query_callbacks to graphrag.api
    m = TriageManager(
        store=tmp_path / "t.sqlite", synchronous=True, entry_points=False,
        config=TriageConfig(reweight=True, unit="triple"),
    )  # fmt: skip
    spy = Events()
    m.register(spy)
    inst = instrument(manager=m)
    # ten queries answered before any rating (each shows the relationship), then ten penalties:
    # the learner only blames what a rated query showed, so this is how ten of them land on it
    asked = []
    for _ in range(10):
        cb = _callbacks(inst, frames)
        asked.append((cb.query_id, _pairs(_plain(config, frames, "local", [cb])[1])))
    assert all(context == plain_before for _, context in asked)  # no feedback yet: plain's context
    for qid, _ in asked:
        inst.feedback(qid, 0.0)
    row = m.store.get_scores("triple", [TARGET])[TARGET]
    assert row.raw == 0.0 and row.n_updates >= 5  # the penalties drove it to the scores' floor
    cb = _callbacks(inst, frames)
    assert ("INTERSTELLAR", "CHRISTOPHER NOLAN") not in _pairs(_plain(config, frames, "local", [cb])[1])
    learned = m.learned_scores("triple", [TARGET])[TARGET]
    assert learned < 100.0  # demoted (the learner starts every triple at 100)

    # one added document mentioning the relationship again, then GraphRAG's incremental update
    for name, text in ADDED.items():
        (root / "input" / name).write_text(text, encoding="utf-8")
    spy.seen.clear()
    _, obs = _build(root, inst, update=True)
    merged = _frames(root)
    row = merged["relationships"].set_index(["source", "target"]).loc[("INTERSTELLAR", "CHRISTOPHER NOLAN")]
    assert len(set(row["text_unit_ids"])) == 2  # GraphRAG merged the new mention into the relationship
    (graph,) = spy.seen["graph"]  # the merged graph, not the delta
    assert len(graph.graph.triples) == len(merged["relationships"]) > len(frames["relationships"])
    assert TARGET in {t.id for t in graph.graph.triples}
    assert len(graph.graph.sources[TARGET]) == 2  # provenance kept as data
    new_events = spy.seen["extraction"]
    assert {e.chunk.text for e in new_events} == set(ADDED.values())  # only the new text unit
    graph_ids = {t.id for t in graph.graph.triples}
    assert TARGET in {t.triple.id for e in new_events for t in e.triples}
    assert {t.triple.id for e in new_events for t in e.triples} <= graph_ids  # extraction ids = graph ids
    assert obs.events == {"extraction": 1, "graph": 1}

    assert m.learned_scores("triple", [TARGET])[TARGET] == learned  # the learned score is kept
    cb = _callbacks(inst, merged)
    after = _pairs(_plain(config, merged, "local", [cb])[1])
    inst.uninstrument()
    assert ("INTERSTELLAR", "CHRISTOPHER NOLAN") in _pairs(_plain(config, merged, "local")[1])
    assert ("INTERSTELLAR", "CHRISTOPHER NOLAN") not in after  # and it stays demoted
    m.close()


def test_observed_update_command_emits_the_merged_graph(tmp_path) -> None:
    """``python -m triage_graphrag update``: GraphRAG's update pipeline, observed, on a settings.yaml project."""
    from triage_graphrag.__main__ import main
    from triage_plugins.store import Store

    from .test_graphrag import SETTINGS

    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "syncopy.txt").write_text(CORPUS["syncopy.txt"], encoding="utf-8")
    (tmp_path / "settings.yaml").write_text(SETTINGS, encoding="utf-8")
    store = tmp_path / "t.sqlite"
    assert main(["index", "--root", str(tmp_path), "--offline", "--store", str(store)]) == 0
    (tmp_path / "input" / "more.txt").write_text("Syncopy is headquartered in London.", encoding="utf-8")
    assert main(["update", "--root", str(tmp_path), "--offline", "--store", str(store)]) == 0
    with Store.open(store) as s:
        first, second = list(s.events(kind="graph"))
        extraction = list(s.events(kind="extraction"))
    assert {t.id for t in first.graph.triples} == {t.id for t in second.graph.triples}  # same keys
    assert len(second.graph.sources["SYNCOPY|LONDON"]) == 2  # the new mention merged in, as data
    assert [e.chunk.text for e in extraction][-1] == "Syncopy is headquartered in London."


class BothLevels:
    """Answers ``triage_rerank`` for triples (one favoured) and chunks (GraphRAG's order reversed)."""

    def __init__(self, favoured: str) -> None:
        self.favoured = favoured
        self.units: list[str] = []

    @hookimpl
    def triage_rerank(self, request):
        self.units.append(request.unit)
        if request.unit == "triple":
            return [1.0 if i == self.favoured else 0.5 for i in request.ids]
        return [1.0 - r for r in request.relevance]


def test_plain_api_reweights_triples_and_chunks_together(project) -> None:
    from triage_graphrag import instrument

    _, plain = _plain(project.config, project.frames, "local")
    order = list(plain["sources"]["text"])
    assert ("INTERSTELLAR", "JONATHAN NOLAN") not in _pairs(plain) and len(order) >= 2
    m = TriageManager(
        store=None, synchronous=True, entry_points=False, defaults=False, config=TriageConfig(reweight=True)
    )
    plugin = BothLevels("INTERSTELLAR|JONATHAN NOLAN")
    m.register(plugin)
    inst = instrument(manager=m)
    _, context = _plain(project.config, project.frames, "local", [_callbacks(inst, project.frames)])
    _, untouched = _plain(project.config, project.frames, "local")  # no triage callback: plain
    inst.uninstrument()
    assert ("INTERSTELLAR", "JONATHAN NOLAN") in _pairs(context)  # triplet level
    assert set(plugin.units) == {"triple", "chunk"}
    texts = list(context["sources"]["text"])
    assert texts == order[::-1]  # chunk level: GraphRAG's order reversed
    _same_context(untouched, plain)


def test_offline_config_keeps_every_folder_under_its_root(tmp_path) -> None:
    from triage_graphrag.offline import offline_config

    root = tmp_path / "project"
    config = offline_config(root)
    folders = [
        config.input_storage.base_dir, config.output_storage.base_dir, config.update_output_storage.base_dir,
        config.reporting.base_dir, config.cache.storage.base_dir,
    ]  # fmt: skip
    assert all(Path(f).resolve().is_relative_to(root.resolve()) for f in folders), folders  # never ./cache
