"""The team server's limits: requests a token may make (a token bucket per
token), authentication failures an address may have (a bucket per address,
so guessed tokens cannot keep the database busy), and the size of a
request's body, read whole only up to the limit."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

Receive = Callable[[], Awaitable[dict[str, Any]]]


class Buckets:
    """A token bucket per key: RATE requests a second on average, BURST at
    once. Memory is bounded: past MAX_KEYS keys, those whose bucket has
    refilled (they owe nothing) are forgotten."""

    def __init__(self, rate: float, burst: float, max_keys: int = 100_000,
                 clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.max_keys, self.clock = rate, burst, max_keys, clock
        self._buckets: dict[Any, tuple[float, float]] = {}  # key -> (tokens, at)

    def _level(self, key: Any, now: float) -> float:
        tokens, at = self._buckets.get(key, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate)

    def take(self, key: Any) -> float:
        """0 when KEY may make a request now (one is taken), else the seconds until it may."""
        now = self.clock()
        tokens = self._level(key, now)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate
        self._buckets[key] = (tokens - 1.0, now)
        if len(self._buckets) > self.max_keys:
            self._forget(now)
        return 0.0

    def wait(self, key: Any) -> float:
        """The seconds until KEY may make a request (0: now), taking nothing."""
        tokens = self._level(key, self.clock())
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def _forget(self, now: float) -> None:
        for key in [k for k in self._buckets if self._level(k, now) >= self.burst]:
            del self._buckets[key]
        while len(self._buckets) > self.max_keys:  # all owe something: the oldest go
            self._buckets.pop(next(iter(self._buckets)))


class TooLarge(Exception):
    pass


async def read_body(receive: Receive, limit: int) -> bytes:
    """The request's whole body; TooLarge as soon as it passes LIMIT bytes."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        if len(body) > limit:
            raise TooLarge
        if not message.get("more_body", False):
            break
    return bytes(body)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that gives BODY once, then what RECEIVE gives (a disconnect)."""
    sent = False

    async def again() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return again
