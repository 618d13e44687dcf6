"""The one delivery worker: a bounded queue drained in batches by a supervised thread (DESIGN §2).

Like OpenTelemetry's ``BatchSpanProcessor``: the host puts an item and returns at once; the worker
wakes on the first item, waits up to ``schedule_delay`` for more (so it takes the GIL once per batch,
not per event), then runs the batch. ``flush()`` cuts the wait short and returns within its timeout.

Items are notifications (a hook name and its event) and deferred jobs (a function an adapter wants
run off the host's path, e.g. building an event from framework objects). Both share the one queue,
so their order is kept: a feedback event queued after a retrieval is delivered after it.

The worker gives way to its host: while ``yield_to`` (an event the host clears while it serves a
query) is clear, items submitted are *held* on the host's side without waking the worker (a wake-up
while the host runs costs the host a GIL hand-over, ~0.1–0.2 ms on two cores), and the worker waits
before each item, up to ``max_yield`` seconds per batch, so that metrics of earlier queries are
computed between queries rather than competing for the GIL with the one being served. Held items
are queued, in order, by :meth:`Dispatcher.wake` (the host went idle), by ``flush()``/``close()``,
when a batch's worth is held, or by the worker itself once they are ``max_yield`` old. ``flush()``
and ``close()`` end the wait at once, and a host that is never idle still gets every batch
delivered, at most about three times ``max_yield`` later. A waiting worker sleeps until
:meth:`Dispatcher.wake` (the host went idle), a flush, or, with a host to give way to, a timed
look once per ``max_yield`` (a timed wait, not a poll: one wake-up a second). Between items the
worker hands the GIL back to the host (``time.sleep(0)``) once it has run ``yield_every`` seconds
since it last did, not after every item: a syscall per item cost more CPU (~14 µs) than most items
take.

With ``group``, a batch's store writes commit together: the worker runs the batch and its
``on_batch_end`` inside one ``group()`` (the manager's: one store transaction, see
:meth:`GuardedStore.group <triage_plugins.store.guard.GuardedStore.group>`), so the batch counts as
delivered (``flush()`` returns) only after that commit; items queued while a grouped batch runs join
it (up to ``batch_size``), so one commit covers the queries that arrived meanwhile (group commit);
before it waits for its host it commits what the batch wrote so far, so no transaction stays open
across the wait.

The worker never dies of what it runs: every item is run under ``run_item``, which contains
exceptions, and anything that still escapes (``SystemExit`` from a hook, say) is counted and the
worker goes on; a worker thread that is gone anyway is restarted on the next submit or flush.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["DEFAULT_QUEUED_BYTES", "SETTLE_SECONDS", "Dispatcher", "event_weight"]

log = logging.getLogger("triage.dispatch")

_STOP = object()

SETTLE_SECONDS = 0.002  # how long the host must stay idle before delivery resumes
#: The queue's default bound on the estimated bytes of the events it holds (:func:`event_weight`).
DEFAULT_QUEUED_BYTES = 128 * 2**20


#: Bytes an object costs besides its text (CPython: header, slots or fields, its place in a tuple).
OBJECT_BYTES = 96
#: Bytes a ``str`` costs besides its characters (49 for an ASCII ``str``, plus the pointer to it).
STR_BYTES = 57
#: Bytes per triple a :class:`GraphView` adds for its indexes (a dict entry per triple and node, arrays).
INDEX_BYTES = 160
#: Items of a sequence measured one by one; a longer one is measured on an evenly spaced sample.
EXACT_ITEMS = 32


def _str_bytes(text: object) -> int:
    return STR_BYTES + len(text) if isinstance(text, str) else 16


def _texts_bytes(texts: Any) -> int:
    """Bytes of a sequence or mapping of strings (a mapping: its keys and values, and a dict's entries)."""
    if isinstance(texts, Mapping):
        return OBJECT_BYTES + sum(_str_bytes(k) + _str_bytes(v) + 24 for k, v in texts.items())
    return OBJECT_BYTES + sum(_str_bytes(t) for t in texts) if texts else 0


def _triple_bytes(t: Any) -> int:
    return OBJECT_BYTES + 4 * STR_BYTES + len(t.id) + len(t.subject) + len(t.predicate) + len(t.object)


def _chunk_bytes(c: Any) -> int:
    return (
        2 * OBJECT_BYTES
        + _str_bytes(c.id)
        + _str_bytes(c.doc_id)
        + _str_bytes(c.text)
        + _texts_bytes(c.locator)
    )


def _path_bytes(p: Any) -> int:
    return 2 * OBJECT_BYTES + 8 * len(p.triple_ids)  # the ids are the triples' own strings


def _extracted_bytes(e: Any) -> int:
    logprobs = e.token_logprobs
    return (
        OBJECT_BYTES
        + _triple_bytes(e.triple)
        + (32 * len(logprobs) if logprobs else 0)
        + _str_bytes(e.evidence)
    )


def _sum(items: Any, size: Callable[[Any], int]) -> int:
    """The bytes of every item of ``items`` (a tuple), each by ``size``: exact up to
    :data:`EXACT_ITEMS` items, else an evenly spaced sample of that many scaled to the whole."""
    n = len(items)
    if n <= EXACT_ITEMS:
        return sum(map(size, items))
    step = n / EXACT_ITEMS
    sample = [items[int(i * step)] for i in range(EXACT_ITEMS)]
    return int(sum(map(size, sample)) * n / EXACT_ITEMS)


def _sample(items: Any) -> Any:
    """``items`` up to :data:`EXACT_ITEMS` of them, else an evenly spaced sample of that many."""
    n = len(items)
    if n <= EXACT_ITEMS:
        return items
    step = n / EXACT_ITEMS
    return [items[int(i * step)] for i in range(EXACT_ITEMS)]


def _scaled(total: int, sample: Any, n: int) -> int:
    """``total`` of ``sample`` scaled to ``n`` items, as :func:`_sum` scales a sample."""
    return total if len(sample) == n else int(total * n / EXACT_ITEMS)


def _triples_bytes(triples: Any) -> int:
    """``_sum(triples, _triple_bytes)``, the same number, without a call per triple (a retrieval's
    weight is taken on the host's path)."""
    sample = _sample(triples)
    text = sum([len(t.id) + len(t.subject) + len(t.predicate) + len(t.object) for t in sample])
    return _scaled((OBJECT_BYTES + 4 * STR_BYTES) * len(sample) + text, sample, len(triples))


def _chunks_bytes(chunks: Any) -> int:
    """``_sum(chunks, _chunk_bytes)`` for validated chunks (string fields, a mapping locator)."""
    sample = _sample(chunks)
    text = sum(
        [
            len(c.id) + len(c.doc_id) + len(c.text) + (_texts_bytes(c.locator) if c.locator else OBJECT_BYTES)
            for c in sample
        ]
    )
    return _scaled((2 * OBJECT_BYTES + 3 * STR_BYTES) * len(sample) + text, sample, len(chunks))


def _graph_bytes(graph: Any) -> int:
    triples = graph.triples
    return (
        _sum(triples, _triple_bytes)
        + INDEX_BYTES * len(triples)
        + _sum(graph.nodes, _str_bytes)
        + INDEX_BYTES * len(graph.nodes)
        + _texts_bytes(graph.labels)
        + sum(8 * len(v) + OBJECT_BYTES for v in graph.sources.values())
    )


def _retrieval_bytes(event: Any) -> int:
    subgraph = event.subgraph
    weight = (
        _str_bytes(event.query)
        + _triples_bytes(subgraph.triples)
        + _sum(subgraph.nodes, _str_bytes)
        + _sum(event.paths, _path_bytes)
        + _chunks_bytes(event.chunks)
        + _texts_bytes(event.mentions)
        + _texts_bytes(event.grounding)
    )
    gold = event.gold
    if gold is not None:
        weight += _texts_bytes(gold.answers) + _texts_bytes(gold.entities)
        weight += sum(_sum(path, _triple_bytes) for path in gold.paths)
    return weight


def event_weight(event: Any) -> int:
    """Estimated bytes a queued event holds: its objects and every text in it (triples, chunks, paths,
    mentions, a graph's triples, nodes and indexes; a record's retrieval and answers).

    Bounds the queue's memory, not only its length (``max_weight``). Text is counted exactly, object
    overheads by CPython's sizes (:data:`OBJECT_BYTES`, :data:`STR_BYTES`), so the estimate is at or
    above what the event holds unless it shares strings; sequences longer than :data:`EXACT_ITEMS`
    are estimated from an evenly spaced sample (the cost on the host's path stays bounded).
    """
    weight = 2 * OBJECT_BYTES
    if hasattr(event, "retrieval"):  # a QueryRecord: its retrieval and answers
        return weight + _record_bytes(event)
    graph = getattr(event, "graph", None)
    if graph is not None:
        weight += _graph_bytes(graph)
    if hasattr(event, "subgraph"):
        weight += _retrieval_bytes(event)
    chunk = getattr(event, "chunk", None)
    if chunk is not None:  # an extraction
        weight += _chunk_bytes(chunk) + _sum(event.triples, _extracted_bytes)
    inner = getattr(event, "event", None)
    if inner is not None:  # a GraphRecord
        weight += event_weight(inner)
    for name in ("answer", "query_id", "framework", "raw"):
        weight += _str_bytes(getattr(event, name, None))
    for name in ("answer_mentions", "answer_grounding"):
        value = getattr(event, name, None)
        if value:
            weight += _texts_bytes(value)
    return weight


def _record_bytes(record: Any) -> int:
    weight = event_weight(record.retrieval) + OBJECT_BYTES * (1 + len(record.metrics))
    for answer in (record.answer, record.closed_book):
        if answer is not None:
            weight += event_weight(answer)
    return weight


def _warn_dropped(dropped: int, just: int) -> None:
    """Warn on the first drop and once per thousand after (``just`` = how many were dropped now)."""
    if dropped == just or dropped // 1000 > (dropped - just) // 1000:
        log.warning("triage queue full: %d event(s) dropped so far (host not blocked)", dropped)


class Dispatcher:
    """A bounded, batching, supervised delivery queue.

    :param run_item: called on the worker with each item (never raises into the worker loop).
    :param queue_size: most items waiting; beyond it items are dropped and counted.
    :param batch_size: most items run per wake-up.
    :param schedule_delay: seconds to wait after the first item for more (``0``: at once).
    :param max_weight: most total weight queued, in estimated bytes (see :func:`event_weight`); beyond
        it items are dropped and counted.
    :param name: the worker thread's name.
    :param yield_to: set while the host is idle (``None``: never wait for it); see the module docstring.
    :param max_yield: most seconds a batch waits for the host to be idle.
    :param yield_every: seconds of work after which the worker hands the GIL back between items.
    :param on_batch_end: called on the worker after each batch ran, before its items count as
        delivered (so ``flush()`` returns after it): where plugins write what they buffered.
    :param settle: seconds the host must stay idle after a wait before the worker resumes.
    :param group: called on the worker around each batch (its items and ``on_batch_end``); returns a
        context manager whose value commits what the batch wrote so far (called before the worker
        waits for its host). See the module docstring.
    """

    def __init__(
        self,
        run_item: Callable[[Any], None],
        *,
        queue_size: int,
        batch_size: int,
        schedule_delay: float,
        max_weight: int = DEFAULT_QUEUED_BYTES,
        name: str = "triage-worker",
        yield_to: threading.Event | None = None,
        max_yield: float = 1.0,
        yield_every: float = 0.001,
        on_batch_end: Callable[[], None] | None = None,
        settle: float = SETTLE_SECONDS,
        group: Callable[[], contextlib.AbstractContextManager[Callable[[], None]]] | None = None,
    ) -> None:
        self._group = group
        self._on_batch_end = on_batch_end
        self._settle = settle
        self._yield_to = yield_to
        self._max_yield = max_yield
        self._yield_every = yield_every
        self._wake = threading.Event()  # set by wake() and flush(): a give-way wait ends
        self._run_item = run_item
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._batch_size = batch_size
        self._schedule_delay = schedule_delay
        self._name = name
        self._urgent = threading.Event()  # set while flush() or close() waits: no batching delay
        self._flushing = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._max_weight = max_weight
        self._weight = 0  # total weight queued
        self._held: list[tuple[Any, int]] = []  # submitted while the host was busy, not yet queued
        self._held_since = 0.0  # monotonic time of the oldest held item
        self.dropped = 0
        self.abandoned = 0  # items a close() that timed out stopped before they ran
        self._outstanding = 0  # items in the queue or being run (not the stop marker)
        # Items ever queued, and ever finished (in queue order): flush() waits for those queued
        # before it, not for an empty queue, so callers flushing at once share one batch.
        self._queued_total = 0
        self._done_total = 0
        self._done = threading.Condition(threading.Lock())
        self._abandon = False
        self.escaped = 0  # items whose run raised past run_item (counted, worker kept alive)
        self.restarts = 0

    # ------------------------------------------------------------------ state

    @property
    def pending(self) -> int:
        """Items held, queued or being run."""
        return self._queue.unfinished_tasks + len(self._held)

    def on_worker(self) -> bool:
        """Whether the caller runs on the worker thread (then items are run inline)."""
        return threading.current_thread() is self._thread

    # ------------------------------------------------------------------ submit

    def submit(self, item: Any, weight: int = 1) -> bool:
        """Queue ``item`` (held while the host is busy); ``False`` (and counted in :attr:`dropped`)
        when the queue is full or closed."""
        if self._closed:
            return False
        self._ensure_worker()
        with self._lock:
            heavy = self._weight + weight > self._max_weight and self._weight > 0
            if not heavy:
                self._weight += weight
                if self._holding():
                    if not self._held:
                        self._held_since = time.monotonic()
                    self._held.append((item, weight))
                    if len(self._held) < self._batch_size:
                        return True
                    return self._release_locked()  # whether this item (the last held) was queued
                if self._held:
                    self._release_locked()  # first, so that order is kept
                try:
                    self._queue.put_nowait((item, weight))
                    self._outstanding += 1
                    self._queued_total += 1
                    return True
                except queue.Full:
                    self._weight -= weight
            self.dropped += 1
            dropped = self.dropped
        _warn_dropped(dropped, 1)
        return False

    def _holding(self) -> bool:
        """Whether a submitted item waits on the host's side (the host is busy; no flush waits)."""
        idle = self._yield_to
        return idle is not None and not idle.is_set() and not self._urgent.is_set() and not self._closed

    def release(self) -> None:
        """Queue the held items now, in order (the worker wakes for them)."""
        with self._lock:
            if self._held:
                self._release_locked()

    def _release_locked(self) -> bool:
        """Move the held items into the queue, in order (caller holds ``_lock``); whether the last
        one was queued (the others' losses are counted in :attr:`dropped`, not reported here)."""
        held, self._held = self._held, []
        lost = 0
        queued = True
        for item, weight in held:
            try:
                self._queue.put_nowait((item, weight))
                self._outstanding += 1
                self._queued_total += 1
                queued = True
            except queue.Full:
                self._weight -= weight
                lost += 1
                queued = False
        if lost:
            self.dropped += lost
            _warn_dropped(self.dropped, lost)
        return queued

    def _ensure_worker(self) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive():
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            if self._thread is not None:
                self.restarts += 1
                log.warning("triage worker was gone; restarted (%d restart(s))", self.restarts)
            self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            self._thread.start()

    # ------------------------------------------------------------------ the worker

    def _next(self) -> Any:
        """The next queued item. With a host to give way to, the worker looks every ``max_yield``
        seconds whether items are held, and queues them once they are that old (the host never went
        idle, or its event loop ended before it could say so)."""
        q = self._queue
        timeout = None if self._yield_to is None else self._max_yield
        while True:
            try:
                return q.get(timeout=timeout)
            except queue.Empty:
                with self._lock:
                    if self._held and time.monotonic() - self._held_since >= self._max_yield:
                        self._release_locked()

    def _work(self) -> None:
        q = self._queue
        while True:
            batch = [self._next()]
            if batch[0] is not _STOP and self._schedule_delay > 0 and q.qsize() < self._batch_size:
                self._urgent.wait(self._schedule_delay)  # returns at once while flush() waits
            while len(batch) < self._batch_size:
                try:
                    batch.append(q.get_nowait())
                except queue.Empty:
                    break
            with self._grouping() as commit_now:
                stop = self._run_batch(batch, commit_now)
                while commit_now is not None and not stop and len(batch) < self._batch_size:
                    more = self._arrived(self._batch_size - len(batch))  # join this commit
                    if not more:
                        break
                    batch.extend(more)
                    stop = self._run_batch(more, commit_now)
                self._end_batch()
            for _ in batch:
                q.task_done()
            with self._done:
                self._done_total += sum(1 for item in batch if item is not _STOP)
                self._done.notify_all()
            if stop:
                return

    def _arrived(self, most: int) -> list[Any]:
        """Up to ``most`` items queued while the batch ran (they join its group commit)."""
        out: list[Any] = []
        while len(out) < most:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return out

    def _run_batch(self, batch: list[Any], commit_now: Callable[[], None] | None) -> bool:
        """Run a batch's items; whether it held the stop marker."""
        stop = False
        deadline = time.monotonic() + self._max_yield
        handed = time.perf_counter()  # when the worker last handed the GIL back
        for item in batch:
            if item is _STOP:
                stop = True
            elif self._abandon:
                self._drop_abandoned(item)
            else:
                self._give_way(deadline, commit_now)
                self._run(item)
                now = time.perf_counter()
                if now - handed >= self._yield_every:
                    time.sleep(0)  # hand the GIL back, so the host's thread never waits long
                    handed = time.perf_counter()
        return stop

    @contextlib.contextmanager
    def _grouping(self) -> Iterator[Callable[[], None] | None]:
        """The batch's ``group()``; a group that cannot open leaves the batch ungrouped, one whose
        end raises is counted in :attr:`escaped` (the worker goes on)."""
        if self._group is None:
            yield None
            return
        try:
            group = self._group()
            commit_now = group.__enter__()
        except BaseException as exc:  # noqa: BLE001 - the worker must outlive anything it runs
            log.error(
                "triage worker: %s opening a batch's group; its writes commit one by one", type(exc).__name__
            )
            yield None
            return
        try:
            yield commit_now
        finally:
            try:
                group.__exit__(None, None, None)
            except BaseException as exc:  # noqa: BLE001
                with self._lock:
                    self.escaped += 1
                log.error("triage worker: %s escaped at the end of a batch's group", type(exc).__name__)

    def _drop_abandoned(self, queued: tuple[Any, int]) -> None:
        with self._lock:
            self.abandoned += 1
            self._weight -= queued[1]
            self._outstanding -= 1

    def _end_batch(self) -> None:
        if self._on_batch_end is None:
            return
        try:
            self._on_batch_end()
        except BaseException as exc:  # noqa: BLE001 - the worker must outlive anything it runs
            with self._lock:
                self.escaped += 1
            log.error("triage worker: %s escaped at the end of a batch", type(exc).__name__)

    def wake(self) -> None:
        """The host went idle (``yield_to`` was set): queue what was held, end a give-way wait."""
        self.release()
        self._wake.set()

    def _give_way(self, deadline: float, commit_now: Callable[[], None] | None = None) -> None:
        """Wait while the host serves a query (until ``deadline``, or at once when flushing).

        Once the host goes idle after a wait, the worker lets ``settle`` seconds pass and resumes only
        if the host is still idle: back-to-back queries leave idle gaps of microseconds, and a worker
        resuming in one would compete with the next query for the GIL.
        """
        idle = self._yield_to
        if idle is None:
            return
        wake, urgent = self._wake, self._urgent
        while not idle.is_set() and not urgent.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if commit_now is not None:
                commit_now()  # no store transaction stays open while the host is served
                commit_now = None
            wake.clear()  # then re-check: a wake() after this line ends the wait below at once
            if not idle.is_set() and not urgent.is_set():
                wake.wait(remaining)
            if idle.is_set() and not urgent.is_set() and self._settle > 0:
                urgent.wait(self._settle)  # ends at once on flush()

    def _run(self, queued: tuple[Any, int]) -> None:
        item, weight = queued
        try:
            self._run_item(item)
        except BaseException as exc:  # noqa: BLE001 - the worker must outlive anything it runs
            with self._lock:
                self.escaped += 1
            log.error("triage worker: %s escaped while delivering; item skipped", type(exc).__name__)
        finally:
            with self._lock:
                self._weight -= weight
                self._outstanding -= 1

    # ------------------------------------------------------------------ flush and close

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every item queued before the call was run (with its batch's end and group);
        ``False`` when ``timeout`` seconds pass first."""
        if self._thread is None or self.on_worker():
            return True
        q = self._queue
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._flushing += 1
            self._urgent.set()
            if self._held:
                self._release_locked()
            target = self._queued_total
        if q.unfinished_tasks:
            self._ensure_worker()
        self._wake.set()
        try:
            with self._done:
                while self._done_total < target:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._done.wait(remaining)
            return True
        finally:
            with self._lock:
                self._flushing -= 1
                if not self._flushing and not self._closed:
                    self._urgent.clear()

    def close(self, timeout: float | None = 30.0) -> int:
        """Deliver what is queued for up to ``timeout`` seconds in all (``None``: as long as it takes),
        then stop: items not yet run are never run. Returns how many were not delivered: those
        stopped, and one a plugin still holds when the time is up (it may finish later, uncounted)."""
        if self._closed:
            return self.pending
        deadline = None if timeout is None else time.monotonic() + timeout
        done = self.flush(timeout)
        self._closed = True
        if not done:
            self._abandon = True  # the worker skips (and counts) whatever it has not started
            with self._lock:
                held, self._held = self._held, []
                self.abandoned += len(held)
        self._urgent.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            remaining = None if deadline is None else max(0.05, deadline - time.monotonic())
            try:
                self._queue.put(_STOP, timeout=remaining)
                thread.join(timeout=remaining)
            except queue.Full:
                log.warning("triage worker did not stop: queue still full")
        with self._lock:  # exact now: items stopped, plus those queued or held by a stuck plugin
            left = self.abandoned + self._outstanding
        if left:
            log.warning("triage: %d queued event(s) were not delivered before close", left)
        return left
