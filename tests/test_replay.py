"""Recorded runs: replay offline with identical trajectories, divergence reports, fork, diff."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "dev-review"


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PODIUM_HOME"] = str(home)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def _podium(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "podium", *args], env=_env(home), text=True,
                          capture_output=True, timeout=120, check=False, stdin=subprocess.DEVNULL)


def _repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    shutil.copytree(EXAMPLE / "sample-repo", repo)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=repo, check=True, capture_output=True)
    return repo


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A private copy of the example (so tests may edit it), a repo and a PODIUM_HOME."""
    wf_dir = tmp_path / "dev-review"
    shutil.copytree(EXAMPLE, wf_dir, ignore=shutil.ignore_patterns("sample-repo"))
    return wf_dir, _repo(tmp_path), tmp_path / "home"


def _run(home: Path, wf_dir: Path, repo: Path, scenario: str, *extra: str) -> tuple[str, str]:
    proc = _podium(home, "run", str(wf_dir / "workflow.yaml"), "--json",
                   "--input", f"ticket={wf_dir / 'tickets' / 'add-slugify.md'}",
                   "--input", f"repo_dir={repo}",
                   "--responses", str(wf_dir / "responses" / f"{scenario}.yaml"), *extra)
    assert proc.returncode in (0, 1), proc.stderr
    result = json.loads(proc.stdout)
    return result["run_id"], json.dumps(result["output"], indent=2, ensure_ascii=False)


@pytest.mark.parametrize("scenario", ["happy", "tests-fail-once", "changes-then-approve",
                                      "three-reviews-stop", "malformed-then-corrected"])
def test_recorded_scenarios_replay_identically(workspace: tuple[Path, Path, Path],
                                               scenario: str) -> None:
    wf_dir, repo, home = workspace
    run_id, output = _run(home, wf_dir, repo, scenario)
    (repo / "textkit.py").write_text("# changed after the run\n", encoding="utf-8")
    before = _snapshot(repo)
    proc = _podium(home, "replay", run_id)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == output
    assert "identical trajectory" in proc.stderr
    assert _snapshot(repo) == before  # no script ran, no file was written


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".git" not in p.parts and "__pycache__" not in p.parts
            and ".pytest_cache" not in p.parts}


def test_edited_route_condition_diverges_at_the_right_step(
        workspace: tuple[Path, Path, Path]) -> None:
    wf_dir, repo, home = workspace
    run_id, _ = _run(home, wf_dir, repo, "changes-then-approve")
    wf = wf_dir / "workflow.yaml"
    text = wf.read_text(encoding="utf-8")
    edited = text.replace("when: \"{{ reviewer.output.verdict == 'approve' }}\"",
                          "when: \"{{ reviewer.output.verdict in ['approve', 'changes'] }}\"")
    assert edited != text
    wf.write_text(edited, encoding="utf-8")
    proc = _podium(home, "replay", run_id)
    assert proc.returncode == 6, proc.stderr
    assert "DIVERGED at step 6 ('review_count')" in proc.stderr
    assert "goes to 'handoff_summary' where the recording went to 'developer'" in proc.stderr
    assert "route condition changed its value" in proc.stderr
    assert proc.stdout == ""


def test_edited_prompt_is_reported_as_a_different_prompt(
        workspace: tuple[Path, Path, Path]) -> None:
    wf_dir, repo, home = workspace
    run_id, _ = _run(home, wf_dir, repo, "happy")
    wf = wf_dir / "workflow.yaml"
    wf.write_text(wf.read_text(encoding="utf-8").replace(
        "Review this change against", "Review this change strictly against"), encoding="utf-8")
    proc = _podium(home, "replay", run_id, "--json")
    assert proc.returncode == 6
    report = json.loads(proc.stdout)
    assert report["identical"] is False
    assert report["kind"] == "prompt"
    assert report["step"] == "reviewer"
    assert report["at_index"] == 5
    assert "+Review this change strictly against" in report["why"]


def test_fork_from_reviewer_with_another_verdict_takes_the_other_route(
        workspace: tuple[Path, Path, Path]) -> None:
    wf_dir, repo, home = workspace
    parent, _ = _run(home, wf_dir, repo, "changes-then-approve")
    proc = _podium(home, "fork", parent, "--from", "reviewer:1", "--json",
                   "--responses", str(wf_dir / "responses" / "happy.yaml"))
    assert proc.returncode == 0, proc.stderr
    fork = json.loads(proc.stdout)
    assert fork["run_id"] != parent
    assert fork["steps"] == ["validate_ticket", "developer", "run_tests", "collect_diff",
                             "reviewer", "review_count", "handoff_summary",
                             "human_acceptance", "accepted"]
    runs = json.loads(_podium(home, "runs", "--format", "json").stdout)
    by_id = {r["id"]: r for r in runs}
    assert by_id[fork["run_id"]]["forked_from"] == parent
    diff = _podium(home, "diff", parent, fork["run_id"])
    assert diff.returncode == 1
    assert "first difference at step 5" in diff.stdout
    assert "review_count → developer" in diff.stdout
    assert "review_count → handoff_summary" in diff.stdout
    same = _podium(home, "diff", parent, parent, "--format", "json")
    assert same.returncode == 0
    assert json.loads(same.stdout)["same"] is True


def test_replay_from_an_exported_event_log(workspace: tuple[Path, Path, Path],
                                           tmp_path: Path) -> None:
    wf_dir, repo, home = workspace
    run_id, output = _run(home, wf_dir, repo, "tests-fail-once")
    log = tmp_path / "run.jsonl"
    log.write_text(_podium(home, "events", run_id).stdout, encoding="utf-8")
    proc = _podium(tmp_path / "other-home", "replay", str(log))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == output


def test_unrecorded_run_cannot_be_replayed(workspace: tuple[Path, Path, Path]) -> None:
    wf_dir, repo, home = workspace
    run_id, _ = _run(home, wf_dir, repo, "happy", "--no-record")
    events = [json.loads(line) for line in _podium(home, "events", run_id).stdout.splitlines()]
    assert not [e for e in events if e["type"] == "script_output"]
    # a model call keeps its figures (what the run spent is their sum), not its content
    calls = [e for e in events if e["type"] == "model_exchange"]
    assert calls
    assert all(e["request"] == {} and e["response_text"] == "" for e in calls)
    proc = _podium(home, "replay", run_id)
    assert proc.returncode == 2
    assert "recording off" in proc.stderr


def test_secret_values_are_never_recorded(tmp_path: Path) -> None:
    wf = tmp_path / "secret.yaml"
    wf.write_text("""
workflow:
  name: secret
  entry_point: call
  secrets: [SERVICE_TOKEN]
agents:
  - name: call
    type: script
    command: python
    args: ["-c", "import sys; print('token used: ' + sys.argv[1])", "${SERVICE_TOKEN}"]
    routes: [{to: $end}]
output:
  said: "{{ call.output.stdout }}"
""", encoding="utf-8")
    env = _env(tmp_path / "home")
    env["SERVICE_TOKEN"] = "s3cr3t-value-123"
    proc = subprocess.run([sys.executable, "-m", "podium", "run", str(wf), "--json"], env=env,
                          text=True, capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    events = _podium(tmp_path / "home", "events", run_id).stdout
    assert "s3cr3t-value-123" not in events
    assert "<secret:SERVICE_TOKEN>" in events
    db = (tmp_path / "home" / "podium.db").read_bytes()
    assert b"s3cr3t-value-123" not in db
