"""List the functions, classes, methods and properties nothing uses (vulture), for `make lint`.

Vulture reads every Python file of the project, the tests included (an engine function the
tests call is the library's API), and the names the templates mention (a property a page
shows is used). It reports only definitions in the product's code. Django's and DRF's own
entry points are called by the frameworks, never by our code; ``FRAMEWORK_NAMES`` and
``FRAMEWORK_DECORATORS`` name them. Declarative class attributes (``Meta.fields``,
``pagination_class``) are not reported: vulture cannot tell them from dead variables.

Exit status 1 when something is unused, with one ``path:line: kind name`` line each.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from vulture.core import Vulture

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("apps", "engine/coworkenv_engine", "coworkenv_web")
SCANNED = (*PRODUCT, "tests", "bench", "scripts")
EXCLUDED = ["*/migrations/*", "*/node_modules/*"]
# shipped into Claw-Eval and ClawMark exports, where the generated task code calls them
NOT_REPORTED = ("apps/environments/interop/shipped/",)
REPORTED = {"function", "class", "method", "property"}

FRAMEWORK_NAMES = [
    # HTTP verbs and the hooks DRF, Django forms, admin, checks and middleware call
    *("get", "post", "put", "patch", "delete", "get_*", "clean", "clean_*", "validate_*"),
    *("has_permission", "has_object_permission", "authenticate", "authenticate_header"),
    *("get_security_definition", "get_rate", "select_renderer", "to_representation"),
    *("to_internal_value", "bound_fields", "label_from_instance", "__call__", "ready"),
    # management commands, app configs, admin classes, middleware, Celery tasks
    *("Meta", "Command", "handle", "add_arguments", "*Config", "*Admin", "*Middleware", "*_task"),
    # drf-spectacular's hooks and schema extensions, named in settings
    *("*_hook", "*Scheme", "*Authentication"),
    # the error views ROOT_URLCONF names (handler400 …)
    *("*_view",),
    # http.server and transformers' callback hooks
    *("do_GET", "do_POST", "log_message", "on_log", "on_save", "on_step_end"),
    # the module-level __getattr__ of PEP 562; kombu's and httpcore's overridable hooks
    *("__getattr__", "_put", "connect_unix_socket"),
]
FRAMEWORK_DECORATORS = [
    "@register.filter",
    "@register.simple_tag",
    "@register.inclusion_tag",
    "@register",
    "@shared_task",
    "@app.task",
    "@worker_ready.connect",
    "@admin.register",
    "@register_check",
    "@checks.register",
    "@*.checks",  # jsonschema's FormatChecker
    "@functions.signature",  # jmespath's custom functions
]

TEMPLATE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# "apps.accounts.views.locked_out" in settings, "module:Class" in a shipped task's config
DOTTED_PATH = re.compile(r"[\"']\w+(?:[.:]\w+)+[.:](\w+)[\"']")


def names_outside_python(root: Path) -> set[str]:
    """Names the templates mention, and the last parts of dotted paths in strings."""
    names: set[str] = set()
    for path in root.glob("**/templates/**/*.html"):
        if ".venv" not in path.parts:
            names.update(TEMPLATE_WORD.findall(path.read_text(encoding="utf-8")))
    for part in PRODUCT:
        for path in (root / part).glob("**/*.py"):
            names.update(DOTTED_PATH.findall(path.read_text(encoding="utf-8")))
    return names


def unused(root: Path = ROOT) -> list[str]:
    vulture = Vulture(ignore_names=FRAMEWORK_NAMES, ignore_decorators=FRAMEWORK_DECORATORS)
    vulture.scavenge(
        [str(root / part) for part in SCANNED if (root / part).exists()], exclude=EXCLUDED
    )
    vulture.used_names |= names_outside_python(root)
    product = tuple(str(root / part) for part in PRODUCT)
    found = []
    for item in vulture.get_unused_code(min_confidence=60):
        if item.typ in REPORTED and str(item.filename).startswith(product):
            where = Path(item.filename).relative_to(root)
            if str(where).startswith(NOT_REPORTED):
                continue
            found.append(f"{where}:{item.first_lineno}: unused {item.typ} {item.name}")
    return found


if __name__ == "__main__":
    lines = unused()
    print("\n".join(lines) or "No unused code.")
    sys.exit(1 if lines else 0)
