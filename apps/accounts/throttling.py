"""API throttles: per user (or token), per anonymous address, and per address for wrong tokens.

The rates are read from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` at each request (DRF's
own classes read them once at import), so an operator's or a test's change takes effect.
A refusal is DRF's ``Throttled`` (HTTP 429, ``Retry-After``), which the API's one error
shape reports as ``{"message", "details": {"retry_after_s"}}``.

The address is ``REMOTE_ADDR``; ``X-Forwarded-For`` is believed only when the request comes
from one of ``TRUSTED_PROXIES``, and then the nearest address in it that is not a trusted
proxy is the client's (what a client writes further left is its own claim).
"""

import ipaddress
from functools import cache

from django.conf import settings
from rest_framework import throttling
from rest_framework.settings import api_settings


@cache
def _networks(proxies: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(p, strict=False) for p in proxies)


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in _networks(tuple(settings.TRUSTED_PROXIES)))


def client_address(request) -> str:
    """The client's address: REMOTE_ADDR, or behind trusted proxies the one they forwarded."""
    remote = request.META.get("REMOTE_ADDR", "")
    if not _trusted(remote):
        return remote
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop):
            return hop
    return hops[0] if hops else remote


class _LiveRate:
    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_ident(self, request):
        return client_address(request)


class _Counter(_LiveRate, throttling.SimpleRateThrottle):
    """A count of events per address that the caller records and checks itself."""

    def get_cache_key(self, request, view=None):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _load(self, request) -> bool:
        """Read this address's recent events; False when the throttle is switched off."""
        if self.rate is None:
            return False
        self.key = self.get_cache_key(request)
        self.now = self.timer()
        self.history = [t for t in self.cache.get(self.key, []) if t > self.now - self.duration]
        return True

    def blocked(self, request) -> bool:
        return self._load(request) and len(self.history) >= self.num_requests

    def record(self, request) -> None:
        if self._load(request):
            self.history.insert(0, self.now)
            self.cache.set(self.key, self.history, self.duration)


class UserRateThrottle(_LiveRate, throttling.UserRateThrottle):
    """Requests per signed-in user (session or token); anonymous ones count per address."""


class AnonRateThrottle(_LiveRate, throttling.AnonRateThrottle):
    """Requests per address from clients that are not signed in."""


class AnonFailureCount(_Counter):
    """A refused token counts as an anonymous request (the same counter as
    ``AnonRateThrottle``): DRF refuses it before any throttle would have counted it."""

    scope = "anon"


class TokenFailureThrottle(_Counter):
    """Wrong API tokens per address. Past the limit, wrong and malformed tokens from that
    address get 429 instead of 401, so guessing goes no faster than the rate; a valid token
    is never refused by it (one client's guessing cannot lock out its neighbours behind the
    same address)."""

    scope = "token_failure"
