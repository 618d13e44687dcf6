"""Fixtures shared by the adapter tests."""

from __future__ import annotations

import asyncio

import pytest


@pytest.fixture(scope="module")
def loop():
    """One event loop per module (LightRAG's instances live on it); its leftover tasks cancelled."""
    loop = asyncio.new_event_loop()
    yield loop
    pending = asyncio.all_tasks(loop)  # LightRAG's LLM/embedding queue workers
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()
