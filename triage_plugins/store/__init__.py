"""The store: events, metric rows, contribution scores and learned parameters (DESIGN §7).

``open_store(url)`` picks the backend (SQLite for paths, PostgreSQL for ``postgresql://`` URLs:
:class:`triage_plugins.store.postgres.PostgresStore`, imported only when used); every backend
implements the :class:`Store` protocol.
"""

from triage_plugins.store.base import ENV_VARS, Store, StoreTarget, is_store, open_store, store_from_env
from triage_plugins.store.rows import SCOPES, TABLES, MetricRow, RunRow, ScoreRow
from triage_plugins.store.sqlite import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, SQLiteStore

__all__ = [
    "APPLICATION_ID",
    "ENV_VARS",
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
    "store_from_env",
]
