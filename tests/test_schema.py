"""`triage schema`: the generated JSON Schema accepts every event the demo records, rejects malformed ones."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from typer.testing import CliRunner

from triage_plugins.apps.schema import event_schema
from triage_plugins.cli import app
from triage_plugins.contract.events import EVENT_TYPES

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is needed to validate against the schema")


@pytest.fixture(scope="module")
def validator():
    schema = event_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def demo_events(tmp_path_factory):
    from triage_plugins.apps.demo import run_demo
    from triage_plugins.store import open_store

    path = tmp_path_factory.mktemp("demo") / "demo.sqlite"
    run_demo(seed=0, store=str(path), feedback_rounds=1)
    with open_store(path, readonly=True) as store:
        return [json.loads(e.to_json()) for e in store.events()]


def test_one_branch_per_event_kind_generated_from_the_classes():
    schema = event_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    kinds = [
        schema["$defs"][b["$ref"].rsplit("/", 1)[1]]["properties"]["event"]["const"] for b in schema["oneOf"]
    ]
    assert kinds == list(EVENT_TYPES)
    retrieval = schema["$defs"]["RetrievalEvent"]
    fields = {f.name for f in dataclasses.fields(EVENT_TYPES["retrieval"])}
    assert set(retrieval["properties"]) == {"event", *fields}
    assert retrieval["required"] == ["event", "framework", "query_id", "query"]


def test_every_demo_event_validates(validator, demo_events):
    kinds = {e["event"] for e in demo_events}
    assert {"extraction", "graph", "retrieval", "generation", "feedback"} <= kinds
    for event in demo_events:
        errors = list(validator.iter_errors(event))
        assert not errors, (event["event"], errors[0].message)


def _first(demo_events, kind):
    return copy.deepcopy(next(e for e in demo_events if e["event"] == kind))


@pytest.mark.parametrize(
    "break_it",
    [
        lambda e: e.update(event="nope"),
        lambda e: e.pop("query_id"),
        lambda e: e.update(seconds="fast"),
        lambda e: e.update(surprise=1),
        lambda e: e["subgraph"]["triples"].append({"id": "x", "subject": "a", "predicate": "p"}),
        lambda e: e.update(mentions="not a list"),
    ],
)
def test_malformed_retrieval_events_do_not_validate(validator, demo_events, break_it):
    event = _first(demo_events, "retrieval")
    assert validator.is_valid(event)
    break_it(event)
    assert not validator.is_valid(event)


def test_malformed_feedback_and_generation(validator, demo_events):
    feedback = _first(demo_events, "feedback")
    feedback["source"] = "oracle"  # not one of llm, human, gold
    assert not validator.is_valid(feedback)
    generation = _first(demo_events, "generation")
    generation["context"] = "some"
    assert not validator.is_valid(generation)
    assert not validator.is_valid([generation])


def test_cli_prints_and_writes_the_schema(tmp_path):
    runner = CliRunner()
    printed = runner.invoke(app, ["schema"])
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.output) == event_schema()
    out = tmp_path / "event.schema.json"
    written = runner.invoke(app, ["schema", "--out", str(out)])
    assert written.exit_code == 0, written.output
    assert json.loads(out.read_text(encoding="utf-8")) == event_schema()
