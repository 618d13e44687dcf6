"""``triage compare``: runner registry, failure isolation, per-framework aggregation, reference runs.

A toy runner is registered here by a plugin through ``triage_register_runners``, both as a plugin object
and as an installed ``triage`` entry point, and then appears in ``triage compare``.
"""

from __future__ import annotations

import io
import json
import math

import pytest
from rich.console import Console
from typer.testing import CliRunner

from triage_plugins.apps.compare import (
    IMPLEMENTATION_METRICS,
    SCORE_UNITS_PARAM,
    Corpus,
    Question,
    aggregate_events,
    embedded_corpus,
    load_question_file,
    parse_query_id,
    query_id,
    register_runner,
    run_compare,
    runner_registry,
    unregister_runner,
)
from triage_plugins.cli import app
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import (
    Chunk,
    GenerationEvent,
    Gold,
    GraphEvent,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.offline.extractor import extract_chunk
from triage_plugins.report.terminal import render_compare
from triage_plugins.store import Store

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def small_corpus() -> Corpus:
    return embedded_corpus(0, n_questions=6)


@pytest.fixture
def registry():
    """Registers test runners and removes them afterwards."""
    added: list[str] = []

    def add(runner) -> None:
        register_runner(runner, replace=True)
        added.append(runner.name)

    yield add
    for name in added:
        unregister_runner(name)


T_AB = Triple.of("Ada", "knows", "Bob")
GRAPH = GraphView([T_AB, Triple.of("Bob", "knows", "Cy")])


def _retrieval(framework: str, qid: str, triples: tuple[Triple, ...], retriever: str = "r") -> RetrievalEvent:
    return RetrievalEvent(
        framework,
        qid,
        "Who does Ada know?",
        mentions=("Ada",),
        grounding={"Ada": "Ada"},
        subgraph=Subgraph(triples),
        seconds=0.01,
        retriever=retriever,
        gold=Gold(answers=("Bob",), paths=(), entities=("Ada",)),
    )


def _answer(framework: str, qid: str, text: str) -> GenerationEvent:
    return GenerationEvent(framework, qid, text, (text,), {text: text}, None, 0.002)


class FakeRunner:
    """Emits one graph, one retrieval and one answer per question; its ERC is 1 (Ada retrieved)."""

    modes = ("path",)

    def __init__(self, name: str, *, fail: bool = False) -> None:
        self.name = name
        self.fail = fail

    def available(self) -> tuple[bool, str]:
        return True, ""

    def run(self, corpus, questions, mode, manager, *, feedback_rounds, seed, progress) -> None:
        manager.emit_graph(GraphEvent(self.name, GRAPH))
        for q in questions[:2]:
            qid = query_id(q.id, mode)
            manager.emit_retrieval(_retrieval(self.name, qid, (T_AB,), retriever=mode))
            manager.emit_generation(_answer(self.name, qid, "Bob"))
        if self.fail:
            raise RuntimeError("<script>alert(1)</script> crashed mid-run")


# --------------------------------------------------------------------------- ids and inputs


def test_query_ids_encode_mode_and_round() -> None:
    assert query_id("q1", "krag") == "q1@krag"
    assert query_id("q1", "krag", 2) == "q1@krag#r2"
    assert parse_query_id("q1@krag#r2") == ("q1", "krag", 2)
    assert parse_query_id("a@b@path") == ("a@b", "path", 0)
    assert parse_query_id("plain-id") == ("plain-id", None, 0)


def test_question_file_jsonl(tmp_path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"id": "x1", "question": "Who does Ada know?", "answers": ["Bob"]}\n\n{"text": "Where is Cy?"}\n',
        encoding="utf-8",
    )
    questions = load_question_file(path)
    assert [q.id for q in questions] == ["x1", "q3"]
    assert questions[0].gold is not None and questions[0].gold.answers == ("Bob",)
    assert questions[1].gold is None


# --------------------------------------------------------------------------- aggregation from events


def test_each_framework_counts_only_its_own_events() -> None:
    events = [
        GraphEvent("alpha", GRAPH),
        GraphEvent("beta", GRAPH),
        # alpha retrieves Ada (ERC 1) and answers right; beta retrieves nothing (ERC 0) and answers wrong
        _retrieval("alpha", "q1", (T_AB,)),
        _retrieval("beta", "q1", ()),
        _answer("alpha", "q1", "Bob"),
        _answer("beta", "q1", "Cy"),
        # another retriever of alpha, with ERC 0: must not leak into retriever "r"
        _retrieval("alpha", "q2", (), retriever="other"),
        _answer("alpha", "q2", "Cy"),
    ]
    alpha = aggregate_events(events, "alpha", "r")
    beta = aggregate_events(events, "beta", "r")
    assert alpha.queries == 1 and beta.queries == 1
    assert alpha.usage["ERC"].median == 1.0
    assert beta.usage["ERC"].median == 0.0
    assert alpha.gold is not None and beta.gold is not None
    assert alpha.gold["Hits@1"].mean == 1.0
    assert beta.gold["Hits@1"].mean == 0.0
    assert alpha.signatures == {"supported": 1}
    assert beta.signatures == {"retrieval_gap": 1}
    other = aggregate_events(events, "alpha", "other")
    assert other.queries == 1 and other.usage["ERC"].median == 0.0


def test_gold_metrics_only_when_gold_exists() -> None:
    plain = RetrievalEvent("alpha", "q1", "Who does Ada know?", ("Ada",), {"Ada": "Ada"}, Subgraph((T_AB,)))
    row = aggregate_events([GraphEvent("alpha", GRAPH), plain], "alpha")
    assert row.queries == 1
    assert row.gold is None


def test_gold_from_the_questions_is_attached_by_query_id() -> None:
    plain = RetrievalEvent(
        "alpha",
        query_id("q1", "r"),
        "Who does Ada know?",
        ("Ada",),
        {"Ada": "Ada"},
        Subgraph((T_AB,)),
        retriever="r",
    )
    events = [GraphEvent("alpha", GRAPH), plain, _answer("alpha", plain.query_id, "Cy")]
    gold = {"q1": Gold(answers=("Bob",), paths=(), entities=("Ada",))}
    row = aggregate_events(events, "alpha", "r", gold=gold)
    assert row.gold is not None and row.gold["Hits@1"].mean == 0.0 and row.gold["CC"].mean == 1.0


def test_feedback_rounds_are_scored_apart() -> None:
    events = [GraphEvent("alpha", GRAPH)]
    for rnd, answer in ((0, "Cy"), (1, "Bob")):
        qid = query_id("q1", "r", rnd)
        events += [_retrieval("alpha", qid, (T_AB,)), _answer("alpha", qid, answer)]
    row = aggregate_events(events, "alpha", "r")
    assert row.queries == 1  # the main row is round 0 only
    assert [(r.round, r.hits_at_1) for r in row.rounds] == [(0, 0.0), (1, 1.0)]


# --------------------------------------------------------------------------- runs


def test_reference_on_the_embedded_corpus(small_corpus: Corpus, tmp_path) -> None:
    store_path = tmp_path / "c.sqlite"
    result = run_compare(
        small_corpus, frameworks=["reference"], modes=["path", "krag"], feedback_rounds=1, store=store_path
    )
    assert [(r.framework, r.mode, r.status) for r in result.rows] == [
        ("reference", "path", "ok"),
        ("reference", "krag", "ok"),
    ]
    first_run = sum(len(extract_chunk(c)) for c in small_corpus.chunks)
    for row in result.rows:
        assert row.queries == 6
        assert row.triples_extracted == first_run
        assert set(row.implementation) <= set(IMPLEMENTATION_METRICS)
        assert row.implementation["TCS"].value is None  # the rule-based extractor has no log-probabilities
        assert row.implementation["EC"].value == 1.0  # two runs of a deterministic extractor
        assert row.gold is not None and set(row.gold) == {"CC", "Hits@1", "F1"}
        assert sum(row.signatures.values()) == 6
        assert math.isclose(sum(row.rhd.values()), 1.0)
        assert [r.round for r in row.rounds] == [0, 1] and all(r.queries == 6 for r in row.rounds)
        assert row.rounds[0].hits_at_1 == row.gold["Hits@1"].mean
        assert row.score_moves  # gold feedback moved contribution scores in this run's namespace
        ups = [d for _, d, _ in row.score_moves if d > 0]
        downs = [d for _, d, _ in row.score_moves if d < 0]
        assert ups == sorted(ups, reverse=True) and downs == sorted(downs, reverse=True)
        assert len(ups) <= 6 and len(downs) <= 6 and all(n >= 1 for _, _, n in row.score_moves)
    with Store.open(store_path) as store:
        runs = {r.config["mode"]: r.id for r in store.runs("compare")}
        assert set(runs) == {"path", "krag"}
        unit = f"reference/krag@{runs['krag']}:triple"
        assert unit in store.get_param(SCORE_UNITS_PARAM)
        assert store.get_scores(unit)  # learned in its own namespace
        assert store.get_scores("triple") == {}  # nothing leaked into the shared unit


def test_feedback_rounds_rate_only_the_training_questions_and_report_held_out_accuracy(tmp_path) -> None:
    from triage_plugins.adapter_kit.runner import parse_query_id
    from triage_plugins.apps.compare import split_rated
    from triage_plugins.contract.events import FeedbackEvent

    corpus = embedded_corpus(0, n_questions=12)
    split = split_rated(corpus.questions, seed=3)
    assert split == split_rated(corpus.questions, seed=3)  # seeded: the same split every time
    held = {q.id for q in split if not q.rated}
    assert held and len(held) < len(split)
    store_path = tmp_path / "h.sqlite"
    result = run_compare(
        corpus, frameworks=["reference"], modes=["krag"], feedback_rounds=2, seed=3, store=store_path
    )
    with Store.open(store_path) as store:
        rated = {parse_query_id(e.query_id)[0] for e in store.events() if isinstance(e, FeedbackEvent)}
    assert rated and rated.isdisjoint(held)  # no held-out question was ever rated
    (row,) = result.rows
    for s in row.rounds:
        assert s.held_out_n == len(held)
        expected = sum(v for q, v in s.per_question.items() if q in held) / len(held)
        assert s.held_out == pytest.approx(expected)
        assert s.to_dict()["held_out_hits_at_1"] == s.held_out
    assert any("held-out" in n for n in result.notes)
    out = io.StringIO()
    render_compare(result, Console(file=out, width=100))
    assert "Held-out Hits@1 per feedback round" in out.getvalue()


def test_same_seed_same_numbers_even_on_the_same_store(small_corpus: Corpus, tmp_path) -> None:
    def numbers():
        result = run_compare(
            small_corpus,
            frameworks=["reference"],
            modes=["krag"],
            feedback_rounds=1,
            store=tmp_path / "s.sqlite",
        )
        row = result.rows[0]
        return row.signatures, [r.hits_at_1 for r in row.rounds], {k: v.median for k, v in row.usage.items()}

    assert numbers() == numbers()


def test_a_failing_runner_is_reported_and_the_others_complete(small_corpus: Corpus, registry) -> None:
    registry(FakeRunner("boom", fail=True))
    registry(FakeRunner("fake"))
    result = run_compare(small_corpus, frameworks=["boom", "fake", "reference"], modes=["path"])
    rows = {r.framework: r for r in result.rows}
    assert rows["boom"].status == "failed"
    assert "RuntimeError" in rows["boom"].reason and "crashed mid-run" in rows["boom"].reason
    assert rows["reference"].status == "ok" and rows["reference"].queries == 6
    # the fake runner's numbers come from its own two queries, not from the reference's six
    assert rows["fake"].status == "ok" and rows["fake"].queries == 2
    assert rows["fake"].usage["ERC"].median == 1.0
    assert rows["fake"].gold is not None and rows["fake"].gold["Hits@1"].mean == 1.0


def test_an_unknown_framework_is_an_error_naming_the_close_matches(small_corpus: Corpus) -> None:
    with pytest.raises(ConfigError, match="unknown framework 'refrence' \\(did you mean reference\\?\\)"):
        run_compare(small_corpus, frameworks=["reference", "refrence"], modes=["path"])
    with pytest.raises(ConfigError, match="known frameworks: reference") as info:
        run_compare(small_corpus, frameworks=["nope"], modes=["path"])
    assert "did you mean" not in str(info.value)


class ToyRunner(FakeRunner):
    def __init__(self) -> None:
        super().__init__("toy")


class ToyRunners:
    """A third-party plugin that adds one compare runner."""

    @hookimpl
    def triage_register_runners(self, register):
        register(ToyRunner())


class BrokenRunners:
    @hookimpl
    def triage_register_runners(self, register):
        register(ToyRunner())
        register(ToyRunner())  # the same name twice


def test_a_plugin_registers_a_runner_through_the_hook(small_corpus: Corpus) -> None:
    registry = runner_registry([ToyRunners()])
    assert list(registry.runners)[0] == "reference" and "toy" in registry.runners
    assert registry.errors == []
    result = run_compare(small_corpus, frameworks=["toy"], plugins=[ToyRunners()], modes=["path"])
    (row,) = result.rows
    assert (row.framework, row.mode, row.status, row.queries) == ("toy", "path", "ok", 2)
    assert row.usage["ERC"].median == 1.0


def test_a_broken_plugin_is_reported_and_the_others_run(small_corpus: Corpus) -> None:
    registry = runner_registry([BrokenRunners()])
    assert "toy" in registry.runners  # the first registration stands
    assert len(registry.errors) == 1 and "'toy' is already registered" in registry.errors[0]
    result = run_compare(small_corpus, frameworks=["reference"], plugins=[BrokenRunners()], modes=["path"])
    assert [r.status for r in result.rows] == ["ok"]
    assert any("triage_register_runners raised ConfigError" in n for n in result.notes)
    with pytest.raises(ConfigError, match="triage_register_runners raised"):
        run_compare(small_corpus, frameworks=["elsewhere"], plugins=[BrokenRunners()])


@pytest.fixture
def installed(install_plugin):
    """The toy plugin installed as a distribution with a ``triage`` entry point."""
    install_plugin("toy_triage_runner", "toy-runner", ToyRunners())


def test_an_installed_plugin_runner_appears_in_triage_compare(installed, tmp_path) -> None:
    assert "toy" in runner_registry().runners
    out_json = tmp_path / "c.json"
    res = CliRunner().invoke(
        app,
        ["compare", "--frameworks", "toy,reference", "--modes", "path", "--max-questions", "3",
         "--quiet", "--json", str(out_json)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = json.loads(out_json.read_text(encoding="utf-8"))["rows"]
    assert [(r["framework"], r["status"], r["queries"]) for r in rows] == [
        ("toy", "ok", 2),
        ("reference", "ok", 3),
    ]


def test_the_adapters_register_their_runners_through_their_entry_point_plugins() -> None:
    runners = runner_registry().runners
    assert list(runners)[0] == "reference"  # the built-in first, then each plugin's
    for name, module in (
        ("lightrag", "triage_lightrag.runner"),
        ("graphrag", "triage_graphrag.runner"),
        ("llamaindex", "triage_llamaindex.runner"),
    ):
        assert type(runners[name]).__module__ == module


def test_cli_unknown_framework_is_a_clear_error() -> None:
    res = CliRunner().invoke(app, ["compare", "--frameworks", "bogus", "--quiet"])
    assert res.exit_code == 1
    assert "unknown framework 'bogus'" in res.output
    assert "known frameworks: reference" in res.output
    res = CliRunner().invoke(app, ["compare", "--frameworks", "referenc", "--quiet"])
    assert res.exit_code == 1 and "did you mean reference?" in res.output


def test_every_installed_framework_runs_on_its_own_events(small_corpus: Corpus) -> None:
    """All three frameworks are installed here (CI installs every extra): each row is measured from
    that framework's own events, so the rows differ where the frameworks differ."""
    import importlib.util

    wanted = ["reference", "lightrag", "graphrag", "llamaindex"]
    modes = ["krag", "local", "synonym"]
    result = run_compare(small_corpus, frameworks=wanted, modes=modes)
    by = {(r.framework, r.mode): r for r in result.rows}
    installed = {
        "lightrag": importlib.util.find_spec("lightrag") is not None,
        "graphrag": importlib.util.find_spec("graphrag") is not None,
        "llamaindex": importlib.util.find_spec("llama_index") is not None,
    }
    assert by[("reference", "krag")].status == "ok"
    for fw, mode in (("lightrag", "local"), ("graphrag", "local"), ("llamaindex", "synonym")):
        row = by[(fw, mode)]
        if not installed[fw]:
            assert row.status == "unavailable" and "not installed" in (row.reason or "")
            continue
        assert row.status == "ok", row.reason
        assert row.queries == len(small_corpus.questions)
        assert row.triples_extracted and row.triples_extracted > 0
        assert row.gold is not None  # the embedded questions carry gold answers
    # numbers come from each framework's own events: LightRAG's graph is undirected and keyed by
    # the entity pair, GraphRAG's by pair and text units, so their graphs differ from the reference's
    if installed["lightrag"]:
        assert by[("lightrag", "local")].graph_triples != by[("reference", "krag")].graph_triples
    # TCS needs log-probabilities: the reference rule extractor has none, GraphRAG records them
    assert by[("reference", "krag")].implementation["TCS"].value is None
    if installed["graphrag"]:
        assert by[("graphrag", "local")].implementation["TCS"].value is not None
    assert {"reference", "lightrag", "graphrag", "llamaindex"} <= set(runner_registry().runners)


def test_unknown_mode_is_a_config_error(small_corpus: Corpus) -> None:
    with pytest.raises(ConfigError, match="not supported"):
        run_compare(small_corpus, frameworks=["reference"], modes=["warp-drive"])


def test_feedback_without_gold_is_skipped_with_a_note(small_corpus: Corpus) -> None:
    questions = [Question("u1", small_corpus.questions[0].text)]
    result = run_compare(
        small_corpus, frameworks=["reference"], modes=["path"], questions=questions, feedback_rounds=2
    )
    row = result.rows[0]
    assert row.gold is None and row.rounds == []
    assert result.feedback_rounds == 0
    assert any("no question has a gold answer" in n for n in result.notes)


def test_cli_compare_writes_json_and_html(tmp_path) -> None:
    out_json, out_html = tmp_path / "c.json", tmp_path / "c.html"
    res = CliRunner().invoke(
        app,
        ["compare", "--frameworks", "reference,lightrag", "--modes", "path", "--max-questions", "3",
         "--quiet", "--json", str(out_json), "--html", str(out_html)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(out_json.read_text(encoding="utf-8"))
    assert [(r["framework"], r["status"]) for r in data["rows"]] == [
        ("reference", "ok"),
        ("lightrag", "unavailable"),
    ]
    assert data["rows"][0]["queries"] == 3
    assert out_html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_corpus_dir(tmp_path) -> None:
    from triage_plugins.apps.compare import load_corpus_dir

    (tmp_path / "a.txt").write_text("First paragraph.\n\nSecond paragraph.", encoding="utf-8")
    corpus = load_corpus_dir(tmp_path)
    assert [c.id for c in corpus.chunks] == ["a.txt#p0", "a.txt#p1"]
    assert isinstance(corpus.chunks[0], Chunk)


# --------------------------------------------------------------------------- intervals (#18 item 4)

_INTERVALS_SCRIPT = """
import json
from triage_plugins.apps.compare import embedded_corpus, run_compare
result = run_compare(embedded_corpus(0, n_questions=20), frameworks=["reference"], modes=["path", "krag"])
out = {r.label: r.to_dict()["intervals"] for r in result.rows}
out["differences"] = [d.to_dict() for d in result.differences]
print(json.dumps(out, sort_keys=True))
"""


def test_rows_carry_clustered_intervals_identical_under_any_hash_seed() -> None:
    import json
    import os
    import subprocess
    import sys

    runs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", _INTERVALS_SCRIPT], env=env, capture_output=True, text=True, check=True
        )
        runs.append(done.stdout.strip().splitlines()[-1])
    assert runs[0] == runs[1]  # deterministic for a fixed seed, whatever PYTHONHASHSEED
    out = json.loads(runs[0])
    for label in ("reference / path", "reference / krag"):
        hits = out[label]["Hits@1"]
        assert hits["low"] <= hits["estimate"] <= hits["high"] and hits["n"] == 20
        assert hits["n_clusters"] <= 20
        assert "chain:supported" in out[label]
    diffs = [d for d in out["differences"] if d["metric"] == "Hits@1"]
    assert len(diffs) == 1 and diffs[0]["a"] == "reference / path" and diffs[0]["b"] == "reference / krag"
    assert diffs[0]["significant"] == (diffs[0]["low"] > 0 or diffs[0]["high"] < 0)


def test_a_metric_a_runner_declares_not_comparable_is_shown_as_na_with_why() -> None:
    from triage_graphrag.runner import GraphRAGRunner
    from triage_plugins.apps.compare import _mark_not_comparable
    from triage_plugins.report.results import CompareRow, MetricSummary

    def row(mode: str) -> CompareRow:
        r = CompareRow("graphrag", mode, "ok")
        r.gold = {
            "CC": MetricSummary("CC", 1.0, 1.0, 60, 0),
            "Hits@1": MetricSummary("Hits@1", 0.0, 0.1, 60, 0),
        }
        r.per_question = {"CC": {"q1": 1.0}, "Hits@1": {"q1": 0.0}}
        return r

    glob = row("global")
    _mark_not_comparable(glob, GraphRAGRunner.not_comparable)
    assert glob.gold["CC"].mean is None and glob.gold["CC"].na == 60
    assert glob.gold["CC"].reason.startswith("not comparable: global search retrieves community reports")
    assert "CC" not in glob.per_question and glob.gold["Hits@1"].mean == 0.1
    assert any(n.startswith("CC not comparable") for n in glob.notes)
    local = row("local")
    _mark_not_comparable(local, GraphRAGRunner.not_comparable)
    assert local.gold["CC"].mean == 1.0 and not local.notes


# --------------------------------------------------------------------------- display, seeds, set-ups (#18 items 3-4)


def test_seed_interval_is_the_student_t_interval_of_the_seed_means() -> None:
    from triage_plugins.diagnosis.intervals import seed_interval

    iv = seed_interval([0.2, 0.4, 0.6], bounds=None)
    # by hand: mean 0.4, s = 0.2, t(0.975, 2) = 4.302653, half width 4.302653 * 0.2 / sqrt(3) = 0.496827
    assert iv is not None and iv.estimate == pytest.approx(0.4)
    assert (iv.low, iv.high) == (
        pytest.approx(0.4 - 0.496827, abs=1e-6),
        pytest.approx(0.4 + 0.496827, abs=1e-6),
    )
    rate = seed_interval([0.2, 0.4, 0.6])  # a rate's interval is clipped to [0, 1]
    assert rate is not None and (rate.low, rate.high) == (0.0, pytest.approx(0.896827, abs=1e-6))
    assert seed_interval([0.5]) is None  # one seed: no spread to estimate


def test_the_html_shows_hits_intervals_and_marks_differences_not_significant() -> None:
    from triage_plugins.diagnosis.calibration import Interval
    from triage_plugins.report import compare_html
    from triage_plugins.report.results import Difference

    result = run_compare(embedded_corpus(0, n_questions=12), frameworks=["reference"], modes=["path", "krag"])
    path, krag = result.rows
    assert path.interval_text("Hits@1") and path.interval_text("Hits@1").startswith("[")
    assert path.interval_text("no such metric") == ""
    measured = [d for d in result.differences if d.metric == "Hits@1"]
    assert len(measured) == 1
    result.differences.append(
        Difference("x / a", "y / b", "Hits@1", Interval(0.05, -0.1, 0.2, 0.95, "bca", 12, 10, 2000))
    )
    html = compare_html(result)
    for row in (path, krag):
        assert row.interval_text("Hits@1") in html
    gold = html.split('id="gold"')[1].split("</section>")[0]
    assert path.interval_text("Hits@1") in gold and krag.interval_text("Hits@1") in gold
    diffs = html.split('id="differences"')[1].split("</section>")[0]
    shown, folded = diffs.split("<details>") if "<details>" in diffs else (diffs, "")
    # Holm over the family: a pair is listed up front only when its adjusted p is below 0.05
    assert (measured[0].a in shown.split("</p>", 1)[1]) == measured[0].significant_holm
    assert measured[0].p_value is not None and measured[0].p_holm == pytest.approx(measured[0].p_value)
    assert "x / a" in folded and "N/A" in folded.split("x / a")[1]  # no p-value: never significant
    assert "Holm–Bonferroni over the 2 pairs" in diffs


class _SetupRunner:
    """A toy runner whose second mode is labelled non-default."""

    name, framework, modes = "setups", "setups", ("plain", "tuned")

    def available(self) -> tuple[bool, str]:
        return True, ""

    def setup_of(self, mode: str):
        from triage_plugins.apps.compare import Setup

        return Setup("top_k=50 instead of 10", default=False) if mode == "tuned" else Setup()

    def run(self, corpus, questions, mode, manager, *, feedback_rounds, seed, progress) -> None:
        for q in questions:
            qid = query_id(q.id, mode)
            manager.emit_retrieval(_retrieval(self.framework, qid, (T_AB,), retriever=mode))
            manager.emit_generation(_answer(self.framework, qid, "Bob"))


def test_each_row_says_its_query_setup_and_labels_a_non_default_one(small_corpus: Corpus, registry) -> None:
    from triage_llamaindex.runner import LlamaIndexRunner
    from triage_plugins.report import compare_html

    registry(_SetupRunner())
    result = run_compare(small_corpus, frameworks=["setups", "reference"], modes=["plain", "tuned", "path"])
    by_label = {r.label: r for r in result.rows}
    plain, tuned, ref = by_label["setups / plain"], by_label["setups / tuned"], by_label["reference / path"]
    assert plain.setup.default and plain.display_label == "setups / plain"
    assert ref.setup.default and ref.to_dict()["setup"] == {
        "description": "framework default",
        "default": True,
    }
    assert tuned.display_label == "setups / tuned (non-default: top_k=50 instead of 10)"
    assert tuned.to_dict()["setup"] == {"description": "top_k=50 instead of 10", "default": False}
    overview = compare_html(result).split('id="frameworks"')[1].split("</section>")[0]
    assert overview.count(">non-default</span></summary>") == 1 and "top_k=50 instead of 10" in overview
    # the LlamaIndex rows use one PG sub-retriever, graph only: not LlamaIndex's default as_retriever()
    for mode in LlamaIndexRunner.modes:
        setup = LlamaIndexRunner().setup_of(mode)
        assert not setup.default and "LlamaIndex default" in setup.description


def test_seeds_repeat_over_corpora_and_one_seed_is_run_compare(tmp_path) -> None:
    from triage_plugins.apps.compare import run_compare_seeds

    def corpus_of(s: int) -> Corpus:
        return embedded_corpus(s, n_questions=8)

    options = {"frameworks": ["reference"], "modes": ["path"]}
    single = run_compare_seeds(corpus_of, [3], **options)
    plain = run_compare(corpus_of(3), seed=3, **options)
    assert single.across_seeds is None and "across_seeds" not in single.to_dict()
    assert single.rows[0].per_question == plain.rows[0].per_question and single.notes == plain.notes
    many = run_compare_seeds(corpus_of, [3, 4, 5], **options)
    each = [plain, *(run_compare(corpus_of(s), seed=s, **options) for s in (4, 5))]
    stat = many.across_seeds.rows["reference / path"]["Hits@1"]
    expected = [r.rows[0].gold["Hits@1"].mean for r in each]
    assert list(stat.values) == pytest.approx(expected)
    assert stat.mean == pytest.approx(sum(expected) / 3)
    assert stat.interval.low <= stat.mean <= stat.interval.high
    assert many.rows[0].per_question == plain.rows[0].per_question  # the tables are the first seed's
    data = json.loads(many.to_json())
    assert data["across_seeds"]["seeds"] == [3, 4, 5]


def test_cli_compare_seeds(tmp_path) -> None:
    out_json, out_html = tmp_path / "c.json", tmp_path / "c.html"
    base = ["compare", "--frameworks", "reference", "--modes", "path", "--max-questions", "4", "--quiet"]
    res = CliRunner().invoke(
        app, [*base, "--seeds", "2", "--seed", "1", "--json", str(out_json), "--html", str(out_html)]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out_json.read_text(encoding="utf-8"))
    assert data["seed"] == 1 and data["across_seeds"]["seeds"] == [1, 2]
    assert len(data["across_seeds"]["rows"]["reference / path"]["Hits@1"]["values"]) == 2
    assert 'id="seeds"' in out_html.read_text(encoding="utf-8")
    res = CliRunner().invoke(app, [*base, "--seeds", "0"])
    assert res.exit_code != 0 and "--seeds" in res.output and "Traceback" not in res.output
    (tmp_path / "q.jsonl").write_text('{"question": "Who?", "answers": ["Bob"]}\n', encoding="utf-8")
    res = CliRunner().invoke(app, [*base, "--seeds", "2", "--questions", str(tmp_path / "q.jsonl")])
    assert res.exit_code != 0 and "--seeds" in res.output
