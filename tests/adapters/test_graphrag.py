"""The GraphRAG adapter against the real framework, offline.

Depends on graphrag 3.3.0 (graphrag-llm 3.3.0). Public surfaces: ``graphrag.api.build_index`` /
``local_search`` / ``global_search``, ``PipelineFactory.register``, ``register_completion`` /
``register_embedding``, ``QueryCallbacks.on_context``, ``graphrag.query.factory`` engines,
``graphrag.query.indexer_adapters``, ``graphrag.utils.api``. Private surfaces (pinned to 3.3):
``LocalSearchMixedContext._build_text_unit_context`` (overridden, its body re-implemented),
``graphrag.query.context_builder.community_context._compute_community_weights``, the context
builder attributes ``engine.context_builder`` / ``community_reports`` / ``context_builder_params``,
and the relationship ranking ``rank = int(combined_degree)``.

One tiny index (five film documents, scripted offline models) is built per module.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("graphrag")

from triage_plugins import hookimpl  # noqa: E402
from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402

CORPUS = {
    "inception.txt": "Inception was directed by Christopher Nolan. Inception was produced by Syncopy. "
    "Leonardo DiCaprio starred in Inception.",
    "nolan.txt": "Christopher Nolan was born in London. Christopher Nolan is married to Emma Thomas. "
    "Christopher Nolan directed Interstellar.",
    "interstellar.txt": "Interstellar was written by Jonathan Nolan. Interstellar was produced by Syncopy. "
    "Matthew McConaughey starred in Interstellar.",
    "syncopy.txt": "Syncopy was founded by Emma Thomas. Syncopy is headquartered in London. London is a city in England.",
    "thomas.txt": "Emma Thomas was born in London. Jonathan Nolan is married to Lisa Joy. Lisa Joy was born in Chicago.",
}
QUERY = "Who starred in Interstellar?"
LOCAL = {"top_k_entities": 1, "top_k_relationships": 1}
TABLES = ("entities", "communities", "community_reports", "text_units", "relationships")


def _sha512(text: str) -> str:
    return hashlib.sha512(text.encode("utf-8")).hexdigest()


def _tid(source: str, target: str, units: object = None) -> str:
    """The stable triple id, computed by hand: the ordered pair of titles (text units are not identity)."""
    return f"{source}|{target}"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    import graphrag.api as api
    import pandas as pd

    from triage_graphrag import observe_index
    from triage_graphrag.offline import offline_config

    root = tmp_path_factory.mktemp("graphrag")
    (root / "input").mkdir()
    for name, text in CORPUS.items():
        (root / "input" / name).write_text(text, encoding="utf-8")
    manager = TriageManager(store=root / "index.sqlite", synchronous=True, entry_points=False)
    config = offline_config(root, local_search=LOCAL, answer="last-row")
    obs = observe_index(config, manager=manager)
    results = asyncio.run(api.build_index(obs.config, callbacks=obs.callbacks))
    assert [r.workflow for r in results if r.error is not None] == []
    frames = {n: pd.read_parquet(root / "output" / f"{n}.parquet") for n in TABLES}
    return SimpleNamespace(root=root, config=config, obs=obs, manager=manager, frames=frames)


def _manager(reweight: bool = False, unit: str = "triple", defaults: bool = True) -> TriageManager:
    return TriageManager(
        store=":memory:",
        synchronous=True,
        entry_points=False,
        defaults=defaults,
        config=TriageConfig(reweight=reweight, unit=unit),  # type: ignore[arg-type]
    )


def _local(index: SimpleNamespace, manager: TriageManager, query: str = QUERY):
    from triage_graphrag import local_search

    f = index.frames
    return asyncio.run(
        local_search(
            index.config,
            f["entities"],
            f["communities"],
            f["community_reports"],
            f["text_units"],
            f["relationships"],
            None,
            2,
            "Multiple Paragraphs",
            query,
            manager=manager,
        )  # fmt: skip
    )


def _plain_local(index: SimpleNamespace, query: str = QUERY):
    import graphrag.api as api

    f = index.frames
    return asyncio.run(
        api.local_search(
            index.config,
            f["entities"],
            f["communities"],
            f["community_reports"],
            f["text_units"],
            f["relationships"],
            None,
            2,
            "Multiple Paragraphs",
            query,
        )  # fmt: skip
    )


def _global(index: SimpleNamespace, manager: TriageManager):
    from triage_graphrag import global_search

    f = index.frames
    return asyncio.run(
        global_search(
            index.config,
            f["entities"],
            f["communities"],
            f["community_reports"],
            2,
            False,
            "Multiple Paragraphs",
            QUERY,
            relationships=f["relationships"],
            text_units=f["text_units"],
            manager=manager,
        )  # fmt: skip
    )


def _pairs(context: dict) -> list[tuple[str, str]]:
    return [tuple(x) for x in context["relationships"][["source", "target"]].values]


def _same_context(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].reset_index(drop=True).equals(b[key].reset_index(drop=True)), key


class Scores:
    """A test plugin answering ``triage_rerank`` for one unit with fixed priorities per id."""

    def __init__(self, unit: str, priority) -> None:
        self.unit = unit
        self.priority = priority
        self.requests = []

    @hookimpl
    def triage_rerank(self, request):
        self.requests.append(request)
        if request.unit != self.unit:
            return None
        return [self.priority(i, r) for i, r in zip(request.ids, request.relevance, strict=True)]


class Broken:
    """Every hook raises."""

    @hookimpl
    def triage_retrieval(self, event):
        raise RuntimeError("retrieval")

    @hookimpl
    def triage_gate(self, event):
        raise RuntimeError("gate")

    @hookimpl
    def triage_generation(self, event):
        raise RuntimeError("generation")

    @hookimpl
    def triage_rerank(self, request):
        raise RuntimeError("rerank")


# --------------------------------------------------------------------------- indexing


def test_plugin_module_imports_no_graphrag() -> None:
    import subprocess
    import sys

    code = "import sys, triage_graphrag, triage_graphrag.plugin; print('graphrag' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_extraction_events_per_text_unit_with_stable_ids(index) -> None:
    events = list(index.manager.store.events(kind="extraction"))
    by_chunk = {e.chunk.id: e for e in events}
    # one event per text unit; text-unit ids are GraphRAG's content hashes (sha512 of the chunk text)
    assert set(by_chunk) == {_sha512(t) for t in CORPUS.values()}
    inception = by_chunk[_sha512(CORPUS["inception.txt"])]
    assert inception.chunk.text == CORPUS["inception.txt"]
    unit = inception.chunk.id
    assert {t.triple.id for t in inception.triples} == {
        _tid("INCEPTION", "CHRISTOPHER NOLAN", [unit]),
        _tid("INCEPTION", "SYNCOPY", [unit]),
        _tid("INCEPTION", "LEONARDO DICAPRIO", [unit]),
    }
    assert len({e.run_id for e in events}) == 1


def test_extraction_logprobs_are_those_of_the_record_tokens(index) -> None:
    from triage_graphrag.offline import _logprob

    assert index.obs.recorder.calls == len(CORPUS)  # one extraction call per chunk, no gleaning
    event = next(
        e for e in index.manager.store.events(kind="extraction") if e.chunk.text == CORPUS["syncopy.txt"]
    )
    founded = next(t for t in event.triples if t.triple.object == "EMMA THOMAS")
    # the record exactly as the offline model wrote it (triage_plugins.offline.llm.format_graphrag)
    record = next(
        r for r in _completion(CORPUS["syncopy.txt"]).split("##") if "<|>Syncopy<|>Emma Thomas<|>" in r
    )
    tokens = [t for t in re.findall(r"\w+|\s+|[^\w\s]", record) if t.strip()]
    assert founded.token_logprobs == tuple(_logprob(t) for t in tokens)
    assert all(t.token_logprobs for e in index.manager.store.events(kind="extraction") for t in e.triples)


def _completion(text: str) -> str:
    from triage_graphrag.offline import extraction_answer

    return extraction_answer(text)


def test_graph_event_matches_output_tables(index) -> None:
    (event,) = list(index.manager.store.events(kind="graph"))
    rels = index.frames["relationships"]
    expected = {_tid(r.source, r.target, list(r.text_unit_ids)) for r in rels.itertuples()}
    assert {t.id for t in event.graph.triples} == expected
    assert set(event.graph.nodes) == set(index.frames["entities"]["title"])
    london = _tid("SYNCOPY", "LONDON", [_sha512(CORPUS["syncopy.txt"])])
    assert event.graph.sources[london] == (_sha512(CORPUS["syncopy.txt"]),)
    assert event.graph.triple(london).predicate.endswith("Syncopy is headquartered in London.")
    extracted = {t.triple.id for e in index.manager.store.events(kind="extraction") for t in e.triples}
    assert extracted == {t.id for t in event.graph.triples}  # per-chunk triples carry the graph ids
    metrics = {r.name: r for r in index.manager.store.metrics(scope="graph")}
    assert 0.0 < metrics["TCS"].value < 1.0  # defined: the extraction model's log-probs were recorded
    assert metrics["DNR"].value is not None


# --------------------------------------------------------------------------- queries


def test_local_search_events_map_context_to_stable_ids(index) -> None:
    m = _manager()
    result = _local(index, m)
    response, context = result  # the graphrag.api shape
    event = result.retrieval
    rels = index.frames["relationships"].set_index(["source", "target"])
    expected = [_tid(s, t, list(rels.loc[(s, t), "text_unit_ids"])) for s, t in _pairs(context)]
    assert list(event.subgraph.triple_ids) == expected
    assert set(event.subgraph.nodes) == set(context["entities"]["entity"])
    assert [c.text for c in event.chunks] == list(context["sources"]["text"])
    assert event.mentions == ("Interstellar",) and event.grounding == {"Interstellar": "INTERSTELLAR"}
    assert event.retriever == "local" and event.query_id == result.query_id
    assert result.gate is not None and result.gate.action in ("proceed", "warn", "reroute")
    (generation,) = list(m.store.events(kind="generation"))
    assert generation.answer == response and generation.query_id == result.query_id
    names = {row.name for row in m.store.metrics(scope="query") if row.scope_id == result.query_id}
    assert {"QGR", "ERC"} <= names  # the default usage handler measured this query


def test_user_supplied_callbacks_on_plain_graphrag(index) -> None:
    import graphrag.api as api

    from triage_graphrag import query_callbacks

    f = index.frames
    m = _manager(defaults=False)
    seen = []

    class Spy:
        @hookimpl
        def triage_retrieval(self, event):
            seen.append(event)

    m.register(Spy())
    cb = query_callbacks(
        QUERY, f["entities"], f["relationships"], f["text_units"], f["communities"], manager=m
    )
    response, context = asyncio.run(
        api.local_search(
            index.config,
            f["entities"],
            f["communities"],
            f["community_reports"],
            f["text_units"],
            f["relationships"],
            None,
            2,
            "Multiple Paragraphs",
            QUERY,
            callbacks=[cb],
        )  # fmt: skip
    )
    assert [e.query_id for e in seen] == [cb.query_id]
    assert len(seen[0].subgraph.triples) == len(context["relationships"])


def test_global_search_reports_map_to_community_triples(index) -> None:
    m = _manager()
    result = _global(index, m)
    communities = index.frames["communities"].set_index("community")
    rels = index.frames["relationships"].set_index("id")
    expected = set()
    for cid in result.context["reports"]["id"]:
        for rid in communities.loc[int(cid), "relationship_ids"]:
            r = rels.loc[rid]
            expected.add(_tid(r.source, r.target, list(r.text_unit_ids)))
    assert set(result.retrieval.subgraph.triple_ids) == expected and expected
    assert result.retrieval.retriever == "global"
    assert [e.answer for e in m.store.events(kind="generation")] == [result.response]


# --------------------------------------------------------------------------- reweighting


def test_reweight_off_context_identical_to_plain_graphrag(index) -> None:
    plain_response, plain_context = _plain_local(index)
    response, context = _local(index, _manager(reweight=False))
    _same_context(context, plain_context)
    assert response == plain_response


def test_reweight_on_without_an_answer_keeps_graphrag_context(index) -> None:
    """The reweighting path (own engine + context subclass) with no plugin answering equals plain GraphRAG."""
    m = _manager(reweight=True, defaults=False)
    spy = Scores("none", lambda i, r: 0.0)
    m.register(spy)
    _, plain_context = _plain_local(index)
    _, context = _local(index, m)
    _same_context(context, plain_context)
    assert {r.unit for r in spy.requests} == {"triple", "chunk"}  # both levels asked, neither answered


def test_triplet_scores_change_the_relationships(index) -> None:
    _, plain = _plain_local(index)
    assert ("INTERSTELLAR", "CHRISTOPHER NOLAN") in _pairs(plain)
    assert ("INTERSTELLAR", "JONATHAN NOLAN") not in _pairs(plain)  # cut by top_k_relationships
    m = _manager(reweight=True, defaults=False)
    jonathan = _tid("INTERSTELLAR", "JONATHAN NOLAN", [_sha512(CORPUS["interstellar.txt"])])
    m.register(Scores("triple", lambda i, r: 1.0 if i == jonathan else 0.5))
    result = _local(index, m)
    assert ("INTERSTELLAR", "JONATHAN NOLAN") in _pairs(result.context)
    assert jonathan in result.retrieval.subgraph.triple_ids


def test_chunk_scores_change_the_sources(index) -> None:
    _, plain = _plain_local(index)
    order = list(plain["sources"]["text"])
    assert len(order) >= 2
    m = _manager(reweight=True, defaults=False)
    m.register(Scores("chunk", lambda i, r: 1.0 - r))  # reverse GraphRAG's order
    result = _local(index, m)
    assert list(result.context["sources"]["text"]) == order[::-1]
    assert [c.text for c in result.retrieval.chunks] == order[::-1]


def test_scores_change_global_report_order(index) -> None:
    plain = _global(index, _manager())
    first = list(plain.context["reports"]["id"])
    last = first[-1]
    tables_ids = {
        _tid(r.source, r.target, list(r.text_unit_ids))
        for r in index.frames["relationships"].itertuples()
        if r.id in set(index.frames["communities"].set_index("community").loc[int(last), "relationship_ids"])
    }
    m = _manager(reweight=True, defaults=False)
    m.register(Scores("triple", lambda i, r: 1.0 if i in tables_ids else 0.0))
    reordered = _global(index, m)
    assert list(reordered.context["reports"]["id"])[0] == last != first[0]


def test_handler_failures_change_nothing(index) -> None:
    plain_response, plain_context = _plain_local(index)
    m = _manager(reweight=True, defaults=False)
    m.register(Broken(), name="broken")
    result = _local(index, m)
    _same_context(result.context, plain_context)
    assert result.response == plain_response
    assert result.gate is not None and result.gate.action == "proceed"
    assert {hook for (_, hook, _) in m.failures} >= {"triage_rerank", "triage_retrieval", "triage_gate"}


def test_feedback_through_the_learner_changes_local_context(index) -> None:
    from triage_graphrag import feedback

    # triplet level: the answer comes from the last relationship; negative feedback demotes it
    m = _manager(reweight=True, unit="triple")
    contexts = []
    for _ in range(4):
        result = _local(index, m)
        contexts.append(_pairs(result.context))
        feedback(result.query_id, 0.0, manager=m)
    assert contexts[0] == _pairs(_plain_local(index)[1])  # equal scores: GraphRAG's own ranking
    assert ("INTERSTELLAR", "CHRISTOPHER NOLAN") in contexts[0]
    assert ("INTERSTELLAR", "CHRISTOPHER NOLAN") not in contexts[-1]
    assert ("INTERSTELLAR", "JONATHAN NOLAN") in contexts[-1]
    # chunk level: positive feedback on the answer moves ahead the chunk that states it (credit by
    # content: the chunk names the question's entity, the answer and the asked relation)
    m = _manager(reweight=True, unit="chunk")
    nolan = _sha512(CORPUS["nolan.txt"])
    for _ in range(3):
        result = _local(index, m, "Who directed Interstellar?")
        assert nolan in [c.id for c in result.retrieval.chunks]
        feedback(result.query_id, 1.0, manager=m)
    m.flush()
    learned = m.get_plugin("triage.feedback").model("chunk").scores.scored()
    # learned under the statement the question asks about (nolan.txt states three relations)
    assert set(learned) == {f"{nolan}#direct"} and learned[f"{nolan}#direct"] > 100  # no other chunk moved


def test_quickstart_example_runs_offline(tmp_path, capsys) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "graphrag_quickstart.py"
    spec = importlib.util.spec_from_file_location("graphrag_quickstart", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    asyncio.run(module.main(tmp_path / "project"))
    out = capsys.readouterr().out
    assert "index events: {'extraction': 5, 'graph': 1}" in out
    rounds = re.findall(r"relationships: (\[.*\])", out)
    assert len(rounds) == 4
    assert "INTERSTELLAR->CHRISTOPHER NOLAN" in rounds[0] and "INTERSTELLAR->JONATHAN NOLAN" in rounds[-1]


# --------------------------------------------------------------------------- pure parts


def test_record_logprobs_cover_only_the_record_tokens() -> None:
    from triage_graphrag.translate import record_logprobs

    content = '("entity"<|>A<|>T<|>d)\n##\n("relationship"<|>A<|>B<|>a b<|>1)\n<|COMPLETE|>'
    pieces = re.findall(r"\w+|\s+|[^\w\s]", content)
    tokens = [(t, -0.01 * i) for i, t in enumerate(pieces)]
    (rec,) = record_logprobs(content, tokens)
    assert (rec.source, rec.target, rec.description) == ("A", "B", "a b")
    first = content.index('("relationship"')
    last = content.index("1)") + 2
    expected, pos = [], 0
    for tok, lp in tokens:
        if pos >= first and pos + len(tok) <= last and tok.strip():
            expected.append(lp)
        pos += len(tok)
    assert rec.logprobs == tuple(expected)  # no <|COMPLETE|> or entity-record tokens
    assert record_logprobs(content, [("x", -0.1)]) == []  # tokens that do not spell the text: nothing


def test_context_columns_read_as_pandas_lists_them() -> None:
    import numpy as np
    import pandas as pd

    from triage_graphrag.translate import _column, _rows

    frame = pd.DataFrame(
        {
            "id": pd.array(["1", None, "3"], dtype="str"),
            "obj": pd.Series(["a", 2, None], dtype=object),
            "n": [1, 2, 3],
            "x": [0.5, np.nan, 2.0],
            "when": pd.to_datetime(["2026-01-01", None, "2026-01-03"]),
            "nullable": pd.array([1, None, 3], dtype="Int64"),
            "in_context": [True, False, True],
        }
    )
    for name in frame.columns:
        got, expected = _column(frame, name, 3), frame[name].tolist()
        assert [(type(v), repr(v)) for v in got] == [(type(v), repr(v)) for v in expected], name
    assert _column(frame, "absent", 3) == [None, None, None]
    rows = _rows({"t": frame}, "t", "id", "n")
    assert rows == [("1", 1), ("3", 3)]  # the row left out of the context is dropped


def test_priority_ranks_follow_p_and_keep_degree_order_on_ties() -> None:
    from triage_graphrag.reweight import LEVELS, priority_ranks

    # P ties for the first two: GraphRAG's degree order (7 > 3) must survive; the third wins on P
    ranks = priority_ranks([0.5, 0.5, 0.9], [3, 7, 1])
    assert ranks == [0 * 8 + 3, 0 * 8 + 7, LEVELS * 8 + 1]
    assert priority_ranks([0.2, 0.2], [5, 9]) == [5, 9]  # equal P: exactly the original degrees


def test_logprob_recorder_recognizes_only_extraction_prompts() -> None:
    from triage_graphrag.indexing import LogprobRecorder

    recorder = LogprobRecorder("-Real Data-\nText: ", "\nOutput:")
    assert recorder.chunk_text("-Real Data-\nText: Some chunk.\nOutput:") == "Some chunk."
    assert recorder.chunk_text("Summarize: Some chunk.") is None
    recorder.record("Some chunk.", "<|COMPLETE|>", None)
    assert (recorder.calls, recorder.with_logprobs, recorder.records) == (1, 0, {})


def test_feedback_through_the_learner_changes_global_report_order(index) -> None:
    from triage_graphrag import feedback

    plain_first = list(_global(index, _manager()).context["reports"]["id"])
    m = _manager(reweight=True, unit="triple")
    firsts = []
    for _ in range(15):  # the answer is the top report's point; "not helpful" demotes its triples
        result = _global(index, m)
        firsts.append(result.context["reports"]["id"].iloc[0])
        feedback(result.query_id, 0.0, manager=m)
        if firsts[-1] != plain_first[0]:
            break
    assert firsts[0] == plain_first[0]  # equal scores: GraphRAG's own order
    assert firsts[-1] != plain_first[0]  # feedback moved another report to the top


def test_triple_ids_survive_reindexing(index, tmp_path) -> None:
    import graphrag.api as api
    import pandas as pd

    from triage_graphrag import observe_index
    from triage_graphrag.offline import offline_config

    (tmp_path / "input").mkdir()
    for name, text in CORPUS.items():
        (tmp_path / "input" / name).write_text(text, encoding="utf-8")
    m = _manager()
    seen = []

    class Spy:
        @hookimpl
        def triage_graph(self, event):
            seen.append(event)

    m.register(Spy())
    obs = observe_index(offline_config(tmp_path), manager=m, logprobs=False)
    asyncio.run(api.build_index(obs.config))
    obs.close()
    again = pd.read_parquet(tmp_path / "output" / "relationships.parquet")
    assert not set(again["id"]) & set(index.frames["relationships"]["id"])  # GraphRAG: fresh uuid4s
    (first,) = list(index.manager.store.events(kind="graph"))
    assert {t.id for t in seen[0].graph.triples} == {t.id for t in first.graph.triples}  # triage: same ids
    tcs = {r.name: r for r in m.store.metrics(scope="graph")}["TCS"]
    assert tcs.value is None and tcs.reason  # no log-probabilities recorded: N/A, not a made-up value


SETTINGS = """\
completion_models:
  default_completion_model: {type: triage_offline_chat, model_provider: offline, model: chat}
embedding_models:
  default_embedding_model: {type: triage_offline_embedding, model_provider: offline, model: hash}
input_storage: {base_dir: input}
output_storage: {base_dir: output}
cache: {type: none}
vector_store: {db_uri: output/lancedb, vector_size: 256}
extract_graph: {max_gleanings: 1}
"""


def test_observed_index_command_from_a_project_root(tmp_path) -> None:
    """``python -m triage_graphrag index`` on a settings.yaml project, with one gleaning round."""
    from triage_graphrag.__main__ import main
    from triage_plugins.store import Store

    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "syncopy.txt").write_text(CORPUS["syncopy.txt"], encoding="utf-8")
    (tmp_path / "settings.yaml").write_text(SETTINGS, encoding="utf-8")
    store = tmp_path / "t.sqlite"
    assert main(["index", "--root", str(tmp_path), "--offline", "--store", str(store)]) == 0
    with Store.open(store) as s:
        (event,) = list(s.events(kind="extraction"))
    assert event.chunk.id == _sha512(CORPUS["syncopy.txt"])
    assert len(event.triples) == 3 and all(t.token_logprobs for t in event.triples)


# --------------------------------------------------------------------------- hostile plugins (issue #14)


def _answers_beside(index: SimpleNamespace, mode: str | None):
    """Local-search answers and contexts over four feedback rounds, default plugins and reweighting on,
    with a hostile plugin in ``mode`` beside them (``None``: the default plugins alone)."""
    from triage_graphrag import feedback
    from triage_plugins.adapter_kit.hostile import hostile_manager

    manager, hostile = hostile_manager(mode, reweight=True)
    seen = []
    try:
        for i in range(4):
            result = _local(index, manager)
            seen.append((result.response, _pairs(result.context), list(result.context["sources"]["text"])))
            feedback(result.query_id, 0.0 if i % 2 else 1.0, manager=manager)
            assert manager.flush(timeout=30)
        learned = manager.learned_scores("triple")
    finally:
        assert manager.close(timeout=10) == 0
    return seen, learned, manager, hostile


@pytest.fixture(scope="module")
def plain_beside(index):
    return _answers_beside(index, None)


@pytest.mark.parametrize("mode", ["raise", "exit", "garbage", "sleep"])
def test_a_hostile_plugin_changes_no_graphrag_answer_and_is_counted(index, plain_beside, mode) -> None:
    from triage_plugins.adapter_kit.hostile import MODES, failures_of

    assert mode in MODES
    seen, learned, manager, hostile = _answers_beside(index, mode)
    assert seen == plain_beside[0]
    assert learned == plain_beside[1] and learned  # the feedback learned the same
    assert hostile.calls and failures_of(manager) > 0
