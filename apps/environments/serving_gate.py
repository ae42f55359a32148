"""The environment server's token gate: which presented tokens may use a project's server,
checked against the database as rarely as it can be and never shut by someone else's
failures.

A token found valid is remembered (by its sha256) for ``ttl`` seconds; one used in the
second half of that time is checked again then, while it still works (one check at a time
per token), so an active trainer's token is renewed before it lapses and a revoked token
stops within ``ttl``. A renewal the database cannot answer keeps the token until its time is
up.

Failed checks are counted per client address and per token prefix (``cwe_<prefix>_…``), each
over the last minute: a client past ``failures_per_minute`` gets 401 without a lookup for
the rest of its minute, and so does any guess at a prefix past it. Another client's failures
never count against a client; a remembered token is never refused for failures. The client
address is the ASGI scope's: behind a reverse proxy run uvicorn with ``--proxy-headers
--forwarded-allow-ips=<the proxy's addresses>`` so that it is the proxy's
``X-Forwarded-For`` (from those addresses only).

A check that fails for the database (refused, closed, …) is no failure of the token: the
request gets 503 (``coworkenv_engine.server.Unavailable``) and nothing is counted.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable

from django.db import DatabaseError

from coworkenv_engine.server import Unavailable

TOKEN_CACHE_S = 30.0
FAILURES_PER_MINUTE = 30
WINDOW_S = 60.0
MAX_TRACKED = 10_000  # clients and prefixes with failures kept before a sweep


def token_prefix(raw: str) -> str | None:
    """The public prefix of an API token (``cwe_<prefix>_<secret>``), None for other text."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or not parts[1]:
        return None
    return parts[1]


class FailureCounts:
    """Failures in the last ``WINDOW_S`` seconds, by key (a client address or a prefix)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.times: dict[str, list[float]] = {}

    def over(self, key: str | None, now: float) -> bool:
        if key is None:
            return False
        recent = [at for at in self.times.get(key, ()) if at > now - WINDOW_S]
        if recent:
            self.times[key] = recent
        else:
            self.times.pop(key, None)
        return len(recent) >= self.limit

    def add(self, key: str | None, now: float) -> None:
        if key is None:
            return
        if len(self.times) >= MAX_TRACKED:
            self.times = {
                k: kept
                for k, times in self.times.items()
                if (kept := [at for at in times if at > now - WINDOW_S])
            }
        self.times.setdefault(key, []).append(now)


class TokenGate:
    """``await gate(raw, client)``: whether ``raw`` opens the server (see the module): what
    ``check`` answered for it (True, or the name of its holder, such as its user, whose
    share of the sessions it counts against), else False."""

    def __init__(
        self,
        check: Callable[[str], Awaitable[bool | str]],
        *,
        ttl: float = TOKEN_CACHE_S,
        failures_per_minute: int = FAILURES_PER_MINUTE,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.check = check
        self.ttl = ttl
        self.clock = clock
        self.checked_at: dict[str, float] = {}
        self.verdicts: dict[str, bool | str] = {}
        self.renewing: set[str] = set()
        self.by_client = FailureCounts(failures_per_minute)
        self.by_prefix = FailureCounts(failures_per_minute)

    async def __call__(self, raw: str, client: str = "") -> bool | str:
        now = self.clock()
        key = hashlib.sha256(raw.encode()).hexdigest()
        checked = self.checked_at.get(key)
        if checked is not None and now - checked < self.ttl:
            if now - checked >= self.ttl / 2 and key not in self.renewing:
                return await self._renew(raw, key)
            return self.verdicts[key]
        prefix = token_prefix(raw)
        if self.by_client.over(client, now) or self.by_prefix.over(prefix, now):
            return False
        try:
            valid = await self.check(raw)
        except DatabaseError as exc:
            raise Unavailable(
                "the token could not be checked: the database is unavailable"
            ) from exc
        if valid:
            self._remember(key, now, valid)
            return valid
        self._forget(key)
        self.by_client.add(client, now)
        self.by_prefix.add(prefix, now)
        return False

    async def _renew(self, raw: str, key: str) -> bool | str:
        self.renewing.add(key)
        try:
            valid = await self.check(raw)
        except DatabaseError:
            return self.verdicts[key]  # still within its time: kept until then
        finally:
            self.renewing.discard(key)
        if not valid:
            self._forget(key)
            return False
        self._remember(key, self.clock(), valid)
        return valid

    def _remember(self, key: str, now: float, verdict: bool | str) -> None:
        if len(self.checked_at) >= MAX_TRACKED:
            self.checked_at = {k: t for k, t in self.checked_at.items() if now - t < self.ttl}
            self.verdicts = {k: self.verdicts[k] for k in self.checked_at}
        self.checked_at[key] = now
        self.verdicts[key] = verdict

    def _forget(self, key: str) -> None:
        self.checked_at.pop(key, None)
        self.verdicts.pop(key, None)
