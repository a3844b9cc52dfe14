"""Production installs only what runs: the site's code imports nothing that only
requirements-dev.txt installs (test, lint and benchmark tools)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

# Import names of the distributions in requirements-dev.txt.
DEV_IMPORTS = {
    "pytest": "pytest",
    "pytest-django": "pytest_django",
    "pytest-xdist": "xdist",
    "hypothesis": "hypothesis",
    "factory-boy": "factory",
    "faker": "faker",
    "ruff": "ruff",
    "playwright": "playwright",
    "websockets": "websockets",
    "rank-bm25": "rank_bm25",
    "aiosmtpd": "aiosmtpd",
    "django-oauth-toolkit": "oauth2_provider",
}
# Where dev tools may be imported: the tests themselves and the benchmarks (`make bench`
# installs requirements-dev.txt).
DEV_ONLY_DIRS = {"tests", "bench", ".venv", "var", "node_modules", ".git"}


def requirement_names(path: Path) -> list[str]:
    names = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.append(re.split(r"[\[=<>!~ ;]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def test_dev_requirements_extend_production_and_every_dev_tool_is_known():
    dev_file = ROOT / "requirements-dev.txt"
    lines = [line for line in dev_file.read_text().splitlines() if not line.startswith("#")]
    assert lines[0] == "-r requirements.txt"
    production = set(requirement_names(ROOT / "requirements.txt"))
    dev_only = set(requirement_names(dev_file)) - production
    assert dev_only == set(DEV_IMPORTS), "name the import of each new dev tool in DEV_IMPORTS"
    assert not production & set(DEV_IMPORTS)


def test_the_site_imports_no_dev_only_package():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in DEV_ONLY_DIRS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in DEV_IMPORTS.values() or top == "tests":
                    offenders.append(f"{relative}:{node.lineno} imports {module}")
    assert offenders == []
