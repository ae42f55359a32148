"""Sign-in lockout (django-axes) and API throttles (DRF): guessing passwords or tokens is
slowed down to the configured rates, with a clear answer."""

import json
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.services import api_token_create
from tests.conftest import PASSWORD
from tests.fresh_settings import assert_refuses_to_start, settings_in_fresh_process

pytestmark = pytest.mark.django_db

LOGIN = "accounts:login"


def _sign_in(client, user, password, ip="10.0.0.5"):
    return client.post(
        reverse(LOGIN), {"username": user.username, "password": password}, REMOTE_ADDR=ip
    )


def _signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_wrong_passwords_lock_the_username_from_that_address(client, author, settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    for _ in range(4):
        response = _sign_in(client, author, "wrong-password")
        assert response.status_code == 200
        assert b"Your username and password did not match." in response.content
    # The fifth failure locks the pair out, and then the right password no longer gets in.
    for password in ("wrong-password", PASSWORD):
        response = _sign_in(client, author, password)
        assert response.status_code == 429
        assert (
            "Too many wrong passwords for “arthur-author” from this address (5 in a row). "
            "Signing in is paused for 15 minutes; wait, then try again."
        ) in response.content.decode()
        assert not _signed_in(client)

    # Another address is another pair (a colleague behind another IP is not locked out).
    other = client.__class__()
    assert _sign_in(other, author, PASSWORD, ip="10.0.0.6").status_code == 302
    assert _signed_in(other)


def test_the_lockout_ends_after_the_cool_off(client, author):
    for _ in range(6):
        _sign_in(client, author, "wrong-password")
    assert _sign_in(client, author, PASSWORD).status_code == 429
    # Sixteen minutes later (the attempts are dated back rather than waited for):
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    response = _sign_in(client, author, PASSWORD)
    assert response.status_code == 302
    assert _signed_in(client)


def test_a_success_resets_the_count(client, author):
    for _ in range(4):
        _sign_in(client, author, "wrong-password")
    assert _sign_in(client, author, PASSWORD).status_code == 302
    client.logout()
    for _ in range(4):
        assert _sign_in(client, author, "wrong-password").status_code == 200
    assert _sign_in(client, author, PASSWORD).status_code == 302


# --- API ---------------------------------------------------------------------------------


def _rates(settings, **rates):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {
            "user": "1000/min",
            "anon": "1000/min",
            "token_failure": "1000/min",
            **rates,
        },
    }


def _api(token=None, ip="10.0.0.5"):
    client = APIClient(REMOTE_ADDR=ip)
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _assert_throttled(response):
    assert response.status_code == 429
    body = json.loads(response.content)
    wait = body["details"]["retry_after_s"]
    assert 1 <= wait <= 60
    assert body == {
        "message": f"Too many requests. Try again in {wait} s.",
        "details": {"retry_after_s": wait},
    }
    assert response["Retry-After"] == str(wait)


def test_wrong_tokens_are_throttled_per_address(settings, author):
    _rates(settings, token_failure="3/min")
    _token, raw = api_token_create(user=author, name="laptop")
    url = reverse("api:project_list")
    for guess in ("cwe_00000000_a", "cwe_00000000_b", "cwe_00000000_c"):
        response = _api(guess).get(url)
        assert response.status_code == 401
        assert response.json() == {"message": "Invalid or revoked token.", "details": {}}
    # From that address guesses now wait, malformed headers too: guessing goes no faster.
    _assert_throttled(_api("cwe_00000000_d").get(url))
    malformed = APIClient(REMOTE_ADDR="10.0.0.5", HTTP_AUTHORIZATION="Bearer a b")
    _assert_throttled(malformed.get(url))
    # A valid token from the same address (a colleague behind the same NAT) still works.
    assert _api(raw).get(url).status_code == 200
    assert _api(raw, ip="10.0.0.6").get(url).status_code == 200


def test_refused_tokens_count_toward_the_anonymous_limit(settings):
    settings.API_DOCS_PUBLIC = True
    _rates(settings, anon="2/min")
    url = reverse("api:project_list")
    for guess in ("cwe_00000000_a", "cwe_00000000_b"):
        assert _api(guess).get(url).status_code == 401
    _assert_throttled(_api().get(reverse("api:schema"), {"format": "json"}))
    assert _api(ip="10.0.0.6").get(reverse("api:schema"), {"format": "json"}).status_code == 200


def _forwarded(token, *, remote, forwarded):
    client = _api(token, ip=remote)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_X_FORWARDED_FOR=forwarded)
    return client


def test_x_forwarded_for_is_ignored_unless_the_proxy_is_trusted(settings):
    _rates(settings, token_failure="2/min")
    url = reverse("api:project_list")
    # A client that writes its own X-Forwarded-For does not become somebody else.
    for n, spoofed in enumerate(("198.51.100.1", "198.51.100.2")):
        assert (
            _forwarded(f"cwe_0000000{n}_x", remote="10.0.0.5", forwarded=spoofed)
            .get(url)
            .status_code
            == 401
        )
    _assert_throttled(_forwarded("cwe_00000009_x", remote="10.0.0.5", forwarded="1.1.1.1").get(url))


def test_behind_trusted_proxies_each_client_is_counted_alone(settings, author):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    _rates(settings, token_failure="2/min")
    _token, raw = api_token_create(user=author, name="laptop")
    url = reverse("api:project_list")
    # The nearest untrusted hop is the client; what it wrote further left is its own claim.
    for forwarded in ("203.0.113.7", "192.0.2.99, 203.0.113.7, 10.0.0.9"):
        response = _forwarded("cwe_00000000_x", remote="10.0.0.1", forwarded=forwarded).get(url)
        assert response.status_code == 401
    _assert_throttled(
        _forwarded("cwe_00000000_y", remote="10.0.0.1", forwarded="203.0.113.7").get(url)
    )
    # Another client through the same proxy is not affected, and valid tokens always pass.
    other = _forwarded("cwe_00000000_z", remote="10.0.0.1", forwarded="203.0.113.8").get(url)
    assert other.status_code == 401
    assert _forwarded(raw, remote="10.0.0.1", forwarded="203.0.113.7").get(url).status_code == 200


def test_valid_tokens_are_not_counted_as_failures(settings, author):
    _rates(settings, token_failure="2/min")
    _token, raw = api_token_create(user=author, name="laptop")
    url = reverse("api:project_list")
    for _ in range(5):
        assert _api(raw).get(url).status_code == 200


def test_requests_per_user_are_throttled(settings, author):
    _rates(settings, user="3/min")
    _token, raw = api_token_create(user=author, name="laptop")
    url = reverse("api:project_list")
    for _ in range(3):
        assert _api(raw).get(url).status_code == 200
    _assert_throttled(_api(raw, ip="10.0.0.7").get(url))  # per user, whatever the address


def test_anonymous_requests_are_throttled_per_address(settings):
    """On what anonymous clients may read at all (the schema, when API_DOCS_PUBLIC)."""
    settings.API_DOCS_PUBLIC = True
    _rates(settings, anon="2/min")
    url = reverse("api:schema")
    for _ in range(2):
        assert _api().get(url, {"format": "json"}).status_code == 200
    _assert_throttled(_api().get(url, {"format": "json"}))
    assert _api(ip="10.0.0.6").get(url, {"format": "json"}).status_code == 200


def test_a_trusted_proxy_that_is_no_network_stops_start_up(tmp_path):
    code = "import django; django.setup()"
    result = settings_in_fresh_process(tmp_path, "TRUSTED_", code, TRUSTED_PROXIES="10.0.0.0/8,lb")
    assert_refuses_to_start(result, "TRUSTED_PROXIES: 'lb' is not an address or a network")
