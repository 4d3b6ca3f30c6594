"""Parity with Conductor: every case of tests/corpus/conductor/cases.yaml run through podium
and compared with what Conductor itself gave (expected.json, recorded once from Conductor's
source by tests/corpus/conductor/record.py; Conductor never runs here).

Templates go through podium's TemplateEngine with the context its ContextBuilder builds,
conditions through the router's `evaluate_condition`, set steps through the real loader and
the set executor. A result is a value, or an error compared by its category (an unknown
name, a syntax error, or any other error): podium words its errors its own way. A case marked
`differs` is a deliberate difference: podium's own result is pinned instead, Conductor's must
really differ, and docs/compatibility.md must have the row the case names.
"""

from __future__ import annotations

import copy
import json
import math
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from helpers_engine import load
from podium.clock import FakeClock
from podium.engine.routing import evaluate_condition
from podium.engine.run import Engine
from podium.errors import PodiumError
from podium.gates.base import SkipGatesAnswerer
from podium.providers.base import ProviderRegistry
from podium.providers.scripted import ResponsesFile, ScriptedProvider
from podium.steps.base import StepCall
from podium.steps.set_step import execute_set
from podium.steps.state import ContextBuilder, RunState, WorkflowInfo
from podium.templating import RenderFailure, TemplateEngine

CORPUS = Path(__file__).parent / "corpus" / "conductor"
COMPATIBILITY = Path(__file__).resolve().parent.parent / "docs" / "compatibility.md"
DATA = YAML(typ="safe", pure=True).load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))
WORLD: dict[str, Any] = DATA["world"]
CASES: list[dict[str, Any]] = DATA["cases"]
EXPECTED = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))
GROUPS = ("dict_methods", "string_methods", "filters", "tests", "globals", "bare_conditions",
          "is_in_functions", "jinja_conditions", "group_outputs", "set_typing", "undefined_values")
KINDS = {"undefined": "undefined", "syntax": "syntax"}  # every other podium kind: 'error'


def _jsonable(value: Any) -> Any:
    """As record.py stores values: non-finite floats tagged, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal JSON types (True is not 1, 1 is not 1.0)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _state() -> RunState:
    state = RunState(inputs=copy.deepcopy(WORLD["inputs"]))
    for name, value in WORLD["outputs"].items():
        state.store(name, copy.deepcopy(value))
    return state


def _contexts() -> ContextBuilder:
    info = WorkflowInfo(WORLD["name"], WORLD["description"], WORLD["dir"], WORLD["file"])
    return ContextBuilder(info, frozenset(WORLD["groups"]))


ENGINE = TemplateEngine()


def _template(case: dict[str, Any], _tmp: Path) -> Any:
    context = _contexts().full(_state())
    context.update(copy.deepcopy(case.get("vars") or {}))
    return ENGINE.render(case["template"], context)


def _condition(case: dict[str, Any], _tmp: Path) -> Any:
    output = case["output"] if "output" in case else \
        WORLD["outputs"][case.get("output_of", "review")]
    scope = _contexts().full(_state())
    scope["output"] = copy.deepcopy(output)
    holds, _raw = evaluate_condition(ENGINE, case["condition"], scope)
    return holds


def _set(case: dict[str, Any], tmp: Path) -> Any:
    path = tmp / f"{case['id']}.yaml"
    path.write_text(f"workflow:\n  name: {WORLD['name']}\n  entry_point: s\n"
                    "agents:\n  - name: s\n    type: set\n"
                    + textwrap.indent(case["set"], "    "), encoding="utf-8")
    wf = load(path, check=False)
    engine = Engine(wf, path, inputs=copy.deepcopy(WORLD["inputs"]),
                    providers=ProviderRegistry(ScriptedProvider(ResponsesFile())),
                    answerer=SkipGatesAnswerer(), clock=FakeClock())
    state = _state()
    engine.state.outputs, engine.state.history = state.outputs, state.history
    engine.services.contexts = _contexts()
    return execute_set(StepCall(wf.agents[0], 1, engine.services)).output


def podium_result(case: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """{'ok': value} or {'error': kind}: a RenderFailure's kind, or 'undefined' / 'error' for
    a set step's failure."""
    run = _template if "template" in case else _condition if "condition" in case else _set
    try:
        return {"ok": _jsonable(run(case, tmp))}
    except RenderFailure as exc:
        return {"error": exc.kind}
    except PodiumError as exc:
        return {"error": "undefined" if ": undefined: " in f" {exc}" else "error"}


def _category(result: dict[str, Any]) -> dict[str, Any]:
    if "error" in result:
        kind = result["error"]
        return {"error": KINDS.get(kind if isinstance(kind, str) else kind["category"], "error")}
    return {"ok": result["ok"]}


def _rows() -> set[str]:
    rows = set()
    for line in COMPATIBILITY.read_text(encoding="utf-8").splitlines():
        if line.startswith("| ") and line.count("|") >= 4:
            rows.add(line.split("|")[1].strip())
    return rows


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_podium_gives_what_conductor_gives(case: dict[str, Any], tmp_path: Path) -> None:
    conductor = EXPECTED["results"][case["id"]]
    got = podium_result(case, tmp_path)
    if "differs" in case:
        assert case["differs"] in _rows(), \
            f"docs/compatibility.md has no row '{case['differs']}'"
        want = case["podium"]
        if "ok" in want:
            want = {"ok": _jsonable(want["ok"])}
        # an error is pinned by its category: which bound of the sandbox refuses a value
        # ('security', 'size', 'limit') is the sandbox's business
        assert _same(_category(got), _category(want)), \
            f"podium gave {got}, the case pins {want}"
        assert not _same(_category(got), _category(conductor)), \
            f"Conductor gives the same ({conductor}): this case no longer differs"
        return
    assert _same(_category(got), _category(conductor)), \
        f"podium: {got}\nConductor: {conductor}"


def test_the_corpus_is_complete_and_recorded() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    assert set(EXPECTED["results"]) == set(ids), "re-run record.py: expected.json is stale"
    assert EXPECTED["conductor_commit"] == "3c07139"
    assert len(ids) >= 150
    counts = Counter(c["group"] for c in CASES)
    assert set(counts) == set(GROUPS)
    assert all(n >= 10 for n in counts.values()), counts
    for case in CASES:
        assert sum(k in case for k in ("template", "condition", "set")) == 1, case["id"]
        assert ("differs" in case) == ("podium" in case), case["id"]
