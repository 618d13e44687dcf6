"""``GET /triage/summary`` reads a bounded slice of the store (issue #31: 6.2-6.9 s on 50k queries).

:func:`triage_lightrag.server_routes.query_metrics` over a real SQLite store: the newest stored
query-metric rows only (``Store.metrics(..., last=N)``), the same rows as the tail of a whole read.
Timings live in ``benchmarks/bench_lightrag_summary.py`` (``benchmarks/RESULTS.md``), not here.
"""

from __future__ import annotations

import pytest

from triage_lightrag.server_routes import query_metrics
from triage_plugins.contract.errors import StoreError
from triage_plugins.store import open_store
from triage_plugins.store.rows import MetricRow

NAMES = ("QGR", "ERC", "CRP")


def fill(store, queries: int) -> None:
    run = store.start_run("test")
    store.record_metrics(
        [
            MetricRow(
                "query",
                f"q{q}",
                name,
                None if name == "CRP" and q % 2 else q / queries,
                "undefined" if name == "CRP" and q % 2 else None,
            )  # fmt: skip
            for q in range(queries)
            for name in NAMES
        ],
        run_id=run,
    )
    store.record_metric("graph", "g", "GCR", 0.5)  # another scope, newest: not counted


def test_the_newest_rows_only_and_the_same_as_a_whole_read(tmp_path):
    with open_store(tmp_path / "t.sqlite") as store:
        fill(store, 300)
        whole = store.metrics(scope="query")
        last = store.metrics(scope="query", last=40)
        assert last == whole[-len(last) :] and {r.scope_id for r in last} == {
            f"q{q}" for q in range(260, 300)
        }
        metrics, queries = query_metrics(store, rows=40)
        assert queries == 40 and set(metrics) == set(NAMES)
        assert metrics["QGR"]["n"] == 40 and metrics["CRP"] == {
            "mean": pytest.approx(279 / 300),
            "n": 20,
            "undefined": 20,
        }
        assert store.metrics(scope="query", last=0) == []
        with pytest.raises(StoreError, match="whole number"):
            store.metrics(scope="query", last=-1)
