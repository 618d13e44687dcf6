"""The store: events, metric rows, contribution scores and learned parameters (DESIGN §7)."""

from triage_plugins.store.sqlite import (
    APPLICATION_ID,
    MIGRATIONS,
    SCHEMA_VERSION,
    SCOPES,
    TABLES,
    MetricRow,
    RunRow,
    ScoreRow,
    Store,
)

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SCOPES",
    "TABLES",
    "MetricRow",
    "RunRow",
    "ScoreRow",
    "Store",
]
