from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from apps.accounts.services import api_token_authenticate
from apps.accounts.throttling import TokenFailureThrottle


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer cwe_…`` (``Token cwe_…`` is accepted too)."""

    keywords = ("bearer", "token")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode(errors="replace") not in self.keywords:
            return None
        # Wrong tokens are counted per address: past the limit, no token from that address
        # is even looked up until the window passes (guessing is throttled, not just logged).
        failures = TokenFailureThrottle()
        if failures.blocked(request):
            raise exceptions.Throttled(failures.wait())
        if len(header) != 2:
            failures.record_failure(request)
            raise exceptions.AuthenticationFailed("Malformed Authorization header.")
        try:
            raw = header[1].decode()
        except UnicodeDecodeError:
            failures.record_failure(request)
            raise exceptions.AuthenticationFailed("Malformed token.") from None
        token = api_token_authenticate(raw)
        if token is None:
            failures.record_failure(request)
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return token.user, token

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
