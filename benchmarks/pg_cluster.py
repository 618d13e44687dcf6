"""The PostgreSQL the store benchmarks (``bench_store*.py``) run against: the server at ``--postgres URL``
(a database it may fill), else a throw-away cluster started with the test suite's
``tests/store/pgserver.py`` (initdb / pg_ctl; needs PostgreSQL's binaries), stopped at the end. Each
configuration then gets a fresh database of its own (``pgserver.fresh_database``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def pgserver() -> ModuleType:
    """``tests/store/pgserver.py``, loaded once (its dataclasses look their module up by name)."""
    name = "bench_pgserver"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "store" / "pgserver.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[name]


@contextmanager
def postgres(url: str | None, *, fsync: bool = False) -> Iterator[tuple[ModuleType, str]]:
    """``(pgserver, admin URL)``: ``url`` as given, else a throw-away cluster (``fsync=True`` for
    durable commits) that is stopped when the block ends."""
    pg = pgserver()
    cluster = None if url else pg.start_cluster(fsync=fsync)
    try:
        yield pg, url or cluster.url  # type: ignore[union-attr]
    finally:
        if cluster is not None:
            cluster.stop()  # type: ignore[operator]
