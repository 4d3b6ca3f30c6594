"""`podium eval`: variants answered by scripted providers whose answers differ by row, with
known figures (pass rates, costs priced from the answers' tokens, Fisher's p-value), the flags
form, tagging, replay, the budget stopping an eval and `--resume` finishing it, the statistics
on their own, and bad specs refused with exit 2."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eval_project import BAD_COST, GOOD_COST, ROWS, eval_project
from helpers_engine import run_cli, write
from podium.app.eval_stats import fisher_exact, mean_interval, percentile, permutation_test


def _eval(home: Path, *args: str | Path, cwd: Path | None = None) -> tuple[int, dict[str, Any]]:
    done = run_cli(home, "eval", *args, "--format", "json", cwd=cwd, timeout=300)
    assert done.returncode != 2, done.stderr
    return done.returncode, json.loads(done.stdout)


def _variant(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in report["variants"] if v["name"] == name)


def test_spec_file_report_has_the_known_figures(tmp_path: Path) -> None:
    root = eval_project(tmp_path)
    home = tmp_path / "home"
    code, report = _eval(home, root / "triage.eval.yaml")
    assert code == 1  # the bad variant's runs break `cost_at_most: 0.005`
    assert set(report) >= {"eval_id", "variants", "differences"}
    good, bad = _variant(report, "good"), _variant(report, "bad")
    for v in (good, bad):
        assert set(v) >= {"name", "runs", "outcomes", "pass_rate", "cost_usd", "cost_by_agent",
                          "tokens", "steps", "latency_s"}
        assert v["runs"] == 4
        assert v["outcomes"] == {"bug": 2, "feature": 2}
        assert v["steps"] == {"mean": 2.0, "median": 2.0, "p90": 2.0}
        assert v["tokens"]["mean"] == 1100
    assert good["pass_rate"] == 1.0
    assert bad["pass_rate"] == 0.0
    assert math.isclose(good["cost_usd"]["mean"], GOOD_COST, rel_tol=1e-9)
    assert math.isclose(bad["cost_usd"]["mean"], BAD_COST, rel_tol=1e-9)
    assert math.isclose(good["cost_by_agent"]["classify"], GOOD_COST, rel_tol=1e-9)
    assert good["cost_usd"]["low"] == pytest.approx(GOOD_COST)  # no spread, no width
    diff = report["differences"]
    assert sorted(r["row"] for r in diff["rows"]) == ["r1", "r2", "r3", "r4"]
    test = diff["tests"][0]
    assert (test["a"], test["b"]) == ("good", "bad")
    assert test["pass_rate"]["test"] == "Fisher's exact test"
    assert test["pass_rate"]["p_value"] == pytest.approx(2 / 70)
    assert test["pass_rate"]["significant"] is True
    assert test["cost_usd"]["p_value"] < 0.05
    failed = [r for r in report["runs"] if r["assertions_failed"]]
    assert {r["variant"] for r in failed} == {"bad"}
    assert failed[0]["assertions_failed"] == ["cost at most 0.005"]
    # every run is an ordinary run: tagged, listed by metadata, replayable
    listed = run_cli(home, "runs", "-m", f"eval={report['eval_id']}", "--format", "json")
    rows = json.loads(listed.stdout)
    assert len(rows) == 8
    some = report["runs"][0]["run_id"]
    replayed = run_cli(home, "replay", some)
    assert replayed.returncode == 0, replayed.stderr
    # the variant's workflow is a copy beside the original, with only its override changed
    copy = root / ".triage.eval-bad.yaml"
    assert "model: gpt-5.5" in copy.read_text(encoding="utf-8")


def test_flags_form_csv_rows_and_a_responses_override(tmp_path: Path) -> None:
    root = eval_project(tmp_path)
    csv_rows = "id,text,expect,responses\n" + "".join(
        f"{rid},{text},{label},answers/{label}.yaml\n" for rid, text, label in ROWS)
    write(root, csv_rows, "rows.csv")
    code, report = _eval(tmp_path / "home", root / "triage.yaml", "--dataset", root / "rows.csv",
                         "--variant", "as-is", "--variant", "all-bug=responses=answers/bug.yaml",
                         "--repeat", "2", cwd=root)
    assert code == 0
    as_is, all_bug = _variant(report, "as-is"), _variant(report, "all-bug")
    assert as_is["runs"] == all_bug["runs"] == 8
    assert as_is["pass_rate"] == 1.0
    assert all_bug["pass_rate"] == 0.5
    assert all_bug["outcomes"] == {"bug": 8}
    assert {r["row"] for r in report["differences"]["rows"]} == {"r2", "r4"}


def test_variants_on_the_real_openai_sdk_against_a_local_wire_server(tmp_path: Path) -> None:
    # No scripted answers: each run's agent goes through the openai SDK to a fake server on
    # 127.0.0.1, which answers by the model each variant gives the agent (the small model
    # gets r3 wrong) and reports the tokens it used; the cost is priced from them.
    from fakes.openai_server import FakeOpenAI, answer
    from helpers_engine import cli_env, podium_argv

    root = eval_project(tmp_path)
    write(root, "".join(f"- id: {rid}\n  inputs: {{text: {text}}}\n  expect: {label}\n"
                        for rid, text, label in ROWS), "live.yaml")

    def reply(req: Any) -> dict[str, Any]:
        body = req.body
        text = json.dumps(body["messages"])
        label = "bug" if ("crash" in text or "null" in text) else "feature"
        if body["model"] == "gpt-5-mini" and "null pointer" in text:
            label = "feature"
        return answer(json.dumps({"label": label}), model=body["model"], usage=(1000, 100, 0))

    with FakeOpenAI() as server:
        server.handler = reply
        env = cli_env(tmp_path / "home", {"OPENAI_BASE_URL": server.url + "/v1",
                                          "OPENAI_API_KEY": "sk-test-eval"})
        done = subprocess.run(podium_argv("eval", root / "triage.yaml", "--dataset",
                                          root / "live.yaml", "--variant",
                                          "small=classify.model=gpt-5-mini", "--variant",
                                          "large=classify.model=gpt-5.5", "--format", "json"),
                              env=env, capture_output=True, text=True, timeout=300,
                              check=False, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        models = sorted(r.body["model"] for r in server.chat_requests())
    report = json.loads(done.stdout)
    small, large = _variant(report, "small"), _variant(report, "large")
    assert models == ["gpt-5-mini"] * 4 + ["gpt-5.5"] * 4
    assert small["pass_rate"] == 0.75
    assert large["pass_rate"] == 1.0
    assert small["outcomes"] == {"bug": 1, "feature": 3}
    assert math.isclose(small["cost_usd"]["mean"], GOOD_COST, rel_tol=1e-9)
    assert math.isclose(large["cost_usd"]["mean"], BAD_COST, rel_tol=1e-9)
    assert [r["row"] for r in report["differences"]["rows"]] == ["r3"]
    assert report["differences"]["tests"][0]["pass_rate"]["significant"] is False


def test_the_budget_stops_the_eval_and_resume_finishes_it(tmp_path: Path) -> None:
    root = eval_project(tmp_path)
    home = tmp_path / "home"
    spec = root / "triage.eval.yaml"
    spec.write_text(spec.read_text().replace("concurrency: 2", "concurrency: 1"))
    stopped = run_cli(home, "eval", spec, "--budget", "0.01", timeout=300)
    assert stopped.returncode == 4, stopped.stdout + stopped.stderr
    assert "stopped: the budget of $0.0100 is spent" in stopped.stdout
    eval_id = stopped.stdout.split()[1]
    first = json.loads(run_cli(home, "runs", "-m", f"eval={eval_id}", "--format",
                               "json").stdout)
    assert len(first) == 4  # r1 good, r1 bad, r2 good, r2 bad: then $0.0169 > $0.01
    code, report = _eval(home, "--resume", eval_id, "--budget", "1")
    assert code == 1  # done; the bad variant still breaks its cost assertion
    assert report["complete"] is True
    keys = [(r["variant"], r["row"], r["repeat"]) for r in report["runs"]]
    assert len(keys) == len(set(keys)) == 8  # nothing ran twice


@pytest.mark.parametrize(("spec", "message"), [
    ("workflow: triage.yaml\ndataset: rows.yaml\nvariants: {x: classfy.model=m}\n",
     "'classfy' is not an agent of the workflow (did you mean 'classify'?)"),
    ("workflow: triage.yaml\ndataset: rows.yaml\nvariants: {x: classify.temperature=1}\n",
     "write AGENT.model"),
    ("workflow: triage.yaml\ndataset: missing.jsonl\n", "cannot read the dataset"),
    ("workflow: triage.yaml\ndataset: rows.yaml\nrepeat: 0\n", "repeat must be"),
    ("workflow: triage.yaml\ndataset: rows.yaml\nbudgett: 1\n", "unknown key(s) budgett"),
])
def test_bad_specs_are_refused_with_exit_2(tmp_path: Path, spec: str, message: str) -> None:
    root = eval_project(tmp_path)
    write(root, spec, "bad.eval.yaml")
    done = run_cli(tmp_path / "home", "eval", root / "bad.eval.yaml")
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_statistics() -> None:
    # Fisher's exact test: the classic tea-tasting table (3 of 4 right) and a lopsided one
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(0.4857, abs=1e-4)
    assert fisher_exact(1, 10, 11, 14) == pytest.approx(0.002759, abs=1e-5)
    assert fisher_exact(2, 2, 2, 2) == 1.0
    ci = mean_interval([1.0, 2.0, 3.0])
    assert ci["mean"] == 2.0
    assert ci["high"] == pytest.approx(2.0 + 4.303 * 1.0 / math.sqrt(3))
    assert mean_interval([1.0, 1.0, 50.0])["low"] == 0.0  # a cost is never negative
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90) == pytest.approx(9.1)
    same = permutation_test([1.0, 2.0, 3.0], [1.5, 2.5, 2.0])
    apart = permutation_test([1.0, 1.1, 0.9, 1.0], [5.0, 5.1, 4.9, 5.0])
    assert same > 0.5
    assert apart < 0.05
    assert permutation_test([1.0, 1.1, 0.9, 1.0], [5.0, 5.1, 4.9, 5.0]) == apart  # seeded
