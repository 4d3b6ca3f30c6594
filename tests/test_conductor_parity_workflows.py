"""Parity with Conductor over whole workflows: every case of
tests/corpus/conductor/workflows.yaml validated and run (with --skip-gates) by podium and
compared with what Conductor itself gave (workflows.expected.json, recorded once from
Conductor's source by tests/corpus/conductor/record_workflows.py; Conductor never runs here).

Validate is compared by its verdict (valid or not: podium words its diagnostics its own way),
a run by its final output, or by both ending in an error. A case marked `caught_early` is one
Conductor accepts at validate and fails when the run reaches it, and podium refuses at
validate (a row of docs/compatibility.md says why); `differs` pins podium's own reading of a
deliberate difference, as in test_conductor_parity.py.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from helpers_engine import run_workflow
from podium.check.validate import validate_file

CORPUS = Path(__file__).parent / "corpus" / "conductor"
COMPATIBILITY = Path(__file__).resolve().parent.parent / "docs" / "compatibility.md"
CASES: list[dict[str, Any]] = YAML(typ="safe", pure=True).load(
    (CORPUS / "workflows.yaml").read_text(encoding="utf-8"))["cases"]
EXPECTED = json.loads((CORPUS / "workflows.expected.json").read_text(encoding="utf-8"))
GROUPS = ("field_guards", "route_conditions", "script_merge", "group_errors", "questions",
          "hooks", "input_refs", "leniency", "subworkflow")


def _rows() -> set[str]:
    rows = set()
    for line in COMPATIBILITY.read_text(encoding="utf-8").splitlines():
        if line.startswith("| ") and line.count("|") >= 4:
            rows.add(line.split("|")[1].strip())
    return rows


def _write(case: dict[str, Any], folder: Path) -> Path:
    for name, text in (case.get("files") or {}).items():
        (folder / name).write_text(text, encoding="utf-8")
    path = folder / "wf.yaml"
    path.write_text(case["workflow"], encoding="utf-8")
    return path


def podium_validate(path: Path) -> dict[str, Any]:
    result = validate_file(path)
    if result.sink.errors or result.model is None:
        return {"error": [d.format() for d in result.sink.sorted() if d.severity == "error"]}
    return {"ok": [d.format() for d in result.sink.sorted()]}


def podium_run(case: dict[str, Any], path: Path) -> dict[str, Any]:
    run = run_workflow(path, inputs=case.get("inputs") or {}, raw_inputs=True,
                       skip_gates=True, check=False)
    if run.result.error is not None or run.exit_code != 0:
        return {"error": run.error_text() or f"exit {run.exit_code}"}
    return {"ok": run.output}


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _verdict(result: dict[str, Any]) -> str:
    return "ok" if "ok" in result else "error"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_podium_runs_what_conductor_runs(case: dict[str, Any], tmp_path: Path) -> None:
    conductor = EXPECTED["results"][case["id"]]
    path = _write(case, tmp_path)
    checked = podium_validate(path)
    if "caught_early" in case:
        assert case["caught_early"] in _rows(), case["caught_early"]
        assert "ok" in conductor["validate"], f"Conductor's validate refuses it: {conductor}"
        # (an agent's prompt is validated only: no model runs here)
        assert "error" in conductor.get("run", {"error": None}), \
            f"Conductor's run no longer fails: {conductor}"
        assert "error" in checked, f"podium's validate let it through: {checked}"
        return
    if "differs" in case:
        assert case["differs"] in _rows(), f"docs/compatibility.md has no row '{case['differs']}'"
        want = case["podium"]
        assert _verdict(checked) == want["validate"], f"podium validate: {checked}"
        same = _verdict(conductor["validate"]) == want["validate"]
        if "run" in want:
            got = podium_run(case, path)
            assert _same(got, want["run"]), f"podium gave {got}, the case pins {want['run']}"
            same = same and _same(conductor.get("run"), want["run"])
        assert not same, f"Conductor gives the same ({conductor}): this case no longer differs"
        return
    assert _verdict(checked) == _verdict(conductor["validate"]), \
        f"podium validate: {checked}\nConductor validate: {conductor['validate']}"
    if "ok" not in checked or "run" not in conductor:
        return
    got = podium_run(case, path)
    want = conductor["run"]
    if "ok" in want:
        assert _same(got, want), f"podium: {got}\nConductor: {want}"
    else:
        assert "error" in got, f"podium: {got}\nConductor: {want}"


def test_the_workflow_corpus_is_complete_and_recorded() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    assert set(EXPECTED["results"]) == set(ids), "re-run record_workflows.py: it is stale"
    assert EXPECTED["conductor_commit"] == "3c07139"
    assert len(ids) >= 200
    counts = Counter(c["group"] for c in CASES)
    assert set(counts) == set(GROUPS)
    for case in CASES:
        assert ("differs" in case) == ("podium" in case), case["id"]
