"""The store: events, metric rows, contribution scores and learned parameters (DESIGN §7).

``open_store(url)`` picks the backend; every backend implements the :class:`Store` protocol.
"""

from triage_plugins.store.base import Store, StoreTarget, is_store, open_store
from triage_plugins.store.rows import SCOPES, TABLES, MetricRow, RunRow, ScoreRow
from triage_plugins.store.sqlite import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, SQLiteStore

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SCOPES",
    "TABLES",
    "MetricRow",
    "RunRow",
    "SQLiteStore",
    "ScoreRow",
    "Store",
    "StoreTarget",
    "is_store",
    "open_store",
]
