from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from apps.accounts.services import api_token_authenticate
from apps.accounts.throttling import AnonFailureCount, TokenFailureThrottle


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer cwe_…`` (``Token cwe_…`` is accepted too)."""

    keywords = ("bearer", "token")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode(errors="replace") not in self.keywords:
            return None
        # Wrong tokens are counted per address: past the limit they get 429, not 401. A
        # valid token is never refused (the lookup is one indexed query by its prefix).
        raw = header[1].decode(errors="replace") if len(header) == 2 else ""
        token = api_token_authenticate(raw) if raw else None
        if token is None:
            self._refuse(
                request, "Invalid or revoked token." if raw else "Malformed Authorization header."
            )
        return token.user, token

    @staticmethod
    def _refuse(request, reason: str):
        failures = TokenFailureThrottle()
        AnonFailureCount().record(request)
        if failures.blocked(request):
            raise exceptions.Throttled(failures.wait())
        failures.record(request)
        raise exceptions.AuthenticationFailed(reason)

    def authenticate_header(self, request) -> str:
        return "Bearer"


class ApiTokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "apps.accounts.authentication.ApiTokenAuthentication"
    name = "ApiToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token (cwe_…), created under Account → API tokens.",
        }
