"""`make run`'s web server: uvicorn on the ASGI application (scripts/run_local.py), which
serves the pages with their static files, the API and the environment server on one port,
as a team server does."""

import importlib.util

import httpx
import pytest

from tests.engine.serving import running
from tests.workers import ROOT


def _run_local():
    spec = importlib.util.spec_from_file_location("run_local", ROOT / "scripts" / "run_local.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_run_serves_the_asgi_application():
    module = _run_local()
    web = module.web_command("python")
    assert web[web.index("uvicorn") + 1] == "coworkenv_web.asgi:application"
    assert module.READY_MARKERS["web"] == "Uvicorn running on"


def test_under_uvicorn_the_local_mode_serves_pages_static_files_and_envs(transactional_db):
    from coworkenv_web.asgi import application

    with running(application) as url:
        login = httpx.get(f"{url}/login/")
        assert login.status_code == 200
        assert "/static/css/app.css" in login.text
        for asset in ("/static/css/app.css", "/static/js/json-editor.js"):
            assert httpx.get(f"{url}{asset}").status_code == 200, asset
        envs = httpx.get(f"{url}/envs/any-project/tasks")
        assert (envs.status_code, envs.json()) == (401, {"detail": "missing or wrong token"})


@pytest.fixture(autouse=True)
def _local_mode(settings):
    # the local mode (DEBUG=true, as the suite's environment is): WhiteNoise finds the files
    # where they lie, with no collectstatic
    assert settings.WHITENOISE_USE_FINDERS
