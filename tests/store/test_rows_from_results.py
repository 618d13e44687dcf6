"""``MetricRow.from_results``: the rows ``from_result`` makes, equal field for field and type for type;
results not in their normal form go through the checked constructor and fail as they would there."""

from __future__ import annotations

import random
from dataclasses import fields
from types import MappingProxyType

import numpy as np
import pytest

from triage_plugins.contract.errors import StoreError
from triage_plugins.metrics.result import MetricResult, na, ok
from triage_plugins.store.rows import MetricRow


def _checked(scope, scope_id, results, framework, retriever):
    return [
        MetricRow.from_result(scope, scope_id, r, framework=framework, retriever=retriever) for r in results
    ]


def _same(a: list[MetricRow], b: list[MetricRow]) -> None:
    assert a == b
    for x, y in zip(a, b, strict=True):
        for f in fields(MetricRow):
            vx, vy = getattr(x, f.name), getattr(y, f.name)
            assert type(vx) is type(vy), f.name
            assert vx == vy, f.name


def _bare(name, value, reason=None, n=None, details=None) -> MetricResult:
    """A result outside the normal form (no ``__post_init__``), as a careless plugin could make one."""
    obj = object.__new__(MetricResult)
    for f, v in zip(("name", "value", "reason", "n", "details"), (name, value, reason, n, details or {}), strict=True):
        object.__setattr__(obj, f, v)
    return obj


def test_equal_to_from_result_on_random_results() -> None:
    rng = random.Random(7)
    for _ in range(300):
        results = []
        for i in range(rng.randint(0, 14)):
            details = {f"k{j}": rng.choice([1, 0.5, "x", None]) for j in range(rng.randint(0, 3))}
            n = rng.choice([None, 0, 5])
            if rng.random() < 0.3:
                results.append(na(f"M{i}", rng.choice(["no answer", "no gold"]), n=n, **details))
            else:
                results.append(ok(f"M{i}", rng.choice([0, 1, 0.25, 3, np.float64(0.5)]), n=n, **details))
        framework = rng.choice([None, "lightrag"])
        retriever = rng.choice([None, "global"])
        _same(
            MetricRow.from_results("query", "q1", results, framework, retriever),
            _checked("query", "q1", results, framework, retriever),
        )


def test_details_stay_read_only() -> None:
    (row,) = MetricRow.from_results("query", "q", [ok("ERC", 0.5, a=1)])
    assert isinstance(row.details, MappingProxyType)
    with pytest.raises(TypeError):
        row.details["a"] = 2  # type: ignore[index]


@pytest.mark.parametrize(
    "result",
    [
        _bare("", 0.5),
        _bare("*", 0.5),
        _bare("ERC", None, "  "),
        _bare("ERC", float("nan")),
        _bare("ERC", True),
        _bare("ERC", 0.5, n=True),
        _bare("ERC", 0.5, details=[("a", 1)]),
    ],
)
def test_outside_the_normal_form_fails_as_checked(result: MetricResult) -> None:
    with pytest.raises(StoreError) as checked:
        _checked("query", "q", [result], None, None)
    with pytest.raises(StoreError) as fast:
        MetricRow.from_results("query", "q", [ok("QGR", 1.0), result])
    assert str(fast.value) == str(checked.value)


def test_outside_the_normal_form_but_valid_is_normalized() -> None:
    results = [_bare("ERC", 1), _bare("ERC", np.float64(0.5)), _bare("AGR", None, "no answer", details={"a": 1})]
    _same(MetricRow.from_results("query", "q", results), _checked("query", "q", results, None, None))


@pytest.mark.parametrize(("scope", "scope_id"), [("nope", "q"), ("query", " "), ("query", 3)])
def test_bad_scope_fails_as_checked(scope, scope_id) -> None:
    with pytest.raises(StoreError) as checked:
        _checked(scope, scope_id, [ok("QGR", 1.0)], None, None)
    with pytest.raises(StoreError) as fast:
        MetricRow.from_results(scope, scope_id, [ok("QGR", 1.0)])
    assert str(fast.value) == str(checked.value)
