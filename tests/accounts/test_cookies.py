"""Every cookie a signed-in session is given is Secure with DEBUG=false and HttpOnly (no
script reads any of them), and ``manage.py check --deploy`` has nothing to say of cookies."""

import json

import pytest
from django.urls import reverse

from tests.fresh_settings import settings_in_fresh_process

DEPLOY = {"DEBUG": "false", "SECRET_KEY": "x" * 64, "ALLOWED_HOSTS": "cowork.example"}
COOKIE_CHECKS = "import django; django.setup(); from django.conf import settings as s; "


def test_with_debug_false_every_cookie_setting_is_secure_and_httponly(tmp_path):
    code = COOKIE_CHECKS + (
        "import json; print(json.dumps([s.SESSION_COOKIE_SECURE, s.SESSION_COOKIE_HTTPONLY, "
        "s.CSRF_COOKIE_SECURE, s.CSRF_COOKIE_HTTPONLY]))"
    )
    result = settings_in_fresh_process(tmp_path, "DEBUG", code, **DEPLOY)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [True, True, True, True]


def test_check_deploy_raises_no_cookie_warning(tmp_path):
    code = COOKIE_CHECKS + (
        "from django.core import checks; "
        "print(sorted(m.id for m in checks.run_checks(include_deployment_checks=True)))"
    )
    result = settings_in_fresh_process(tmp_path, "DEBUG", code, **DEPLOY)
    assert result.returncode == 0, result.stderr
    ids = json.loads(result.stdout.replace("'", '"'))  # a printed list of check ids
    cookie_checks = {"security.W010", "security.W011", "security.W012", "security.W013"}
    cookie_checks |= {"security.W014", "security.W015", "security.W016", "security.W017"}
    assert not cookie_checks & set(ids)


@pytest.mark.parametrize("secure", [True, False])
def test_every_cookie_of_a_signed_in_walk(client, admin, project, settings, secure):
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = secure
    assert client.get(reverse("accounts:login")).status_code == 200
    signed_in = client.post(
        reverse("accounts:login"), {"username": admin.username, "password": "secret-pass-123"}
    )
    assert signed_in.status_code == 302
    for name in ("accounts:home", "accounts:token_list"):
        client.get(reverse(name))
    client.get(reverse("workspace:dashboard", args=[project.slug]))
    seen = {name: morsel for name, morsel in client.cookies.items() if morsel.value}
    assert {"sessionid", "csrftoken", "cw_last_project"} <= set(seen)
    for name, morsel in seen.items():
        assert morsel["httponly"] is True, name
        assert bool(morsel["secure"]) is secure, name
