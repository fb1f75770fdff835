"""The work queue: which AppSchedule to reconcile next.

* A key is queued at most once, and never processed by two workers at once: a key that changes while
  it is processed is queued again when it is done (``dirty``).
* Two lanes: a watch event's key (urgent) is always taken before a resync's key (background), so
  event-driven work never waits behind a resync; an urgent add of a key waiting in the background
  lane moves it.
* A failing key gets one retry timer with exponential back-off (capped at 60 s), and resyncs leave it
  alone meanwhile; a real change of the object (an urgent add) retries it at once, so a user's fix is
  not kept waiting by the back-off.
* A Job's events come in bursts (created, pod started, finished, filed; the tasks of one AppSchedule fire
  together): ``add_soon`` queues its key a moment later, and every event meanwhile joins that one add, so
  a burst is one reconcile and one status write, not one per event. A key taken meanwhile (another cause)
  drops its waiting add: the events it waited for are in the store, and that reconcile reads them.
* A key that failed only because the API server was away (unreachable, 5xx, 429: ``transient``) backs off
  to at most ``MAX_TRANSIENT_BACKOFF``, and the first success of any key after it retries every such key
  at once: when the API server returns, nothing waits out a back-off grown during its absence.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

Key = tuple[str, str]
MAX_BACKOFF = 60.0
MAX_TRANSIENT_BACKOFF = 5.0
SOON = 1.0  # seconds a Job event's add waits for the rest of its burst


@dataclass
class WorkQueue:
    urgent: deque[Key] = field(default_factory=deque)
    background: deque[Key] = field(default_factory=deque)
    queued: set[Key] = field(default_factory=set)
    active: dict[Key, float] = field(default_factory=dict)  # key -> monotonic time it was taken
    dirty: set[Key] = field(default_factory=set)
    failures: dict[Key, int] = field(default_factory=dict)
    backoff: dict[Key, asyncio.TimerHandle] = field(default_factory=dict)
    transient: set[Key] = field(default_factory=set)  # backing off only because the API server was away
    soon: dict[Key, asyncio.TimerHandle] = field(default_factory=dict)  # adds waiting for the rest of a burst
    _tokens: asyncio.Queue[None] = field(default_factory=asyncio.Queue)  # one per queued key

    def __len__(self) -> int:
        return len(self.queued)

    def add(self, key: Key, *, urgent: bool = True) -> None:
        if key in self.backoff:
            if not urgent:
                return  # its timer will queue it
            self.backoff.pop(key).cancel()  # a real change: retry now
        if key in self.active:
            self.dirty.add(key)
        elif key in self.queued:
            if urgent and key in self.background:
                self.background.remove(key)
                self.urgent.append(key)
        else:
            self.queued.add(key)
            (self.urgent if urgent else self.background).append(key)
            self._tokens.put_nowait(None)

    def add_soon(self, key: Key, delay: float = SOON) -> None:
        """Queue ``key`` (urgent) in ``delay`` seconds; an add already waiting, or the key queued, covers it."""
        if key in self.soon or key in self.queued:
            return
        self.soon[key] = asyncio.get_running_loop().call_later(delay, self._soon, key)

    def _soon(self, key: Key) -> None:
        self.soon.pop(key, None)
        self.add(key)

    async def get(self) -> Key:
        await self._tokens.get()
        key = self.urgent.popleft() if self.urgent else self.background.popleft()
        self.queued.discard(key)
        later = self.soon.pop(key, None)  # the events it waits for are in the store: this reconcile reads them
        if later is not None:
            later.cancel()
        self.active[key] = time.monotonic()
        return key

    def done(self, key: Key, *, retry_in: float | None = None) -> None:
        """The key was processed; ``retry_in`` (seconds) when it failed and must be tried again."""
        self.active.pop(key, None)
        if retry_in is None:
            self.failures.pop(key, None)
            self.transient.discard(key)
            for waiting in sorted(self.transient):  # the API server answers again: retry them now
                self.transient.discard(waiting)
                timer = self.backoff.pop(waiting, None)
                if timer is not None:
                    timer.cancel()
                    self.add(waiting)
        elif key not in self.backoff:
            self.backoff[key] = asyncio.get_running_loop().call_later(retry_in, self._retry, key)
        if key in self.dirty:
            self.dirty.discard(key)
            self.add(key)

    def failed(self, key: Key, *, conflict: bool = False, transient: bool = False) -> float:
        """Count a failure of ``key``; the delay before its next attempt."""
        attempts = self.failures.get(key, 0) + 1
        self.failures[key] = attempts
        if transient:
            self.transient.add(key)
        else:
            self.transient.discard(key)
        delay = min(MAX_BACKOFF, 0.5 * 2 ** min(attempts - 1, 7))
        return 0.2 if conflict else min(MAX_TRANSIENT_BACKOFF, delay) if transient else delay

    def _retry(self, key: Key) -> None:
        self.backoff.pop(key, None)
        self.transient.discard(key)
        self.add(key)

    def longest_active(self) -> float:
        """Seconds the key processed longest has been at it (0 when no key is)."""
        return time.monotonic() - min(self.active.values()) if self.active else 0.0

    def close(self) -> None:
        for timer in [*self.backoff.values(), *self.soon.values()]:
            timer.cancel()
        self.soon.clear()
        self.backoff.clear()
        self.transient.clear()
