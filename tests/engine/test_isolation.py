"""The engine is a library: nothing from Django, DRF, Celery or the other apps."""

import ast
import subprocess
import sys
from pathlib import Path

from .helpers import ROOT

ENGINE = ROOT / "engine" / "coworkenv_engine"
FORBIDDEN = ("django", "rest_framework", "celery", "kombu", "apps", "coworkenv_web", "tests")
SOURCES = sorted(ENGINE.rglob("*.py"))


def _imports(path: Path):
    tree = ast.parse(path.read_text("utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


# optional extras, each confined to its own module
# re2 (google-re2) is optional: safe_regex imports it in a try/except ImportError; so are
# orjson (server.py: the per-step JSON) and PIL (trl_env.py: images for VLM processors)
EXTRAS = {
    "server.py": {"starlette", "uvicorn", "orjson"},
    "server_routes.py": {"starlette", "orjson"},  # the server's handlers, same extra
    "mcp_server.py": {"mcp", "mcp_types", "starlette"},
    "verl_adapter.py": {"verl", "httpx"},
    "trl_env.py": {"PIL"},
    "safe_regex.py": {"re2"},
    "verifiers_env.py": {"verifiers"},
}


def test_engine_sources_import_only_stdlib_jsonschema_jmespath():
    stdlib = set(sys.stdlib_module_names)
    offenders = []
    assert len(SOURCES) > 20
    for path in SOURCES:
        allowed_third_party = {"jsonschema", "jmespath"} | EXTRAS.get(path.name, set())
        for name in _imports(path):
            top = name.split(".")[0]
            if top in FORBIDDEN or (top not in stdlib and top not in allowed_third_party):
                offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []


def test_importing_the_engine_loads_no_django():
    code = (
        "import sys\n"
        "import coworkenv_engine.validation, coworkenv_engine.runner, "
        "coworkenv_engine.cli\n"
        "import coworkenv_engine.rewards, coworkenv_engine.session, "
        "coworkenv_engine.protocol\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework', "
        "'celery', 'starlette', 'uvicorn')]\n"
        "bad += [m for m in sys.modules if m.split('.')[0] in ('apps', 'coworkenv_web')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_modules_stay_small():
    sizes = {p.name: len(p.read_text().splitlines()) for p in SOURCES}
    assert len(sizes) > 20
    assert max(sizes.values()) < 500, sizes
