"""Every third-party module podium imports belongs to a distribution pyproject.toml declares.

Walks src/podium with ast (imports inside functions count too: a lazily imported SDK still
needs its extra), maps each top-level module name to its distribution through
importlib.metadata.packages_distributions(), and checks the distribution is in [project]
dependencies or in an optional extra. A module that arrives only transitively (through mcp,
jinja2...) works until that package drops it; this test makes the dependency explicit.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "podium"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return _canonical(match.group(1))


def declared_distributions() -> dict[str, str]:
    """Canonical distribution name -> where it is declared ('dependencies' or 'extra NAME')."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {_requirement_name(r): "dependencies" for r in project["dependencies"]}
    for extra, requirements in project.get("optional-dependencies", {}).items():
        for requirement in requirements:
            declared.setdefault(_requirement_name(requirement), f"extra {extra}")
    return declared


def imported_modules() -> dict[str, list[str]]:
    """Top-level absolute module name -> the files (relative) that import it."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                where = str(path.relative_to(ROOT))
                if where not in found.setdefault(top, []):
                    found[top].append(where)
    return found


def third_party(modules: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: files for name, files in modules.items()
            if name != "podium" and name not in sys.stdlib_module_names}


def test_the_walk_sees_imports_inside_functions() -> None:
    modules = imported_modules()
    # tools/mcp.py imports httpx2 inside a method; providers import their SDKs lazily.
    assert "src/podium/tools/mcp.py" in modules["httpx2"]
    assert "anthropic" in modules
    assert "__future__" not in third_party(modules)


def test_every_third_party_import_is_declared() -> None:
    declared = declared_distributions()
    owners = importlib.metadata.packages_distributions()
    problems: list[str] = []
    for module, files in sorted(third_party(imported_modules()).items()):
        distributions = owners.get(module)
        if not distributions:
            problems.append(f"{module} (imported by {', '.join(files)}) is not installed in "
                            f"this environment, so no distribution provides it")
            continue
        if not any(_canonical(d) in declared for d in distributions):
            problems.append(f"{module} (imported by {', '.join(files)}) comes from "
                            f"{' or '.join(distributions)}, which pyproject.toml does not "
                            f"declare in [project] dependencies or an extra")
    assert not problems, "\n".join(problems)
