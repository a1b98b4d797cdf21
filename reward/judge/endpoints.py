"""A pool of OpenAI-compatible endpoints with least-outstanding-requests balancing.

An endpoint that refuses connections is put aside for a cool-down, so a dead replica in the
list is routed around; when every endpoint is cooling down the least recently failed is tried.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from reward.serving import normalise_url, redact_url


@dataclass
class Endpoint:
    url: str
    outstanding: int = 0
    down_until: float = 0.0
    failures: int = 0
    served: int = 0
    last_failure: float = field(default=0.0)
    unanswered_in_row: int = 0  # requests in a row that got no answer (timeout, refused connection)

    @property
    def name(self) -> str:
        """The URL as shown in messages and stats: credentials redacted."""
        return redact_url(self.url)


class EndpointPool:
    def __init__(self, urls: list[str], cooldown_s: float = 10.0) -> None:
        if not urls:
            raise ValueError("at least one judge endpoint URL is needed")
        self.endpoints = [Endpoint(normalise_url(u)) for u in urls]
        self.cooldown_s = cooldown_s

    def acquire(self, avoid: str | None = None) -> Endpoint:
        now = time.monotonic()
        up = [e for e in self.endpoints if e.down_until <= now and e.url != avoid]
        if not up:
            up = [e for e in self.endpoints if e.down_until <= now] or \
                [min(self.endpoints, key=lambda e: e.down_until)]
        ep = min(up, key=lambda e: (e.outstanding, e.served))
        ep.outstanding += 1
        return ep

    def release(self, ep: Endpoint, *, ok: bool, dead: bool = False, unanswered: bool = False) -> None:
        ep.outstanding -= 1
        ep.unanswered_in_row = ep.unanswered_in_row + 1 if unanswered else 0
        if ok:
            ep.served += 1
            ep.failures = 0
        elif dead:
            ep.failures += 1
            ep.last_failure = time.monotonic()
            ep.down_until = ep.last_failure + self.cooldown_s

    def all_silent(self, n: int) -> bool:
        """Whether every endpoint left its last ``n`` requests unanswered (``n`` 0: never)."""
        return n > 0 and all(e.unanswered_in_row >= n for e in self.endpoints)
