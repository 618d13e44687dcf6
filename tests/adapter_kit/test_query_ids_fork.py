"""Query ids stay unique across forked workers (a gunicorn master loads the app, then forks)."""

from __future__ import annotations

import multiprocessing

import pytest

from triage_plugins.adapter_kit.query_ids import new_query_id


def _child_id(queue) -> None:
    queue.put(new_query_id("t"))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_draws_its_own_prefix():
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    children = [ctx.Process(target=_child_id, args=(queue,)) for _ in range(2)]
    for c in children:
        c.start()
    for c in children:
        c.join(timeout=30)
    ids = {queue.get(timeout=5) for _ in children} | {new_query_id("t")}
    prefixes = {i.rsplit("-", 1)[0] for i in ids}
    assert len(ids) == 3 and len(prefixes) == 3
