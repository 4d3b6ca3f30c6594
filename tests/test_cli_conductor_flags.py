"""Conductor's command line, whole (spec 11, 5.4, 2.9): each flag and command as a user types
it, the real CLI in a subprocess, PODIUM_HOME in tmp_path."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from helpers_engine import cli_env, podium_argv, write

TIMEOUT = 60.0


def _cli(root: Path, *args: str | Path, cwd: Path | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), cwd=cwd or root, env=cli_env(root / "home"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)


def _json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


ECHO = """
workflow:
  name: echo
  entry_point: a
  input:
    name: {type: string}
    n: {type: number, default: 1}
    tags: {type: array, default: []}
agents:
  - {name: a, type: set, value: {who: "{{ workflow.input.name }}", n: "{{ workflow.input.n }}",
     tags: "{{ workflow.input.tags | tojson }}"}, routes: [{to: $end}]}
output: {who: "{{ a.output.who }}", tags: "{{ a.output.tags }}"}
"""

AGENT = """
workflow: {name: guided, entry_point: ask}
agents:
  - name: ask
    type: human_gate
    prompt: Go on?
    options: [{label: Go, value: go, route: writer}]
  - name: writer
    prompt: Write a line.
    routes: [{to: $end}]
output: {line: "{{ writer.output.result }}"}
"""

REPLIES = "agents:\n  writer:\n    - output: {result: done}\n"


def _events(root: Path, run_id: str, kind: str) -> list[dict[str, Any]]:
    proc = _cli(root, "events", run_id)
    assert proc.returncode == 0, proc.stderr
    return [e for e in map(json.loads, proc.stdout.splitlines()) if e["type"] == kind]


def test_inputs_metadata_silent_and_the_runs_filter(tmp_path: Path) -> None:
    flow = write(tmp_path, ECHO)
    proc = _cli(tmp_path, "--silent", "run", flow, "--input.name=ada", "--input.n", "3",
                "--input-json", 'tags=["x", "y"]', "-m", "team=core", "--metadata", "ticket=42")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["who"] == "ada"
    assert proc.stderr == ""  # --silent: the result only
    assert _cli(tmp_path, "run", flow, "--input", "name=bob").returncode == 0
    tagged = _json(_cli(tmp_path, "runs", "-f", "json", "--metadata", "team=core"))
    assert [r["metadata"] for r in tagged] == [{"team": "core", "ticket": "42"}]
    assert len(_json(_cli(tmp_path, "runs", "-f", "json"))) == 2
    assert _json(_cli(tmp_path, "runs", "-f", "json", "-m", "team=other")) == []
    shown = _cli(tmp_path, "show", tagged[0]["id"]).stdout
    assert "metadata: team=core ticket=42" in shown
    assert "METADATA" in _cli(tmp_path, "runs").stdout
    bad = _cli(tmp_path, "run", flow, "--input", "name=x", "-m", "novalue")
    assert bad.returncode == 2
    assert "--metadata 'novalue': expected KEY=VALUE" in bad.stderr
    both = _cli(tmp_path, "--quiet", "--silent", "run", flow)
    assert both.returncode == 2


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path: Path) -> None:
    flow = write(tmp_path, AGENT)
    proc = _cli(tmp_path, "run", flow, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "route plan" in proc.stdout
    assert "1. ask (human_gate)" in proc.stdout
    assert "2. writer (agent)" in proc.stdout
    assert "nothing ran (--dry-run)" in proc.stdout
    assert _json(_cli(tmp_path, "runs", "-f", "json")) == []
    broken = write(tmp_path, "workflow: {name: x, entry_point: nope}\nagents: []\n", "bad.yaml")
    assert _cli(tmp_path, "run", broken, "--dry-run").returncode == 2


def test_no_interactive_gate_respond_guidance_checkpoints_and_replay(tmp_path: Path) -> None:
    flow = write(tmp_path, AGENT)
    replies = write(tmp_path, REPLIES, "replies.yaml")
    log = tmp_path / "run.log"
    parked = _cli(tmp_path, "run", flow, "--no-interactive", "--responses", replies,
                  "--log-file", log, "--json")
    assert parked.returncode == 5, parked.stderr
    run_id = json.loads(parked.stdout)["run_id"]
    assert log.is_file()
    assert "ask" in log.read_text(encoding="utf-8")
    too_long = _cli(tmp_path, "guide", run_id, "--text", "x" * 10_001)
    assert too_long.returncode == 2
    guided = _cli(tmp_path, "guide", run_id, "--text", "Keep it short.")
    assert guided.returncode == 0, guided.stderr
    assert "when it goes on" in guided.stderr
    assert "guidance: Keep it short." in _cli(tmp_path, "show", run_id).stdout
    answered = _cli(tmp_path, "gate", "respond", run_id, "go")  # Conductor's name
    assert answered.returncode == 0, answered.stderr
    prompts = _events(tmp_path, run_id, "prompt_rendered")
    assert prompts[-1]["prompt"].endswith(
        "[User Guidance]\nThe following guidance was provided by the user during workflow "
        "execution. Incorporate this guidance into your response:\n- Keep it short.")
    added = _events(tmp_path, run_id, "guidance_added")
    assert [(e["text"], e["step"]) for e in added] == [("Keep it short.", "writer")]
    replay = _cli(tmp_path, "replay", run_id)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    listed = _json(_cli(tmp_path, "checkpoint", "list", run_id, "--json"))
    assert listed
    assert listed[0]["step"] == "writer"
    assert _json(_cli(tmp_path, "checkpoint", "list", "--json"))[0]["run_id"] == run_id
    done = _cli(tmp_path, "guide", run_id, "--text", "late")
    assert done.returncode == 2
    assert "already finished" in done.stderr


def test_resume_guidance_reaches_the_next_prompt(tmp_path: Path) -> None:
    flow = write(tmp_path, AGENT)
    replies = write(tmp_path, REPLIES, "replies.yaml")
    parked = _cli(tmp_path, "run", flow, "--no-interactive", "--responses", replies, "--json")
    run_id = json.loads(parked.stdout)["run_id"]
    assert _cli(tmp_path, "gate", "answer", run_id, "go", "--no-resume").returncode == 0
    resumed = _cli(tmp_path, "resume", run_id, "--guidance", "Use British spelling.",
                   "-m", "phase=two")
    assert resumed.returncode == 0, resumed.stderr
    assert "- Use British spelling." in _events(tmp_path, run_id, "prompt_rendered")[-1]["prompt"]
    assert _json(_cli(tmp_path, "runs", "-f", "json", "-m", "phase=two"))[0]["id"] == run_id
    assert _cli(tmp_path, "resume", run_id, "--guidance", "  ").returncode == 2


def test_workspace_instructions_are_found_given_listed_and_replayed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Prefer small functions.\n", encoding="utf-8")
    (repo / ".github" / "instructions").mkdir(parents=True)
    (repo / ".github" / "instructions" / "all.instructions.md").write_text(
        "---\napplyTo: \"**\"\n---\nWrite tests first.\n", encoding="utf-8")
    (repo / ".github" / "instructions" / "docs.instructions.md").write_text(
        "---\napplyTo: \"docs/**\"\n---\nDocs only.\n", encoding="utf-8")
    (repo / "CLAUDE.md").write_text("Not the closest.\n", encoding="utf-8")
    sub = repo / "src"
    sub.mkdir()
    (sub / "CLAUDE.md").write_text("Closest wins.\n", encoding="utf-8")
    extra = write(tmp_path, "From a file.\n", "extra.md")
    flow = write(tmp_path, AGENT.replace("type: human_gate", "type: human_gate\n    "
                                         "description: gate").replace(
        "workflow: {name: guided, entry_point: ask}",
        "workflow: {name: guided, entry_point: writer, instructions: [From the workflow.]}"))
    replies = write(tmp_path, REPLIES, "replies.yaml")
    proc = _cli(tmp_path, "run", flow, "--responses", replies, "--workspace-instructions",
                "--instructions", extra, "--print-loaded-instructions", "--json", cwd=sub)
    assert proc.returncode == 0, proc.stderr
    assert "[workspace-instructions] 3 file(s) discovered from CWD:" in proc.stderr
    assert "reason=always-on" in proc.stderr
    assert "docs.instructions.md" not in proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    prompt = _events(tmp_path, run_id, "prompt_rendered")[0]["prompt"]
    order = ["Prefer small functions.", "Closest wins.", "Write tests first.",
             "From the workflow.", "From a file.", "Write a line."]
    assert [prompt.index(t) for t in order] == sorted(prompt.index(t) for t in order)
    assert "Not the closest." not in prompt
    assert _cli(tmp_path, "replay", run_id).returncode == 0
    missing = _cli(tmp_path, "run", flow, "--instructions", "nosuch.md")
    assert missing.returncode == 2
    assert "--instructions: no such file: nosuch.md" in missing.stderr


def test_status_and_stop_all_with_nothing_running(tmp_path: Path) -> None:
    assert _json(_cli(tmp_path, "status", "--json")) == []
    assert "no runs are running" in _cli(tmp_path, "status").stdout
    assert _json(_cli(tmp_path, "stop", "--all", "--yes", "--json")) == []
    assert _cli(tmp_path, "stop").returncode == 2  # neither a run nor --all


def test_web_bg_prints_the_console_url_and_the_run_goes_on(tmp_path: Path) -> None:
    flow = write(tmp_path, AGENT)
    replies = write(tmp_path, REPLIES, "replies.yaml")  # no Copilot login here: scripted
    proc = _cli(tmp_path, "run", flow, "--web-bg", "--responses", replies)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("http://127.0.0.1:")
    assert "#token=" in proc.stdout
    live = _json(_cli(tmp_path, "status", "--json"))
    assert len(live) == 1
    assert live[0]["web"] is True
    stopped = _json(_cli(tmp_path, "stop", "--run-id", live[0]["id"], "--json"))
    assert stopped[0]["status"] == "interrupted"


GATED = """
workflow: {name: gated, entry_point: ask}
agents:
  - name: ask
    type: human_gate
    prompt: Ship it?
    options: [{label: Ship, value: ship, route: done}]
  - {name: done, type: set, value: shipped}
output: {said: "{{ done.output }}"}
"""


def test_resume_web_bg_serves_the_parked_run_and_takes_its_answer(tmp_path: Path) -> None:
    from helpers_engine import wait_until

    flow = write(tmp_path, GATED)
    parked = _cli(tmp_path, "run", flow, "--json")
    assert parked.returncode == 5, parked.stderr
    run_id = json.loads(parked.stdout)["run_id"]
    proc = _cli(tmp_path, "resume", run_id, "--web-bg")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("http://127.0.0.1:")
    assert f"/runs/{run_id}" in proc.stdout
    live = _json(_cli(tmp_path, "status", "--json"))
    assert [r["id"] for r in live] == [run_id]  # its console's process owns it now
    answered = _cli(tmp_path, "gate", "answer", run_id, "ship")
    assert answered.returncode == 0, answered.stderr
    assert "goes on with the answer itself" in answered.stderr

    def finished() -> bool:
        rows = _json(_cli(tmp_path, "runs", "--format", "json"))
        return bool(rows) and rows[0]["status"] == "success"

    assert wait_until(finished, 30)
