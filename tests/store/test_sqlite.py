"""Tests of the SQLite trace + score store (DESIGN §7)."""

from __future__ import annotations

import math
import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest

from triage_plugins.contract.errors import StoreError
from triage_plugins.contract.events import (
    Chunk,
    ExtractedTriple,
    ExtractionEvent,
    FeedbackEvent,
    GateDecision,
    GenerationEvent,
    Gold,
    GraphEvent,
    RerankRequest,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.contract.events import Path as KGPath
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg.ontology import Ontology
from triage_plugins.metrics.result import na, ok
from triage_plugins.store import MIGRATIONS, SCHEMA_VERSION, MetricRow, ScoreRow, Store

T1 = Triple.of("Inception", "directed_by", "Christopher Nolan", subject_type="Film", object_type="Person")
T2 = Triple.of("Interstellar", "directed_by", "Chris Nolan")


def one_of_each_event() -> list:
    """A small valid event of every kind the hooks carry."""
    chunk = Chunk(
        "c1", "doc1", "Inception was directed by Christopher Nolan.", {"section": "intro", "sentence": 2}
    )
    return [
        ExtractionEvent(
            "lightrag",
            "ext-run-1",
            chunk,
            (ExtractedTriple(T1, (-0.1, -0.25), "directed by Christopher Nolan"), ExtractedTriple(T2)),
            model="scripted",
            temperature=0.0,
        ),
        GraphEvent(
            "lightrag",
            GraphView(
                [T1, T2], nodes=["Lonely"], labels={"Inception": "Inception (2010)"}, sources={T1.id: ["c1"]}
            ),
            aliases={"Chris Nolan": "Christopher Nolan", "Nobody": None},
            ontology=Ontology(classes=("Film", "Person"), disjoint=(("Film", "Person"),)),
        ),
        RetrievalEvent(
            "lightrag",
            "q1",
            "Did the director of Inception also direct Interstellar?",
            mentions=("Inception", "Interstellar"),
            grounding={"Inception": "Inception", "Interstellar": None},
            subgraph=Subgraph((T1, T2), nodes=("Lonely",)),
            paths=(KGPath((T1.id, T2.id), 0.75),),
            chunks=(chunk,),
            expanded_nodes=12,
            seconds=0.004,
            retriever="local",
            gold=Gold(answers=("Christopher Nolan",), paths=((T1,),), entities=("Inception",)),
        ),
        GenerationEvent(
            "lightrag",
            "q1",
            "Yes, Christopher Nolan.",
            answer_mentions=("Christopher Nolan",),
            answer_grounding={"Christopher Nolan": "Christopher Nolan"},
            prompt_tokens=321,
            seconds=0.2,
        ),
        FeedbackEvent.from_rating("lightrag", "q1", 4),
        RerankRequest(
            "lightrag", "who directed Inception", "triple", (T1.id, T2.id), (0.9, 0.1), query_id="q1"
        ),
        GateDecision("warn", "ERC below 0.67", {"ERC": 0.5, "TCS": None}, {"top_k": 120}),
    ]


@pytest.fixture
def store(tmp_path: Path):
    s = Store.open(tmp_path / "t.sqlite")
    yield s
    s.close()


# --------------------------------------------------------------------------- opening


def test_open_by_path_url_and_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nested = tmp_path / "a" / "b" / "s.sqlite"
    with Store.open(nested) as s:
        assert nested.is_file()
        assert s.path == nested
        assert s.url == f"sqlite:///{nested.resolve()}"
        assert s.schema_version == SCHEMA_VERSION == 8
        s.set_param("x", 1)
    # sqlite:////absolute (SQLAlchemy convention) reopens the same file
    with Store.open(f"sqlite:///{nested}") as s:
        assert s.get_param("x") == 1
    monkeypatch.chdir(tmp_path)
    with Store.open("sqlite:///rel/r.sqlite") as s:
        s.set_param("y", 2)
    assert (tmp_path / "rel" / "r.sqlite").is_file()
    with Store.open(":memory:") as m:
        assert m.path is None and m.url == ":memory:"
        m.set_param("z", 3)
        assert m.get_param("z") == 3
    same = Store.open(":memory:")
    assert Store.open(same) is same
    same.close()


def test_file_is_wal_with_normal_sync(store: Store) -> None:
    raw = sqlite3.connect(store.path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()
    with store._lease() as handle:  # per-connection settings are only visible on our connection
        assert handle.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert handle.db.execute("PRAGMA busy_timeout").fetchone()[0] == 30000


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://user:secret@127.0.0.1:1/triage",
        "postgres://127.0.0.1:1/x",
        "postgresql+psycopg://127.0.0.1:1/d",
    ],
)
def test_postgresql_urls_open_the_postgres_backend(url: str) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as info:
        Store.open(url)  # nothing listens on port 1: a clear error, not a local SQLite folder
    assert "secret" not in str(info.value)  # credentials are never echoed
    assert not Path("postgresql:").exists()


@pytest.mark.parametrize("url", ["mysql://h/d", "sqlite://relative.db", "sqlite:///x.db?mode=ro", ""])
def test_bad_urls_raise(url: str) -> None:
    with pytest.raises(StoreError):
        Store.open(url)


def test_not_a_database_names_the_path(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.sqlite"
    bogus.write_text("this is a text file, certainly not SQLite\n" * 100)
    with pytest.raises(StoreError, match="not a SQLite database") as info:
        Store.open(bogus)
    assert str(bogus) in str(info.value)
    assert bogus.read_text().startswith("this is a text file")  # left untouched


def test_newer_schema_asks_to_upgrade(tmp_path: Path) -> None:
    newer = tmp_path / "newer.sqlite"
    raw = sqlite3.connect(newer)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(StoreError, match="upgrade triage-plugins") as info:
        Store.open(newer)
    assert "99" in str(info.value)


def test_other_applications_database_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    raw = sqlite3.connect(other)
    raw.execute("PRAGMA application_id = 12345")
    raw.execute("CREATE TABLE events (x)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="another application"):
        Store.open(other)


def test_foreign_tables_without_application_id_are_refused_untouched(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    raw = sqlite3.connect(other)
    raw.execute("CREATE TABLE events (x)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="not a triage store"):
        Store.open(other)
    raw = sqlite3.connect(other)
    try:  # the failed migration was rolled back completely
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 0
        names = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert names == {"events"}
    finally:
        raw.close()


def test_empty_file_is_migrated(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with Store.open(empty) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert s.counts() == {"runs": 0, "events": 0, "metrics": 0, "scores": 0, "params": 0, "blobs": 0, "parts": 0}


def test_version_1_file_is_migrated_keeping_its_data(tmp_path: Path) -> None:
    old = tmp_path / "v1.sqlite"
    raw = sqlite3.connect(old, isolation_level=None)
    for statement in MIGRATIONS[0]:
        raw.execute(statement)
    raw.execute("PRAGMA user_version = 1")
    raw.execute(
        "INSERT INTO scores (unit, id, raw, n_updates, updated_at) VALUES ('triple', 't1', 130.5, 7, 1.0)"
    )
    raw.close()
    with Store.open(old) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert s.get_scores("triple") == {"t1": ScoreRow(130.5, 7, 1.0)}
        s.set_param("alpha", 0.3)  # the params table arrived with migration 2
        assert s.add_score("triple", "t1", 1.5) == 132.0
    raw = sqlite3.connect(old)
    try:
        indexes = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"events_by_kind", "metrics_by_scope_name"} <= indexes
    finally:
        raw.close()


def test_concurrent_first_open_migrates_once(tmp_path: Path) -> None:
    path = tmp_path / "race.sqlite"
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def opener() -> None:
        try:
            barrier.wait()
            with Store.open(path) as s:
                s.add_score("chunk", "c", 1.0)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Store.open(path) as s:
        assert s.get_scores("chunk") == {"c": ScoreRow(104.0, 4, s.get_scores("chunk")["c"].updated_at)}


# --------------------------------------------------------------------------- events


def test_every_event_kind_round_trips(store: Store) -> None:
    run = store.start_run("demo", {"corpus": "synthetic", "seed": 7})
    events = one_of_each_event()
    for event in events:
        store.record_event(event, run_id=run)
    back = list(store.events())
    assert back == events
    assert [e.to_json() for e in back] == [e.to_json() for e in events]
    assert {e.kind for e in back} == {
        "extraction",
        "graph",
        "retrieval",
        "generation",
        "feedback",
        "rerank",
        "gate",
    }
    graph_back = next(store.events(kind="graph"))
    assert graph_back.graph == events[1].graph
    assert graph_back.graph.sources == {T1.id: ("c1",)}


def test_event_filters(store: Store) -> None:
    run_a = store.start_run("demo")
    run_b = store.start_run("compare")
    events = one_of_each_event()
    store.record_events(events, run_id=run_a)
    other = FeedbackEvent("graphrag", "q2", 0.0, "gold")
    store.record_event(other, run_id=run_b)
    store.record_event(FeedbackEvent("graphrag", "q3", 1.0, "llm"))  # no run
    assert [e.kind for e in store.events(run_id=run_a)] == [e.kind for e in events]
    assert list(store.events(run_id=run_b)) == [other]
    assert [e.query_id for e in store.events(kind="feedback")] == ["q1", "q2", "q3"]
    assert [e.query_id for e in store.events(kind=FeedbackEvent, framework="graphrag")] == ["q2", "q3"]
    assert [e.kind for e in store.events(query_id="q1")] == ["retrieval", "generation", "feedback", "rerank"]
    assert list(store.events("feedback", run_a, framework="graphrag")) == []
    with pytest.raises(StoreError, match="unknown event kind"):
        store.events(kind="retrievals")


def test_events_iterate_across_pages_in_order(store: Store) -> None:
    events = [FeedbackEvent("f", f"q{i}", (i % 5) / 4, "gold") for i in range(1203)]
    assert store.record_events(events) == 1203
    back = [e.query_id for e in store.events()]
    assert back == [f"q{i}" for i in range(1203)]


def test_unknown_run_id_and_non_events_are_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="unknown run id 'nope'"):
        store.record_event(FeedbackEvent("f", "q", 0.5), run_id="nope")
    with pytest.raises(StoreError, match="expects a triage event"):
        store.record_event({"event": "feedback"})  # type: ignore[arg-type]
    assert store.counts()["events"] == 0


def test_unicode_and_long_strings_survive(store: Store) -> None:
    long_text = "Ω≈ç√ 北京 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🎬 مرحبا e\u0301 " * 40000  # about 1 MB, astral plane and combining marks
    query = "Wer führte Regie bei „Inception“? 🎥 — 誰が監督？\x00\u2028end"
    event = RetrievalEvent("lightrag", "q-ü-北", query, chunks=(Chunk("c", "d", long_text),))
    store.record_event(event)
    (back,) = list(store.events(query_id="q-ü-北"))
    assert back.query == query
    assert back.chunks[0].text == long_text
    assert len(back.chunks[0].text) == len(long_text)
    store.record_metric("query", "q-ü-北", "QGR", None, "no mention grounded: " + long_text)
    assert store.metrics(scope_id="q-ü-北")[0].reason == "no mention grounded: " + long_text
    store.set_param("名前", {"ключ": "值 🎯"})
    assert store.get_param("名前") == {"ключ": "值 🎯"}
    store.add_score("triple", "Amélie|directed_by|Jean-Pierre Jeunet 🎞", 2.0)
    assert (
        store.get_scores("triple", ["Amélie|directed_by|Jean-Pierre Jeunet 🎞"])[
            "Amélie|directed_by|Jean-Pierre Jeunet 🎞"
        ].raw
        == 102.0
    )


# --------------------------------------------------------------------------- metrics


def test_metric_rows_keep_values_reasons_and_details(store: Store) -> None:
    run = store.start_run("demo")
    store.record_metric("query", "q1", "ERC", 0.5, run_id=run, framework="lightrag", retriever="local", n=4)
    store.record_metric(
        "chunk",
        "c1",
        "TCS",
        None,
        "extractor exposes no token log-probabilities",
        run_id=run,
        framework="lightrag",
    )
    store.record_metric("query", "q1", "RHD", None, "entities disconnected in K_S", details={"ell": math.inf})
    rows = store.metrics()
    assert [(r.scope, r.scope_id, r.name, r.value) for r in rows] == [
        ("query", "q1", "ERC", 0.5),
        ("chunk", "c1", "TCS", None),
        ("query", "q1", "RHD", None),
    ]
    assert rows[0].n == 4 and rows[0].retriever == "local" and rows[0].run_id == run
    assert rows[1].reason == "extractor exposes no token log-probabilities"
    assert rows[2].details["ell"] == math.inf and rows[2].run_id is None
    assert all(r.ts is not None and r.ts > 1.6e9 for r in rows)
    assert [r.name for r in store.metrics(scope="query")] == ["ERC", "RHD"]
    assert [r.name for r in store.metrics(name="TCS")] == ["TCS"]
    assert [r.name for r in store.metrics(run_id=run)] == ["ERC", "TCS"]
    assert [r.name for r in store.metrics("query", "ERC", run)] == ["ERC"]


def test_metric_rows_from_results_in_a_batch(store: Store) -> None:
    run = store.start_run("demo")
    rows = [
        MetricRow.from_result("query", "q1", ok("ERC", 2 / 3, n=3, missing=1), framework="mine"),
        MetricRow.from_result("graph", "g", na("SCR", "no confidence source")),
    ]
    assert store.record_metrics(rows, run_id=run) == 2
    erc, scr = store.metrics(run_id=run)
    assert erc.value == pytest.approx(2 / 3) and erc.n == 3 and dict(erc.details) == {"missing": 1}
    assert erc.framework == "mine"
    assert scr.value is None and scr.reason == "no confidence source"


def test_invalid_metric_rows_are_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="needs a reason"):
        store.record_metric("query", "q", "ERC", None)
    with pytest.raises(StoreError, match="finite"):
        store.record_metric("query", "q", "ERC", math.nan, "x")
    with pytest.raises(StoreError, match="scope"):
        store.record_metric("session", "q", "ERC", 0.5)
    with pytest.raises(StoreError, match="JSON"):
        store.record_metric("query", "q", "ERC", 0.5, details={"obj": object()})
    assert store.counts()["metrics"] == 0


# --------------------------------------------------------------------------- scores


def test_scores_start_at_init_and_accumulate(store: Store) -> None:
    assert store.add_score("triple", "t1", 3.5) == 103.5
    assert store.add_score("triple", "t1", -1.25) == 102.25
    assert store.add_score("chunk", "t1", 1.0, init=10.0) == 11.0  # units are separate
    out = store.add_scores("triple", {"t1": 0.75, "t2": -2.0})
    assert out == {"t1": 103.0, "t2": 98.0}
    scores = store.get_scores("triple")
    assert {k: (v.raw, v.n_updates) for k, v in scores.items()} == {"t1": (103.0, 3), "t2": (98.0, 1)}
    assert set(store.get_scores("triple", ["t2", "never"])) == {"t2"}
    store.set_score("triple", "t2", 42.0)
    store.set_score("triple", "t9", 7.0)
    scores = store.get_scores("triple")
    assert (scores["t2"].raw, scores["t2"].n_updates) == (42.0, 1)
    assert (scores["t9"].raw, scores["t9"].n_updates) == (7.0, 0)


def test_get_scores_for_many_ids(store: Store) -> None:
    store.add_scores("chunk", {f"c{i}": float(i) for i in range(1200)})
    got = store.get_scores("chunk", [f"c{i}" for i in range(0, 1200, 2)] + ["missing"])
    assert len(got) == 600
    assert got["c1198"].raw == 1298.0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_deltas_are_refused_naming_the_id(store: Store, bad: float) -> None:
    with pytest.raises(StoreError, match="'t-bad'"):
        store.add_scores("triple", {"t-ok": 1.0, "t-bad": bad})
    assert store.get_scores("triple") == {}
    with pytest.raises(StoreError, match="'t-bad'"):
        store.add_score("triple", "t-bad", bad)


def test_scores_survive_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with Store.open(path) as s:
        s.add_scores("triple", {"a": 1.0, "b": -4.0})
        s.add_score("triple", "a", 0.5)
        s.set_param("alpha", 0.25)
    with Store.open(path) as s:
        got = s.get_scores("triple")
        assert {k: (v.raw, v.n_updates) for k, v in got.items()} == {"a": (101.5, 2), "b": (96.0, 1)}
        assert s.get_param("alpha") == 0.25


def _increment_worker(path: str, proc: int, barrier) -> None:
    barrier.wait()  # all processes open the (new) file and write at the same time
    with Store.open(path) as store:
        for i in range(500):
            if i % 2 == 0:
                store.add_score("triple", f"shared-{i % 5}", 0.5)
            else:
                store.add_scores("triple", {f"p{proc}-{i % 10}": 1.0})


def test_four_processes_lose_no_increment(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_increment_worker, args=(str(path), p, barrier)) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with Store.open(path) as s:
        got = {k: (v.raw, v.n_updates) for k, v in s.get_scores("triple").items()}
    # Even i (250 per process) cycle through shared-0..4: 50 each per process, 200 in all, +0.5 each.
    expected = {f"shared-{k}": (200.0, 200) for k in range(5)}
    # Odd i (250 per process) hit p<proc>-{1,3,5,7,9}: 50 each, +1.0 each.
    expected |= {f"p{p}-{k}": (150.0, 50) for p in range(4) for k in (1, 3, 5, 7, 9)}
    assert got == expected


def _open_at_once(path: str, barrier, errors) -> None:
    barrier.wait()
    try:
        with Store.open(path) as store:
            store.add_score("triple", "x", 1.0)
    except Exception as exc:  # reported to the parent, asserted there
        errors.put(f"{type(exc).__name__}: {exc}")


def test_processes_creating_one_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    # Regression: a process read the file's marks and its tables apart, saw the tables another
    # process's first migration had just committed, and refused the store as foreign (about one
    # round in six failed before the fix).
    ctx = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    )
    errors = ctx.Queue()
    for round_ in range(12):
        path = str(tmp_path / f"new-{round_}.sqlite")
        barrier = ctx.Barrier(6)
        procs = [ctx.Process(target=_open_at_once, args=(path, barrier, errors)) for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=60)
        assert [p.exitcode for p in procs] == [0] * 6
        with Store.open(path) as s:
            assert s.get_scores("triple")["x"].n_updates == 6
    assert errors.empty(), errors.get()


def _add_in_child(store: Store) -> None:
    store.add_score("triple", "forked", 10.0)
    store.close()


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method"
)
def test_store_inherited_through_fork_opens_its_own_connection(store: Store) -> None:
    store.add_score("triple", "forked", 1.0)
    child = multiprocessing.get_context("fork").Process(target=_add_in_child, args=(store,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    store.add_score("triple", "forked", 100.0)  # the parent's connection still works
    got = store.get_scores("triple")["forked"]
    assert (got.raw, got.n_updates) == (211.0, 3)


def test_threads_share_one_store(store: Store) -> None:
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(150):
                store.add_score("chunk", "hot", 1.0)
                store.record_event(FeedbackEvent("f", f"w{n}-{i}", 0.5))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(100):
                store.get_scores("chunk", ["hot"])
                store.counts()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)] + [
        threading.Thread(target=reader)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    hot = store.get_scores("chunk")["hot"]
    assert (hot.raw, hot.n_updates) == (550.0, 450)
    assert store.counts()["events"] == 450


def test_memory_store_is_thread_safe() -> None:
    with Store.open(":memory:") as store:
        threads = [
            threading.Thread(target=lambda: [store.add_score("triple", "x", 2.0) for _ in range(100)])
            for _ in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.get_scores("triple")["x"].raw == 700.0


# --------------------------------------------------------------------------- transactions


def test_failed_transaction_leaves_nothing(store: Store) -> None:
    run = store.start_run("demo")
    before = store.counts()
    with pytest.raises(RuntimeError, match="boom"), store.transaction():
        store.add_score("triple", "t1", 5.0)
        store.record_event(FeedbackEvent("f", "q", 1.0), run_id=run)
        store.record_metric("query", "q", "AGR", 1.0, run_id=run)
        store.set_param("alpha", 0.9)
        raise RuntimeError("boom")
    assert store.counts() == before
    assert store.get_param("alpha") is None


def test_failing_batches_roll_back(store: Store) -> None:
    def events_then_crash():
        yield FeedbackEvent("f", "q1", 1.0)
        yield FeedbackEvent("f", "q2", 0.0)
        raise OSError("source went away")

    with pytest.raises(OSError, match="source went away"):
        store.record_events(events_then_crash())
    with pytest.raises(StoreError, match="expects a triage event"):
        store.record_events([FeedbackEvent("f", "q1", 1.0), "not an event"])  # type: ignore[list-item]
    with pytest.raises(StoreError, match="MetricRow"):
        store.record_metrics([MetricRow("query", "q", "ERC", 1.0), ("query", "q", "ERC", 1.0)])  # type: ignore[list-item]
    with pytest.raises(StoreError, match="unknown run id"):
        store.record_metrics(
            [MetricRow("query", "q", "ERC", 1.0), MetricRow("query", "q", "ERC", 1.0, run_id="x")]
        )
    assert store.counts() == {"runs": 0, "events": 0, "metrics": 0, "scores": 0, "params": 0, "blobs": 0, "parts": 0}


def test_nested_transaction_failure_undoes_only_the_inner_part(store: Store) -> None:
    with store.transaction():
        store.add_score("triple", "outer", 1.0)
        with pytest.raises(ValueError), store.transaction():
            store.add_score("triple", "inner", 1.0)
            store.add_score("triple", "outer", 100.0)
            raise ValueError
        store.add_score("triple", "outer", 2.0)
    got = store.get_scores("triple")
    assert set(got) == {"outer"}
    assert (got["outer"].raw, got["outer"].n_updates) == (103.0, 2)


def test_uncommitted_writes_are_invisible_to_other_connections(tmp_path: Path) -> None:
    path = tmp_path / "iso.sqlite"
    with Store.open(path) as writer, Store.open(path) as reader:
        with writer.transaction():
            writer.add_score("triple", "t", 1.0)
            assert reader.get_scores("triple") == {}
        assert reader.get_scores("triple")["t"].raw == 101.0


# --------------------------------------------------------------------------- runs, params, counts


def test_runs_params_counts_and_delete(store: Store) -> None:
    run = store.start_run("demo", {"seed": 3})
    keep = store.start_run("compare")
    assert run != keep
    store.record_event(FeedbackEvent("f", "q", 1.0), run_id=run)
    store.record_event(FeedbackEvent("f", "q", 0.0), run_id=keep)
    store.record_metric("query", "q", "AGR", 1.0, run_id=run)
    store.add_score("triple", "t", 1.0)
    store.set_param("alpha", 0.5)
    store.set_param("alpha", {"value": 0.25, "history": [0.5, 0.25]})
    assert store.get_param("alpha") == {"value": 0.25, "history": [0.5, 0.25]}
    assert store.get_param("missing", default=7) == 7
    assert store.counts() == {"runs": 2, "events": 2, "metrics": 1, "scores": 1, "params": 1, "blobs": 0, "parts": 0}
    (demo,) = store.runs("demo")
    assert demo.id == run and dict(demo.config) == {"seed": 3} and demo.ended_at is None
    store.end_run(run)
    assert store.runs("demo")[0].ended_at is not None
    assert store.delete_run(run) == {"events": 1, "metrics": 1, "runs": 1, "blobs": 0, "parts": 0}
    assert store.counts() == {"runs": 1, "events": 1, "metrics": 0, "scores": 1, "params": 1, "blobs": 0, "parts": 0}
    with pytest.raises(StoreError, match="JSON"):
        store.set_param("alpha", math.nan)
    with pytest.raises(StoreError, match="unknown run id"):
        store.end_run("nope")


def test_closed_store_raises(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "c.sqlite")
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.add_score("triple", "t", 1.0)


def test_many_single_writes_all_land(store: Store) -> None:
    """Write cost per event and per metric is measured in benchmarks/bench_core.py (DESIGN §2 budget)."""
    event = one_of_each_event()[2]
    n = 300
    for _ in range(n):
        store.record_event(event)
    for i in range(n):
        store.record_metric("query", f"q{i}", "ERC", 0.5, framework="f")
    counts = store.counts()
    assert counts["events"] >= n and counts["metrics"] >= n


def test_an_unrelated_sqlite_file_is_never_migrated(tmp_path: Path) -> None:
    notes = tmp_path / "notes.sqlite"
    raw = sqlite3.connect(notes)
    raw.execute("CREATE TABLE notes (body TEXT)")
    raw.execute("INSERT INTO notes VALUES ('keep me')")
    raw.commit()
    raw.close()
    before = notes.read_bytes()
    for readonly in (False, True):
        with pytest.raises(StoreError, match="not a triage store"):
            Store.open(notes, readonly=readonly)
    assert notes.read_bytes() == before  # no application id, no WAL switch, no tables added
    assert not (tmp_path / "notes.sqlite-wal").exists()


def test_readonly_opens_an_existing_store_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite"
    with Store.open(path) as s:
        s.set_param("alpha", 0.3)
    path.chmod(0o444)
    tmp_path.chmod(0o555)  # a read-only directory: no -wal or -shm file can be created either
    try:
        with Store.open(path, readonly=True) as ro:
            assert ro.get_param("alpha") == 0.3
            assert ro.counts()["params"] == 1
            with pytest.raises(StoreError):
                ro.set_param("alpha", 0.4)
    finally:
        tmp_path.chmod(0o755)
        path.chmod(0o644)


def test_readonly_never_creates_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(StoreError, match="no store at"):
        Store.open(missing, readonly=True)
    assert not missing.exists()
    with pytest.raises(StoreError, match="no store at"):
        Store.open(tmp_path, readonly=True)  # a directory is not a store either


def test_readonly_opens_a_store_on_a_read_only_filesystem(tmp_path: Path) -> None:
    import shutil
    import subprocess

    mount = tmp_path / "ro"
    mount.mkdir()
    if (
        shutil.which("mount") is None
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True
        ).returncode
    ):
        pytest.skip("cannot mount a tmpfs here (needs root) to make a read-only filesystem")
    try:
        with Store.open(mount / "s.sqlite") as s:
            s.set_param("alpha", 0.7)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        with pytest.raises(StoreError):
            Store.open(mount / "s.sqlite")  # writable open must fail clearly, not half-work
        with Store.open(mount / "s.sqlite", readonly=True) as ro:
            assert ro.get_param("alpha") == 0.7
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)
