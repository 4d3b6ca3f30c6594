"""`podium test`: workflow tests in YAML, run through the real CLI, loader and engine.

The shipped examples (the article's dev-review scenarios and the review-counter regression)
must pass; a wrong expectation fails with both paths side by side; a broken test file is
rejected with a located message; coverage is computed from the route events.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest

from podium.check.validate import validate_file
from podium.events.model import RouteTaken
from podium.language.model import WorkflowFile
from podium.testing import runner
from podium.testing.coverage import (
    CoverageItem,
    StepCoverage,
    WorkflowCoverage,
    compute_coverage,
)
from podium.testing.report import side_by_side

Runner = Callable[..., subprocess.CompletedProcess[str]]

ROOT = Path(__file__).resolve().parents[1]
COUNTER = ROOT / "examples" / "review-counter"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def counter_copy(tmp_path: Path) -> Path:
    """The review-counter workflows in a folder of their own."""
    folder = tmp_path / "counter"
    folder.mkdir()
    for name in ("workflow.yaml", "workflow-reset.yaml"):
        shutil.copy(COUNTER / name, folder / name)
    return folder


def run_in_process(capsys: pytest.CaptureFixture[str], *paths: Path, fmt: str = "text",
                   select: str | None = None) -> tuple[int, str, str]:
    code = runner.test_command(list(paths), fmt, select)
    out = capsys.readouterr()
    return code, out.out, out.err


# --------------------------------------------------------------------------- the real CLI


def test_shipped_examples_pass_and_report_coverage(podium_cli: Runner, tmp_path: Path) -> None:
    proc = podium_cli("test", "examples/", env={"PODIUM_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for name in ("invalid ticket ends before any model call",
                 "failing tests send the work back to the developer once",
                 "reviewer asks for changes once, then approves, and the person accepts",
                 "three reviews without approval escalate, and stop ends in blocked",
                 "an oversized diff ends in change_too_large before any review",
                 "a blocked verdict escalates at once, without waiting for three reviews",
                 "the counter keeps its value and reaches 3",
                 "a counter that resets ends in counter_reset"):
        assert re.search(rf"^  PASS {re.escape(name)} \(\d+ steps?, \d+\.\d\ds", out, re.M), name
    assert "FAIL" not in out
    assert "Route coverage of examples/dev-review/workflow.yaml (9 tests)" in out
    assert "route coverage: 17/17 routes and options taken (100%)" in out
    assert re.search(r"\[x\] options\[1\] -> blocked +option 'stop' \(Stop\) +2 tests", out)
    # the regression workflow never resets: that route is reported as not taken
    assert "Route coverage of examples/review-counter/workflow.yaml (1 test)" in out
    assert re.search(r"\[ \] routes\[0\] -> counter_reset +when .* not taken", out)
    assert "route coverage: 3/4 routes and options taken (75%)" in out
    assert out.rstrip().splitlines()[-1].startswith("11 passed, 0 failed (11 tests in 2 files")
    assert not list(tmp_path.iterdir()), "podium test must not record runs"


def test_a_wrong_path_fails_with_both_paths_side_by_side(podium_cli: Runner,
                                                         tmp_path: Path) -> None:
    folder = counter_copy(tmp_path)
    write(folder, "wrong.test.yaml", """
        workflow: workflow.yaml
        tests:
          - name: believes the counter stops at 2
            expect:
              steps: [previous, count, previous, count, success]
              terminal: success
              output: {count: 2}
          - name: a right one
            expect: {terminal: success}
        """)
    proc = podium_cli("test", folder, env={"PODIUM_HOME": str(tmp_path / "home")})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    fail = lines.index(next(x for x in lines if "FAIL believes the counter stops at 2" in x))
    assert lines[fail].endswith("wrong.test.yaml:3")
    block = [x.rstrip() for x in lines[fail + 1: fail + 11]]
    assert block[:9] == [
        "      the steps differ from step 5:",
        "           expected      actual",
        "        1  previous   1  previous",
        "        2  count      2  count",
        "        3  previous   3  previous",
        "        4  count      4  count",
        "      >             | 5  previous",
        "                    | 6  count",
        "        5  success    7  success",
    ]
    assert block[9].strip() == "output.count: expected 2, got 3"
    assert "PASS a right one" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("1 passed, 1 failed")


def test_an_invalid_test_file_is_rejected_with_located_messages(podium_cli: Runner,
                                                                tmp_path: Path) -> None:
    folder = counter_copy(tmp_path)
    write(folder, "broken.test.yaml", """
        workflow: workflow.yaml
        tests:
          - name: typo in the terminal
            expect:
              terminal: sucess
          - name: unknown key
            expct: {status: success}
        """)
    proc = podium_cli("test", folder / "broken.test.yaml",
                      env={"PODIUM_HOME": str(tmp_path / "home")})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.splitlines()
    assert err[0].endswith("broken.test.yaml:5:17: tests[0].expect.terminal: 'sucess' is not a "
                           "terminate step of the workflow (did you mean 'success'?)")
    assert any(x.endswith("broken.test.yaml:7:5: tests[1].expct: unknown key 'expct' (did you "
                          "mean 'expect'?)") for x in err)
    assert "no test was run" in err[-1]
    assert "PASS" not in proc.stdout


def test_json_format(podium_cli: Runner, tmp_path: Path) -> None:
    proc = podium_cli("test", "examples/review-counter", "--format", "json",
                      env={"PODIUM_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["version"], data["exit_code"]) == (1, 0)
    summary = data["summary"]
    assert isinstance(summary.pop("elapsed"), float)
    assert summary.pop("text").startswith("2 passed, 0 failed (2 tests in 1 file")
    assert summary == {"passed": 2, "failed": 0, "total": 2, "deselected": 0, "files": 1}
    [file] = data["files"]
    assert file["file"] == "examples/review-counter/workflow.test.yaml"
    first = file["tests"][0]
    assert set(first) == {"name", "file", "at", "workflow", "passed", "status", "terminal",
                          "reason", "error", "steps", "model_calls", "output", "elapsed",
                          "failures"}
    assert (first["passed"], first["status"], first["terminal"], first["output"]) == \
        (True, "success", "success", {"count": 3})
    assert first["steps"] == ["previous", "count"] * 3 + ["success"]
    assert [c["workflow"] for c in data["coverage"]] == [
        "examples/review-counter/workflow.yaml", "examples/review-counter/workflow-reset.yaml"]
    cov = data["coverage"][0]
    assert (cov["taken"], cov["total"], cov["percent"], cov["tests"]) == (3, 4, 75, 1)
    count = next(s for s in cov["steps"] if s["step"] == "count")
    assert count["type"] == "set"
    assert count["items"][0] == {
        "kind": "route", "index": 0, "to": "counter_reset", "taken": False, "tests": [],
        "when": "{{ count.output < 1 or count.output <= previous.output }}"}
    assert count["items"][1]["tests"] == ["the counter keeps its value and reaches 3"]


# --------------------------------------------------------------------------- in process


def test_exit_3_when_there_is_nothing_to_run(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    code, _, err = run_in_process(capsys, tmp_path)
    assert code == 3
    assert "no test files (*.test.yaml, *.test.yml)" in err
    code, _, err = run_in_process(capsys, tmp_path / "missing")
    assert (code, err.strip()) == (3, f"podium test: no such file or folder: "
                                      f"{tmp_path / 'missing'}")
    code, _, err = run_in_process(capsys, COUNTER, select="no such name")
    assert code == 3
    assert "no test name contains 'no such name' (2 tests found)" in err


def test_select_with_k(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_in_process(capsys, COUNTER, select="RESETS")
    assert code == 0
    assert "PASS a counter that resets ends in counter_reset" in out
    assert "reaches 3" not in out
    assert "1 passed, 0 failed (1 test in 1 file" in out
    assert "1 deselected by -k 'RESETS'" in out


ARTICLE_TEST = """
    workflow: {workflow}
    inputs: {{ticket: tickets/add-slugify.md, repo_dir: sample-repo}}
    x-ok: &ok {{output: {{valid: true, reason: ok, complexity: small, acceptance_criteria: x}}}}
    x-dev: &dev {{output: {{summary: done, files_changed: [textkit.py]}}}}
    tests:
    {tests}
    """


def article_test(tmp_path: Path, tests: str) -> Path:
    workflow = ROOT / "examples" / "dev-review" / "workflow.yaml"
    text = textwrap.dedent(ARTICLE_TEST).format(workflow=workflow,
                                                tests=textwrap.indent(textwrap.dedent(tests),
                                                                      "  "))
    path = tmp_path / "dev-review" / "cases.test.yaml"
    path.parent.mkdir()
    shutil.copytree(ROOT / "examples" / "dev-review" / "tickets", path.parent / "tickets")
    (path.parent / "sample-repo").mkdir()
    path.write_text(text, encoding="utf-8")
    return path


def test_missing_answers_and_stubs_fail_with_clear_messages(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = article_test(tmp_path, """
        - name: gate without an answer
          agents:
            developer: [*dev]
            reviewer: [{output: {verdict: blocked, findings: []}}]
          scripts:
            validate_ticket: [*ok]
            run_tests: [{exit_code: 0}]
            collect_diff: [{output: {diff: "", truncated: false}}]
          expect: {terminal: blocked}
        - name: script stubbed too few times
          agents: {developer: [*dev, *dev]}
          scripts:
            validate_ticket: [*ok]
            run_tests: [{exit_code: 1, stdout: "1 failed"}]
          expect: {terminal: blocked}
        - name: agent answered too few times
          agents: {developer: [*dev]}
          scripts:
            validate_ticket: [*ok]
            run_tests: [{exit_code: 1}, {exit_code: 0}]
          expect: {terminal: blocked}
        - name: an answer that breaks the output contract
          agents: {developer: [{output: {summary: done}}]}
          scripts: {validate_ticket: [*ok]}
          expect: {terminal: blocked}
        - name: leftovers
          agents: {developer: [*dev]}
          gates: {escalation: [stop]}
          scripts:
            validate_ticket: [{output: {valid: false, reason: r, complexity: small, acceptance_criteria: ""}}]
          expect: {terminal: ticket_invalid, model_calls: 0}
        """)
    code, out, _ = run_in_process(capsys, path)
    assert code == 1
    assert "human gate 'escalation' was reached, but the test gives it no answer: add gates: " \
           "{escalation: [VALUE]} (options: retry, stop)" in out
    assert "steps run: validate_ticket -> developer -> run_tests -> collect_diff -> reviewer " \
           "-> review_count -> escalation  [error]" in out
    assert "script 'run_tests' ran for the 2nd time, but the test stubs 1 execution: add one " \
           "under scripts.run_tests" in out
    assert "agent 'developer' was called for the 2nd time, but the test scripts 1 answer for " \
           "it: add one under agents.developer" in out
    assert "the scripted answer for agent 'developer' (execution 1, attempt 1) breaks its " \
           "output contract: missing required output field: files_changed" in out
    assert "scripted but never used: agents.developer[0], gates.escalation[0]" in out
    assert "0 passed, 5 failed" in out


def test_stubs_go_through_the_script_contract(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    path = article_test(tmp_path, """
        - name: a stub that breaks validate_ticket's schema is a contract error
          scripts: {validate_ticket: [{output: {valid: true}}]}
          expect:
            steps: [validate_ticket]
            status: error
            error: "stdout JSON breaks the output schema: missing required output field: reason"
        - name: stdout that is not JSON is a contract error too
          scripts: {validate_ticket: [{stdout: "all good", exit_code: 0}]}
          expect: {status: error, error: "stdout is not one JSON object"}
        - name: without a schema the stub's JSON keys join exit_code and stdout
          agents: {developer: [*dev, *dev]}
          scripts:
            validate_ticket: [*ok]
            run_tests: [{exit_code: 0, output: {exit_code: 1}}, {exit_code: 0}]
            collect_diff: [{output: {diff: "", truncated: true}}]
          expect:
            steps: [validate_ticket, developer, run_tests, developer, run_tests, collect_diff,
                    change_too_large]
        - name: an unexpected error fails a test that did not expect it
          scripts: {validate_ticket: [{output: {valid: true}}]}
          expect: {steps: [validate_ticket]}
        """)
    code, out, _ = run_in_process(capsys, path)
    assert code == 1, out
    assert "PASS a stub that breaks validate_ticket's schema is a contract error" in out
    assert "PASS stdout that is not JSON is a contract error too" in out
    assert "PASS without a schema the stub's JSON keys join exit_code and stdout" in out
    assert "FAIL an unexpected error fails a test that did not expect it" in out
    assert "the run stopped with status error: step 'validate_ticket' (execution 1): stdout " \
           "JSON breaks the output schema" in out
    assert "3 passed, 1 failed" in out


def test_real_scripts_run_in_the_test_folder_and_limits_can_be_expected(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "real"
    write(folder, "data/word.txt", "hello\n")
    write(folder, "wf.yaml", f"""
        workflow:
          name: real-script
          entry_point: read
          input:
            path: {{type: string, required: true}}
        agents:
          - name: read
            type: script
            command: {json.dumps(sys.executable)}
            args: ["-c", "import json,sys; print(json.dumps({{'word': open(sys.argv[1]).read().strip()}}))", "{{{{ workflow.input.path }}}}"]
            routes:
              - to: again
                when: "{{{{ read.output.word == 'hello' }}}}"
              - to: $end
          - name: again
            type: set
            value: "{{{{ 1 }}}}"
            routes:  # a way out the data never takes (validate refuses a loop with none)
              - to: $end
                when: "{{{{ read.output.word == 'stop' }}}}"
              - to: again
        output:
          word: "{{{{ read.output.word }}}}"
        """)
    write(folder, "wf.test.yaml", """
        workflow: wf.yaml
        tests:
          - name: the real script reads a path relative to the test file
            inputs: {path: data/word.txt}
            max_iterations: 4
            expect:
              steps: [read, again, again, again]
              status: limit
              error: max_iterations (4)
              model_calls: 0
          - name: a stub replaces it
            inputs: {path: nowhere}
            scripts: {read: [{output: {word: bye}}]}
            expect: {steps: [read], terminal: $end, status: success, output: {word: bye}}
        """)
    code, out, _ = run_in_process(capsys, folder)
    assert code == 0, out
    assert "2 passed, 0 failed" in out


def test_a_test_file_may_only_name_steps_and_options_the_workflow_has(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = article_test(tmp_path, """
        - name: wrong names
          inputs: {repo: x}
          agents: {validate_ticket: [*dev], reviwer: [*dev]}
          gates: {escalation: [stp]}
          scripts: {developer: [{exit_code: 0}]}
          expect: {steps: [validate_tiket]}
        """)
    code, _, err = run_in_process(capsys, path)
    assert code == 2
    messages = [line.split(": ", 2)[1:] for line in err.splitlines()[:-1]]
    assert messages == [
        ["tests[0].inputs.repo", "the workflow has no input 'repo' (did you mean 'repo_dir'?)"],
        ["tests[0].agents.validate_ticket", "'validate_ticket' is a script step, not an agent"],
        ["tests[0].agents.reviwer", "the workflow has no step 'reviwer' (did you mean "
                                    "'reviewer'?)"],
        ["tests[0].gates.escalation[0]", "'stp' is not an option of gate 'escalation' (did you "
                                         "mean 'stop'?)"],
        ["tests[0].scripts.developer", "'developer' is a agent step, not a script"],
        ["tests[0].expect.steps[0]", "the workflow has no step 'validate_tiket' (did you mean "
                                     "'validate_ticket'?)"]]
    assert re.match(r".*cases\.test\.yaml:\d+:\d+: ", err.splitlines()[0])


# --------------------------------------------------------------------------- coverage


def load(path: Path) -> WorkflowFile:
    result = validate_file(path)
    assert result.model is not None
    return result.model


RouteKind = Literal["when", "default", "option", "implicit"]


def route(step: str, index: int, kind: RouteKind = "when") -> RouteTaken:
    return RouteTaken(from_step=step, to_step="x", route_index=index, kind=kind)


def test_coverage_counts_routes_and_options_by_index() -> None:
    wf = load(ROOT / "examples" / "dev-review" / "workflow.yaml")
    cov = compute_coverage(wf, "wf.yaml", [
        ("t1", [route("validate_ticket", 1, "default")]),
        ("t2", [route("validate_ticket", 0), route("escalation", 1, "option"),
                route("escalation", 1, "option"), route("ticket_invalid", -1, "implicit")]),
    ])
    assert (cov.taken, cov.total, cov.tests) == (3, 17, 2)
    assert cov.percent == 18
    by_ref = {(i.step, i.ref): i for i in cov.items}
    assert by_ref["validate_ticket", "routes[1]"].tests == ["t1"]
    assert by_ref["escalation", "options[1]"].tests == ["t2"]
    assert not by_ref["escalation", "options[0]"].taken
    assert by_ref["escalation", "options[0]"].describe() == \
        "options[0] -> developer  option 'retry' (Send back to the Dev)"
    assert by_ref["review_count", "routes[3]"].describe() == "routes[3] -> developer  otherwise"
    assert by_ref["developer", "routes[0]"].describe() == "routes[0] -> run_tests  always"
    # terminate steps have nothing to cover; every other step is listed in workflow order
    assert [s.step for s in cov.steps] == [
        "validate_ticket", "developer", "run_tests", "collect_diff", "reviewer", "review_count",
        "escalation", "handoff_summary", "human_acceptance"]
    assert len(cov.untaken()) == 14


def test_coverage_percent_is_100_only_when_everything_is_taken() -> None:
    wf = load(ROOT / "examples" / "dev-review" / "workflow.yaml")
    everything = [route(i.step, i.index, "option" if i.kind == "option" else "when")
                  for s in compute_coverage(wf, "w", []).steps for i in s.items]
    full = compute_coverage(wf, "w", [("all", everything)])
    assert (full.taken, full.percent, full.untaken()) == (17, 100, [])
    none = compute_coverage(wf, "w", [])
    assert (none.taken, none.percent) == (0, 0)
    items = [CoverageItem("s", "route", i, "x", tests=["t"] if i else []) for i in range(300)]
    assert WorkflowCoverage("w", [StepCoverage("s", "set", items)]).percent == 99
    items = [CoverageItem("s", "route", i, "x", tests=[] if i else ["t"]) for i in range(300)]
    assert WorkflowCoverage("w", [StepCoverage("s", "set", items)]).percent == 1


def test_side_by_side_aligns_the_paths_and_marks_the_first_difference() -> None:
    lines = side_by_side(["a", "bb", "c"], ["a", "x"])
    assert [x.rstrip() for x in lines] == [
        "      the steps differ from step 2:",
        "           expected      actual",
        "        1  a          1  a",
        "      > 2  bb       | 2  x",
        "        3  c        |",
    ]
    # after the common start, a step only one side has faces a blank
    lines = side_by_side(["a", "b", "c", "d"], ["a", "b", "x", "c", "d"])
    assert [x.rstrip() for x in lines[2:]] == [
        "        1  a          1  a",
        "        2  b          2  b",
        "      >             | 3  x",
        "        3  c          4  c",
        "        4  d          5  d",
    ]
