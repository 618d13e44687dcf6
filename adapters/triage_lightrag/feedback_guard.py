"""Feedback integrity for :mod:`triage_lightrag.server` (docs/lightrag.md, "Feedback integrity").

- **Unguessable query ids.** :func:`issue_query_id` gives ``lightrag-<process>-<token>``: a
  10-hex-digit tag of the serving process (a forked gunicorn worker draws its own) and 80 random
  bits from :mod:`secrets` in lower-case base32 (16 characters). Only ids of exactly this shape are
  accepted by ``POST /triage/feedback`` (:func:`is_issued_shape`), so the sequential ids a library
  user's instrumentor hands out, or that an older server issued, cannot be rated over HTTP.
- **One feedback per query id per source** (:func:`claim`): an atomic counter in the shared store,
  ``feedback.claimed:<framework>:<query id>:<source>`` stepped by ``add_param`` (one statement on
  PostgreSQL, one write transaction on SQLite), so of two workers racing on a replay exactly one
  sees ``1``. A replay is answered 200 ``"already recorded"`` and delivered nowhere. Deployers who
  want users to revise a rating turn it off (``TRIAGE_FEEDBACK_REVISIONS=1``).
- **Privileged sources** (:class:`FeedbackPolicy.refusal`): a user's own feedback is
  ``"human"``; ``"llm"`` and ``"gold"`` move scores as a judge or an answer key would, so they are
  accepted only with the operator credential the deployer sets (``TRIAGE_OPERATOR_KEY``), sent in
  the ``X-Triage-Operator-Key`` header; without it a 403 before anything is stored.
- **An optional per-client rate limit** (:class:`RateLimiter`): at most N feedback requests per
  client address per minute, per serving process (``TRIAGE_FEEDBACK_RATE=N``); over it, a 429 with
  ``Retry-After``.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import hmac
import os
import re
import secrets
import threading
import time
from typing import Any

from triage_plugins.adapter_kit.lru import LRU

__all__ = [
    "OPERATOR_HEADER",
    "PRIVILEGED_SOURCES",
    "FeedbackPolicy",
    "RateLimiter",
    "claim",
    "claim_name",
    "is_issued_shape",
    "issue_query_id",
    "process_tag",
    "release",
]

OPERATOR_HEADER = "X-Triage-Operator-Key"
USER_SOURCE = "human"
PRIVILEGED_SOURCES = frozenset({"llm", "gold"})
TOKEN_BYTES = 10  # 80 random bits: 16 base32 characters
CLAIM_PREFIX = "feedback.claimed:"
#: The shape of an issued id: ``<framework>-<10 hex process tag>-<16 base32 token>``.
ISSUED = re.compile(r"^(?P<framework>[A-Za-z0-9_.]+)-(?P<process>[0-9a-f]{10})-(?P<token>[a-z2-7]{16})$")

_process = secrets.token_hex(5)


def _new_process() -> None:
    """A forked child (a gunicorn worker of a preloaded app) draws its own process tag."""
    global _process
    _process = secrets.token_hex(5)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process)


def process_tag() -> str:
    """This process's tag, the middle part of the ids it issues."""
    return _process


def issue_query_id(framework: str = "lightrag") -> str:
    """A fresh, unguessable query id (see the module docstring)."""
    token = base64.b32encode(secrets.token_bytes(TOKEN_BYTES)).decode("ascii").lower()
    return f"{framework}-{_process}-{token}"


def is_issued_shape(query_id: str, framework: str = "lightrag") -> bool:
    """Whether ``query_id`` has the shape :func:`issue_query_id` gives for ``framework``."""
    match = ISSUED.match(query_id)
    return match is not None and match["framework"] == framework


def from_peer(query_id: str) -> bool:
    """Whether an issued-shape id names another process (a worker whose events may still be queued)."""
    match = ISSUED.match(query_id)
    return match is not None and match["process"] != _process


# ---------------------------------------------------------------------------- one per query and source


def claim_name(framework: str, query_id: str, source: str) -> str:
    """The store counter of the feedback claims of one query id and source."""
    return f"{CLAIM_PREFIX}{framework}:{query_id}:{source}"


def claim(store: Any, framework: str, query_id: str, source: str) -> bool:
    """Take the one feedback slot of ``(query_id, source)``: ``True`` for the first caller, in any
    process sharing ``store``; ``False`` for a replay."""
    return float(store.add_param(claim_name(framework, query_id, source), 1.0)) == 1.0


def release(store: Any, framework: str, query_id: str, source: str) -> None:
    """Give a slot back when the feedback that took it could not be delivered."""
    store.add_param(claim_name(framework, query_id, source), -1.0)


# ---------------------------------------------------------------------------- privilege and rate


@dataclasses.dataclass(frozen=True)
class FeedbackPolicy:
    """What ``POST /triage/feedback`` enforces (from :class:`~triage_lightrag.server.ServerOptions`).

    :ivar operator_key: the credential that admits ``source`` ``"llm"`` / ``"gold"``; ``None``: refused.
    :ivar revisions: accept a second feedback for the same query id and source (each moves scores).
    :ivar rate_per_minute: feedback requests one client may send per minute to one serving process.
    """

    operator_key: str | None = dataclasses.field(default=None, repr=False)
    revisions: bool = False
    rate_per_minute: int | None = None

    def refusal(self, source: str, presented: str | None) -> str | None:
        """Why feedback from ``source`` with credential ``presented`` is refused (``None``: accepted)."""
        if source not in PRIVILEGED_SOURCES:
            return None
        if self.operator_key is None:
            return (
                f"source {source!r} is accepted only with the operator credential, and this server has "
                f"none configured (TRIAGE_OPERATOR_KEY); send your own feedback as source 'human'"
            )
        if presented is None or not hmac.compare_digest(
            presented.encode("utf-8"), self.operator_key.encode("utf-8")
        ):
            return f"source {source!r} needs the operator credential in the {OPERATOR_HEADER} header"
        return None


class RateLimiter:
    """At most ``per_minute`` events per client in any 60-second window (a sliding log per client;
    the 65536 most recent clients are tracked)."""

    WINDOW_SECONDS = 60.0

    def __init__(self, per_minute: int, clients: int = 65536) -> None:
        self.per_minute = per_minute
        self._log: LRU[str, collections.deque[float]] = LRU(clients)
        self._lock = threading.Lock()

    def retry_after(self, client: str, now: float | None = None) -> float | None:
        """Count one event of ``client``; ``None`` when allowed, else the seconds until it would be."""
        now = time.monotonic() if now is None else now
        with self._lock:
            times = self._log.get(client)
            if times is None:
                times = collections.deque()
                self._log.put(client, times)
            while times and now - times[0] >= self.WINDOW_SECONDS:
                times.popleft()
            if len(times) >= self.per_minute:
                return self.WINDOW_SECONDS - (now - times[0])
            times.append(now)
            return None
