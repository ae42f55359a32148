"""API throttles: per user (or token), per anonymous address, and per address for wrong tokens.

The rates are read from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` at each request (DRF's
own classes read them once at import), so an operator's or a test's change takes effect.
A refusal is DRF's ``Throttled`` (HTTP 429, ``Retry-After``), which the API's one error
shape reports as ``{"message", "details": {"retry_after_s"}}``.
"""

from rest_framework import throttling
from rest_framework.settings import api_settings


class _LiveRate:
    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)


class UserRateThrottle(_LiveRate, throttling.UserRateThrottle):
    """Requests per signed-in user (session or token); anonymous ones count per address."""


class AnonRateThrottle(_LiveRate, throttling.AnonRateThrottle):
    """Requests per address from clients that are not signed in."""


class TokenFailureThrottle(_LiveRate, throttling.SimpleRateThrottle):
    """Wrong API tokens per address. Only failures are counted; once the limit is reached
    every token from that address is refused until the oldest failure leaves the window, so
    guessing tokens is as slow as the rate says."""

    scope = "token_failure"

    def get_cache_key(self, request, view=None):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _load(self, request) -> bool:
        """Read this address's recent failures; False when the throttle is switched off."""
        if self.rate is None:
            return False
        self.key = self.get_cache_key(request)
        self.now = self.timer()
        self.history = [t for t in self.cache.get(self.key, []) if t > self.now - self.duration]
        return True

    def blocked(self, request) -> bool:
        return self._load(request) and len(self.history) >= self.num_requests

    def record_failure(self, request) -> None:
        if self._load(request):
            self.history.insert(0, self.now)
            self.cache.set(self.key, self.history, self.duration)
