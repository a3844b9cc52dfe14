"""The layout holds: where each concept lives is a contract (docs/architecture.md), so the
rules that keep it are checked here rather than left to review.

The import graph is read from the source (every `import`, including those inside
functions, since a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
APPS = (
    "core",
    "accounts",
    "model_catalog",
    "sessions_app",
    "memory",
    "skills_app",
    "privacy",
    "usage",
    "openai_api",
    "mcp_server",
)
PACKAGES = (*APPS, "hermes_site", "devtools", "bench", "tests")
MAX_LINES = 520  # "about 500": past this a module becomes a package split by sub-domain


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT)
            if "migrations" in rel.parts:
                continue
            name = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Project modules `name` imports (a `from package import module` counts as the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            candidates = [source, *(f"{source}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        targets.update(c for c in candidates if c in MODULES and c != name)
    return targets


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
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


def _app(module: str) -> str:
    return module.split(".")[0]


def test_the_graph_reader_sees_imports_and_cycles() -> None:
    # The rules below are only as good as the reader: it must find a known edge and a cycle.
    assert "core.exceptions" in GRAPH["core.api"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_between_modules() -> None:
    # Includes a task module and its services: services queue tasks by name
    # (core.queue.task_send), so only the task module imports the services.
    assert _cycles(GRAPH) == []


def _app_graph() -> dict[str, set[str]]:
    """App -> the other apps it imports (module-level or inside a function), tests and
    migrations left out."""
    graph: dict[str, set[str]] = {app: set() for app in APPS}
    for name, targets in GRAPH.items():
        if _app(name) not in APPS:
            continue
        graph[_app(name)].update(
            _app(target)
            for target in targets
            if _app(target) in APPS and _app(target) != _app(name)
        )
    return graph


def test_the_checked_apps_are_the_installed_ones() -> None:
    # A new app joins APPS, or the rules below would not see it.
    project = {name for name in settings.INSTALLED_APPS if (ROOT / name).is_dir()}
    assert project == set(APPS)


def test_no_import_cycle_between_apps() -> None:
    # The layering in docs/architecture.md: every app imports only apps below it, and a
    # lower app reaches a higher one only through a registry it exposes (filled from the
    # higher app's ready()) or a signal it sends.
    graph = _app_graph()
    cycles = _cycles(graph)
    looping = sorted(f"{a} -> {b}" for c in cycles for a in c for b in graph[a] if b in c)
    assert cycles == [], looping


def test_services_never_import_their_task_module() -> None:
    offenders = [
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if not name.startswith(("tests", "bench"))
        for target in targets
        if target.endswith(".tasks") and not name.endswith(".tasks")
    ]
    assert offenders == []


def test_core_depends_on_no_app() -> None:
    offenders = [
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if _app(name) == "core"
        for target in targets
        if _app(target) in APPS and _app(target) != "core"
    ]
    assert offenders == []


# hermes_site holds settings, urls, asgi/celery and health; it reaches apps only through
# their url and websocket routing modules (and core's ASGI middleware).
SITE_MAY_IMPORT = ("urls", "api_urls", "search_urls", "routing")


def test_hermes_site_imports_apps_only_through_urls() -> None:
    offenders = [
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if _app(name) == "hermes_site"
        for target in targets
        if _app(target) in APPS
        and _app(target) != "core"
        and target.rpartition(".")[2] not in SITE_MAY_IMPORT
    ]
    assert offenders == []


def test_no_app_imports_the_site_package() -> None:
    offenders = [
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if _app(name) in APPS
        for target in targets
        if _app(target) == "hermes_site"
    ]
    assert offenders == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_about_500_lines(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(ROOT)} has {lines} lines"


def test_the_model_catalog_sits_below_the_domain_apps() -> None:
    # sessions_app, usage, search and compression use it; it uses core only.
    offenders = [
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if _app(name) == "model_catalog"
        for target in targets
        if _app(target) in APPS and _app(target) not in ("core", "model_catalog")
    ]
    assert offenders == []
