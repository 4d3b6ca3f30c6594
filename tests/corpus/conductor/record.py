"""Record what Conductor itself gives for each case of cases.yaml, into expected.json.

This script runs Conductor's own code, never podium's, and never at test time: the parity
test (tests/test_conductor_parity.py) only reads the expected.json it writes. It imports

  - the template renderer: conductor.executor.template.TemplateRenderer (`template:` cases),
  - the router: conductor.engine.router.Router.evaluate, with routes
    [{to: yes, when: <condition>}, {to: no}] (`condition:` cases; the result is whether
    `yes` was chosen),
  - the set step: conductor.config.loader.load_config_string (the step's YAML in a minimal
    workflow) and conductor.executor.set_step.SetExecutor.execute (`set:` cases),

and builds every context with conductor.engine.context.WorkflowContext (inputs, then each
world output stored in order; templates and routes read get_for_template(), set steps
build_for_agent(..., "accumulate", "set")), so group outputs are recognised as Conductor
recognises them.

Recorded from Conductor at commit 3c07139 (0.1.33 + Unreleased, the snapshot
conductor-spec.md describes), with its uv.lock versions (jinja2 3.1.6, simpleeval 1.0.5,
ruamel.yaml 0.19.1). To re-run it, outside this repository:

    git -C <conductor mirror> archive 3c07139 | tar -x -C /tmp/conductor-src
    cd /tmp/conductor-src && UV_PROJECT_ENVIRONMENT=/tmp/conductor-venv \\
        uv sync --frozen --no-dev --python 3.12
    /tmp/conductor-venv/bin/python <this repo>/tests/corpus/conductor/record.py

It rewrites expected.json beside it; review the diff before committing. Whole workflows
(validate, then a --skip-gates run) are recorded by record_workflows.py beside it, the same way. Each result is
{"ok": <value>} or {"error": {"type", "message", "cause", "category"}}, where category is
'undefined' (an unknown name), 'syntax' or 'error' (anything else).
"""

from __future__ import annotations

import copy
import json
import math
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

HERE = Path(__file__).resolve().parent
CONDUCTOR_COMMIT = "3c07139"


def _context(world: dict[str, Any]) -> Any:
    from conductor.engine.context import WorkflowContext

    ctx = WorkflowContext(workflow_dir=world["dir"], workflow_file=world["file"],
                          workflow_name=world["name"])
    ctx.set_workflow_inputs(copy.deepcopy(world["inputs"]))
    for name, value in world["outputs"].items():
        ctx.store(name, copy.deepcopy(value))
    return ctx


def _category(exc: BaseException) -> str:
    from jinja2 import TemplateSyntaxError, UndefinedError
    from simpleeval import NameNotDefined

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (UndefinedError, NameNotDefined)):
            return "undefined"
        if isinstance(seen, (TemplateSyntaxError, SyntaxError)):
            return "syntax"
        seen = seen.__cause__
    return "error"


def _error(exc: BaseException) -> dict[str, Any]:
    cause = exc.__cause__
    return {"error": {"type": type(exc).__name__,
                      "message": str(exc.args[0]) if exc.args else str(exc),
                      "cause": type(cause).__name__ if cause is not None else None,
                      "category": _category(exc)}}


def _template(case: dict[str, Any], world: dict[str, Any]) -> Any:
    from conductor.executor.template import TemplateRenderer

    context = _context(world).get_for_template()
    context.update(copy.deepcopy(case.get("vars") or {}))
    return TemplateRenderer().render(case["template"], context)


def _condition(case: dict[str, Any], world: dict[str, Any]) -> Any:
    from conductor.config.schema import RouteDef
    from conductor.engine.router import Router

    if "output" in case:
        output = case["output"]
    else:
        output = world["outputs"][case.get("output_of", "review")]
    routes = [RouteDef(to="yes", when=case["condition"]), RouteDef(to="no")]
    context = _context(world).get_for_template()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = Router().evaluate(routes, copy.deepcopy(output), context)
    if caught:  # simpleeval warns when it ignores part of an expression
        case["_warnings"] = [str(w.message) for w in caught]
    return result.target == "yes"


def _set(case: dict[str, Any], world: dict[str, Any]) -> Any:
    from conductor.config.loader import load_config_string
    from conductor.executor.set_step import SetExecutor

    text = (f"workflow:\n  name: {world['name']}\n  entry_point: s\n"
            "agents:\n  - name: s\n    type: set\n" + textwrap.indent(case["set"], "    "))
    config = load_config_string(text)
    agent = config.agents[0]
    context = _context(world).build_for_agent(agent.name, [], "accumulate", "set")
    return SetExecutor().execute(agent, context).value


def record(case: dict[str, Any], world: dict[str, Any]) -> dict[str, Any]:
    kinds = [k for k in ("template", "condition", "set") if k in case]
    if len(kinds) != 1:
        raise SystemExit(f"case {case.get('id')}: needs exactly one of template/condition/set")
    run = {"template": _template, "condition": _condition, "set": _set}[kinds[0]]
    try:
        out: dict[str, Any] = {"ok": run(case, world)}
    except Exception as exc:  # what Conductor raised is the result
        out = _error(exc)
    if case.get("_warnings"):
        out["warnings"] = case.pop("_warnings")
    return out


def _jsonable(value: Any) -> Any:
    """Non-finite floats as tagged objects, so expected.json stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def main() -> int:
    data = YAML(typ="safe", pure=True).load((HERE / "cases.yaml").read_text(encoding="utf-8"))
    world, cases = data["world"], data["cases"]
    ids = [c["id"] for c in cases]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise SystemExit(f"duplicate case ids: {sorted(dupes)}")
    import conductor

    results = {c["id"]: _jsonable(record(c, world)) for c in cases}
    out = {"conductor_commit": CONDUCTOR_COMMIT,
           "conductor_version": getattr(conductor, "__version__", None),
           "python": sys.version.split()[0],
           "results": results}
    (HERE / "expected.json").write_text(json.dumps(out, indent=1, ensure_ascii=False,
                                                   allow_nan=False) + "\n", encoding="utf-8")
    print(f"recorded {len(results)} cases into {HERE / 'expected.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
