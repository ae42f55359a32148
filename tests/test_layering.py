"""The house's layering, read from the source (every import statement, function-level ones
included, parsed with ``ast``; nothing is imported):

- the apps stand in ordered layers (``LAYERS``): no module imports one of a higher layer;
- no two apps import each other (an app-level cycle), whatever their layers;
- ``apps.core`` and ``apps.accounts`` (the ground floor) import no domain app;
- ``apps.workspace`` and ``apps.experiments`` compose the others, and no app imports them;
  the follow-up work one app's outcome asks of another (``settings.FOLLOW_UPS``) is the
  workspace's to start;
- no import circle between modules crosses apps;
- the engine is a library: no circle among its modules, nothing from Django, DRF, Celery or
  another part of the project.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]
GROUND_FLOOR = {"core", "accounts"}
TOP_FLOOR = {"workspace", "experiments"}
ENGINE = "coworkenv_engine"
# Lowest first; an app may import its own layer and those below it. The engine is a library
# below everything (it imports nothing of the project). Capabilities stand below
# environments: an environment's tasks are tagged with them (an import creates missing
# ones), while the catalogue needs no environment; the capability pages, which count and
# chart tasks, are environment reads.
LAYERS = (
    ("engine",),
    ("core",),  # the foundations: errors, HTTP and API helpers, the job model
    ("accounts",),  # users, projects, roles, and the job pages that check them
    ("capabilities", "llm"),
    ("environments",),
    ("synthesis", "runs"),
    ("curation",),
    ("datasets",),
    ("training",),
    ("serving",),  # model servers: trained models (or any path) served as endpoints
    ("workspace", "experiments"),
)


def _modules() -> dict[str, Path]:
    found = {}
    # the apps, and the engine's own distribution (engine/coworkenv_engine)
    for base, package in ((ROOT, "apps"), (ROOT / "engine", ENGINE)):
        for path in sorted((base / package).rglob("*.py")):
            relative = path.relative_to(base)
            if "migrations" in relative.parts:
                continue
            name = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
            if name != "apps":  # the namespace itself belongs to no app
                found[name] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module an import names (its nearest enclosing module), or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@cache
def imports_of(module: str) -> frozenset[str]:
    """Every dotted name ``module`` imports (``from a import b`` gives ``a.b`` when that is
    a module, else ``a``), relative imports resolved."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                names.add(candidate if candidate in MODULES else base)
    return frozenset(names)


def project_edges() -> dict[str, set[str]]:
    edges = {}
    for module in MODULES:
        targets = {
            _resolve(name)
            for name in imports_of(module)
            if name.startswith(("apps.", f"{ENGINE}.")) or name == ENGINE
        }
        edges[module] = {t for t in targets if t and t != module}
    return edges


def app_of(module: str) -> str:
    """The app a module belongs to; the engine counts as one (below environments)."""
    if module.split(".")[0] == ENGINE:
        return "engine"
    return module.split(".")[1]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


# ----------------------------------------------------------------------------- the checker


def test_the_checker_finds_a_circle_and_its_modules():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert imports_of("apps.workspace.demo") >= {"apps.curation.demo", "apps.runs.demo"}
    # relative imports are resolved: ``from .spec_model import Binding`` in the engine
    assert "coworkenv_engine.spec_model" in imports_of(f"{ENGINE}.bindings")
    # a function-level import counts like any other
    assert f"{ENGINE}.validation.static" in imports_of(f"{ENGINE}.spec")


def test_the_checker_finds_upward_imports_and_two_way_ties():
    layers = (("core",), ("low", "side"), ("high",))
    app = "apps.{}.m".format
    edges = {
        app("low"): {app("core"), app("side")},  # down, and across one layer: allowed
        app("side"): {app("low"), app("high")},  # a tie with low, and one import upward
        app("high"): {app("low")},
        app("core"): set(),
    }
    assert upward_imports(edges, layers) == ["apps.side.m imports apps.high.m"]
    # low and side import each other; high imports low and side imports high: no tie
    assert two_way_ties(edges) == {
        frozenset({"low", "side"}): ["apps.low.m -> apps.side.m", "apps.side.m -> apps.low.m"]
    }
    edges[app("high")].add(app("side"))
    assert frozenset({"high", "side"}) in two_way_ties(edges)


def layer_of(app: str, layers=LAYERS) -> int:
    return next(i for i, members in enumerate(layers) if app in members)


def app_edges(edges: dict[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """App -> app it imports -> the module edges that make the tie (``a -> b``)."""
    found: dict[str, dict[str, list[str]]] = {}
    for module, targets in edges.items():
        for target in targets:
            source, imported = app_of(module), app_of(target)
            if source != imported:
                found.setdefault(source, {}).setdefault(imported, []).append(
                    f"{module} -> {target}"
                )
    return found


def upward_imports(edges: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every module edge from a lower layer into a higher one."""
    return sorted(
        f"{module} imports {target}"
        for module, targets in edges.items()
        for target in targets
        if layer_of(app_of(target), layers) > layer_of(app_of(module), layers)
    )


def two_way_ties(edges: dict[str, set[str]]) -> dict[frozenset, list[str]]:
    """Pairs of apps that import each other, with the module edges both ways."""
    apps = app_edges(edges)
    return {
        frozenset({a, b}): sorted(apps[a][b] + apps[b][a])
        for a in apps
        for b in apps[a]
        if a < b and a in apps.get(b, {})
    }


# ----------------------------------------------------------------------------- the rules


def test_every_app_has_a_layer():
    apps = {app_of(module) for module in MODULES}
    placed = [app for members in LAYERS for app in members]
    assert sorted(placed) == sorted(set(placed))  # each app in one layer only
    assert apps == set(placed)


def test_no_app_imports_a_higher_layer():
    assert upward_imports(project_edges()) == []


def test_no_two_apps_import_each_other():
    assert two_way_ties(project_edges()) == {}


def test_follow_ups_are_started_by_the_workspace():
    """Each follow-up a lower app asks for by name is a workspace service that exists."""
    from django.utils.module_loading import import_string

    assert settings.FOLLOW_UPS
    for point, name in settings.FOLLOW_UPS.items():
        assert name.startswith("apps.workspace."), point
        assert callable(import_string(name))


def test_the_ground_floor_imports_no_domain_app():
    offending = sorted(
        f"{module} imports {target}"
        for module, targets in project_edges().items()
        if app_of(module) in GROUND_FLOOR
        for target in targets
        if app_of(target) not in GROUND_FLOOR
    )
    assert offending == []


def test_no_app_imports_the_top_floor():
    """The composing apps (the workspace, experiments) are imported by no other app."""
    offending = sorted(
        f"{module} imports {target}"
        for module, targets in project_edges().items()
        for target in targets
        if app_of(target) in TOP_FLOOR and app_of(module) != app_of(target)
    )
    assert offending == []


def test_no_import_circle_crosses_apps():
    crossing = [c for c in cycles(project_edges()) if len({app_of(m) for m in c}) > 1]
    assert crossing == []


def test_the_engine_has_no_import_circle():
    edges = project_edges()
    engine = {
        module: {t for t in targets if t.startswith(ENGINE)}
        for module, targets in edges.items()
        if module.startswith(ENGINE)
    }
    assert len(engine) > 15
    assert cycles(engine) == []


def test_the_engine_imports_nothing_from_django_or_the_project():
    offending = sorted(
        f"{module} imports {name}"
        for module in MODULES
        if module.startswith(ENGINE)
        for name in imports_of(module)
        if name.split(".")[0] in {"django", "rest_framework", "celery"}
        or name.split(".")[0] in {"apps", "coworkenv_web", "tests"}
    )
    assert offending == []
