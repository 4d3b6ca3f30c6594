"""An agent's `dialog:` (spec 3.3): the evaluator decides whether the agent opens a conversation;
the person answers in the terminal, the console or a responses file ("discuss" or "do your
best"); after a conversation the agent runs again with the transcript. Under --skip-gates the
evaluator runs and the conversation is skipped; when nobody can answer, the run parks like a
gate (exit 5) and `podium gate answer` goes on from there. Through the real loader and engine
with the scripted provider, through the CLI (a pty for the terminal), and once through the real
OpenAI SDK against the local fake server."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.openai_server import answer
from helpers_engine import (
    REPO_ROOT,
    cli_env,
    load,
    podium_argv,
    read_jsonl,
    run_cli,
    run_workflow,
    write,
)
from helpers_providers import Servers, fake_servers
from podium.events.model import (
    DialogEvaluated,
    DialogFinished,
    DialogMessage,
    DialogStarted,
    ModelExchange,
    ValidatorFinished,
)

WF = """
workflow:
  name: tutorial
  entry_point: writer
  runtime: {provider: openai, default_model: gpt-4o}
agents:
  - name: writer
    prompt: "Write a tutorial intro"
    output:
      draft: {type: string}
    dialog:
      trigger_prompt: "Open a dialog when the audience is unclear."
output:
  draft: "{{ writer.output.draft }}"
"""

FIRST = {"output": {"draft": "v1"}, "usage": {"input_tokens": 1000, "output_tokens": 100}}
TRIGGER = {"output": {"trigger": True, "reason": "the audience is unclear",
                      "question": "Who is the audience?"},
           "usage": {"input_tokens": 300, "output_tokens": 30}}
QUIET = {"output": {"trigger": False, "reason": "clear enough", "question": ""}}
REPLY = {"text": "Beginners it is. [READY_TO_CONTINUE]"}
AFTER = {"output": {"draft": "v2, for beginners"},
         "usage": {"input_tokens": 1500, "output_tokens": 150}}


def _agents(**extra: Any) -> dict[str, Any]:
    agents: dict[str, Any] = {"writer": [FIRST], "writer.dialog": [TRIGGER],
                              "writer.conversation": [REPLY], "writer.after_dialog": [AFTER]}
    agents.update({k.replace("__", "."): v for k, v in extra.items()})
    return {k: v for k, v in agents.items() if v is not None}


def test_not_triggered_keeps_the_output(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, WF), responses={"agents": _agents(writer__dialog=[QUIET])})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"draft": "v1"}
    (evaluated,) = run.of(DialogEvaluated)
    assert (evaluated.trigger, evaluated.reason, evaluated.errored) == (False, "clear enough",
                                                                         False)
    assert run.of(DialogStarted) == []
    calls = run.provider.requests
    assert [c["call"] for c in calls] == [None, "dialog"]
    assert "Open a dialog when the audience is unclear." in calls[1]["system_prompt"]
    assert '"draft": "v1"' in calls[1]["message"]
    assert set(calls[1]["output_schema"]["properties"]) == {"trigger", "reason", "question"}


def test_a_conversation_then_the_agent_runs_again_with_the_transcript(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, WF), responses={
        "agents": _agents(), "dialogs": {"writer": ["For beginners, please", "done"]}})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"draft": "v2, for beginners"}
    (started,) = run.of(DialogStarted)
    assert (started.question, started.output) == ("Who is the audience?", {"draft": "v1"})
    turns = [(m.role, m.content, m.choice) for m in run.of(DialogMessage)]
    assert turns == [("agent", "Who is the audience?", None),
                     ("user", "For beginners, please", "discuss"),
                     ("agent", "Beginners it is.", None),
                     ("user", "", "done")]
    (finished,) = run.of(DialogFinished)
    assert (finished.outcome, finished.turns, finished.user_dismissed,
            finished.agent_proposed_continue) == ("discussed", 3, True, True)
    calls = run.provider.requests
    assert [c["call"] for c in calls] == [None, "dialog", "conversation", "after_dialog"]
    assert calls[2]["message"] == "For beginners, please"
    assert '"draft": "v1"' in calls[2]["system_prompt"]
    prompt = calls[3]["message"]
    assert prompt.startswith("Write a tutorial intro\n\n--- DIALOG WITH USER ---\n")
    assert ("Agent: Who is the audience?\nUser: For beginners, please\n"
            "Agent: Beginners it is.\n--- END DIALOG ---") in prompt
    # rows: the re-execution is the agent's; the evaluator, the reply and the replaced first
    # execution are the dialog's
    rows = run.result.usage_by_step
    assert rows["writer"].input_tokens == 1500
    assert rows["writer (dialog)"].input_tokens == 1300
    order = [t for t in run.types() if t.startswith("dialog") or t == "step_finished"]
    assert order == ["dialog_evaluated", "dialog_started", "dialog_message", "dialog_message",
                     "dialog_message", "dialog_message", "dialog_finished", "step_finished"]


def test_do_your_best_keeps_the_output(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, WF), responses={
        "agents": _agents(), "dialogs": {"writer": ["best"]}})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"draft": "v1"}
    (finished,) = run.of(DialogFinished)
    assert finished.outcome == "declined"
    assert [c["call"] for c in run.provider.requests] == [None, "dialog"]


def test_skip_gates_evaluates_but_skips_the_conversation(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, WF), responses={"agents": _agents()}, skip_gates=True)
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"draft": "v1"}
    (evaluated,) = run.of(DialogEvaluated)
    assert evaluated.trigger is True
    (finished,) = run.of(DialogFinished)
    assert finished.outcome == "skipped"
    assert run.of(DialogStarted) == []
    assert [c["call"] for c in run.provider.requests] == [None, "dialog"]


def test_a_failed_evaluation_or_reexecution_keeps_the_output(tmp_path: Path) -> None:
    unreadable = run_workflow(write(tmp_path, WF), responses={
        "agents": _agents(writer__dialog=[{"text": "Sure, let's talk"}])})
    assert unreadable.exit_code == 0
    assert unreadable.output == {"draft": "v1"}
    (evaluated,) = unreadable.of(DialogEvaluated)
    assert (evaluated.trigger, evaluated.errored) == (False, True)
    failing = run_workflow(write(tmp_path, WF), responses={
        "agents": _agents(writer__after_dialog=None),
        "dialogs": {"writer": ["For beginners"]}})
    assert failing.exit_code == 0, failing.error_text()
    assert failing.output == {"draft": "v1"}
    (finished,) = failing.of(DialogFinished)
    assert finished.outcome == "failed"
    assert "writer.after_dialog" in (finished.error or "")


def test_nobody_to_answer_in_process_is_a_clear_error(tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, WF), responses={"agents": _agents()})
    assert run.exit_code == 3
    assert "opened a dialog and needs a person" in run.error_text()
    assert "--skip-gates" in run.error_text()


def test_the_dialog_runs_before_the_validator(tmp_path: Path) -> None:
    wf = write(tmp_path, WF.replace("    dialog:", "    validator: {criteria: \"for beginners\"}"
                                    "\n    dialog:"))
    run = run_workflow(wf, responses={"agents": _agents(
        writer__validator=[{"output": {"passed": False, "issues": ["add an example"]}}],
        writer__rerun=[{"output": {"draft": "v3, for beginners, with an example"}}]),
        "dialogs": {"writer": ["For beginners"]}})
    assert run.exit_code == 0, run.error_text()
    assert run.output == {"draft": "v3, for beginners, with an example"}
    calls = run.provider.requests
    assert [c["call"] for c in calls] == [None, "dialog", "conversation", "after_dialog",
                                          "validator", "rerun"]
    assert '"draft": "v2, for beginners"' in calls[4]["message"]  # the dialog's output
    rerun = calls[5]["message"]
    assert "--- DIALOG WITH USER ---" in rerun
    assert rerun.endswith("## Validation feedback\nYour previous output did not pass "
                          "validation. Address the following and produce a corrected "
                          "output:\n- add an example\n")
    (verdict,) = run.of(ValidatorFinished)
    assert verdict.passed is False


def test_no_dialog_in_a_parallel_group(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow: {name: p, entry_point: both, runtime: {provider: openai}}
        agents:
          - {name: a, prompt: "a", dialog: {trigger_prompt: "always"}}
          - {name: b, prompt: "b"}
        parallel:
          - {name: both, agents: [a, b]}
    """)
    run = run_workflow(path, responses={"agents": {"a": [{"text": "A"}], "b": [{"text": "B"}]}})
    assert run.exit_code == 0, run.error_text()
    assert run.of(DialogEvaluated) == []


# ----------------------------------------------------------------------------- the CLI


def _files(tmp_path: Path, **extra: Any) -> tuple[Path, Path]:
    wf = write(tmp_path, WF)
    responses = write(tmp_path, json.dumps({"agents": _agents(**extra)}), "responses.json")
    return wf, responses


def test_answered_in_the_terminal(tmp_path: Path) -> None:
    wf, responses = _files(tmp_path)
    events = tmp_path / "events.jsonl"
    master, slave = os.openpty()
    try:
        os.write(master, b"For beginners, please\ndone\n")
        proc = subprocess.run(podium_argv("run", wf, "--responses", responses, "--events",
                                          events),
                              cwd=REPO_ROOT, env=cli_env(tmp_path / "home"), stdin=slave,
                              capture_output=True, text=True, timeout=60, check=False)
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"draft": "v2, for beginners"}
    assert "'writer' would like to discuss its output" in proc.stderr
    assert "Who is the audience?" in proc.stderr
    assert "Beginners it is." in proc.stderr
    said = [(e["content"], e["answered_by"]) for e in read_jsonl(events)
            if e["type"] == "dialog_message" and e["role"] == "user"]
    assert said == [("For beginners, please", "terminal"), ("", "terminal")]


def test_parked_then_answered_with_gate_answer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    wf, responses = _files(tmp_path)
    parked = run_cli(home, "run", wf, "--responses", responses)
    assert parked.returncode == 5, parked.stderr
    assert "answer the dialog of agent 'writer'" in parked.stderr
    (row,) = json.loads(run_cli(home, "runs", "--format", "json").stdout)
    run_id = row["id"]
    (gate,) = json.loads(run_cli(home, "gate", "list", "--format", "json").stdout)
    assert (gate["step"], gate["kind"]) == ("writer", "dialog")
    done = run_cli(home, "gate", "answer", run_id, "For beginners, please")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"draft": "v2, for beginners"}
    events = [json.loads(x) for x in run_cli(home, "events", run_id).stdout.splitlines()]
    # the resumed run went on in the dialog: the agent and the evaluator were not asked again
    calls = [e.get("call") for e in events if e["type"] == "model_exchange"]
    assert calls == [None, "dialog", "conversation", "after_dialog"]
    said = [(e["content"], e["choice"], e["answered_by"]) for e in events
            if e["type"] == "dialog_message" and e["role"] == "user"]
    assert said == [("For beginners, please", "discuss", "cli")]
    (finished,) = [e for e in events if e["type"] == "step_finished"]
    assert finished["input_tokens"] == 1000 + 300 + 1500  # the parked part counted once
    replay = run_cli(home, "replay", run_id)
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_parked_then_do_your_best(tmp_path: Path) -> None:
    home = tmp_path / "home"
    wf, responses = _files(tmp_path)
    assert run_cli(home, "run", wf, "--responses", responses).returncode == 5
    (row,) = json.loads(run_cli(home, "runs", "--format", "json").stdout)
    done = run_cli(home, "gate", "answer", row["id"], "best")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"draft": "v1"}


def test_skip_gates_on_the_command_line(tmp_path: Path) -> None:
    wf, responses = _files(tmp_path)
    proc = run_cli(tmp_path / "home", "run", wf, "--responses", responses, "--skip-gates")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"draft": "v1"}


def test_validate_budget_counts_the_dialog_calls(tmp_path: Path) -> None:
    proc = run_cli(tmp_path / "home", "validate", "--budget", "--format", "json",
                   write(tmp_path, WF))
    assert proc.returncode == 0, proc.stderr
    cost = json.loads(proc.stdout)["files"][0]["budget"]["cost"]
    per = cost["per_execution"]["writer"]
    call = cost["per_call_usd"]["writer"]["max"]
    assert (per["calls_min"], per["calls_max"]) == (2, 3)
    assert cost["outcomes"]["$end"] == {"min_usd": round(2 * call, 4),
                                        "max_usd": round(3 * call, 4)}


# ----------------------------------------------------------------------------- real SDK


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


def test_a_dialog_through_the_openai_sdk(tmp_path: Path, servers: Servers) -> None:
    from podium.clock import FakeClock
    from podium.engine.run import Engine
    from podium.events.sinks.jsonl import MemorySink
    from podium.gates.base import ChainAnswerer, GateAnswer, ScriptedAnswerer
    from podium.providers.base import ProviderRegistry
    from podium.steps.base import RunOptions

    oa = servers.openai
    oa.script(answer(json.dumps({"draft": "v1"})),
              answer(json.dumps({"trigger": True, "reason": "unclear",
                                 "question": "Who is the audience?"})),
              answer("Beginners it is."),
              answer(json.dumps({"draft": "v2, for beginners"})))
    path = write(tmp_path, WF)
    engine = Engine(load(path), path, inputs={}, providers=ProviderRegistry(),
                    answerer=ChainAnswerer([ScriptedAnswerer({"writer": [
                        GateAnswer("discuss", {"message": "For beginners"}, "test")]})]),
                    options=RunOptions(), clock=FakeClock())
    sink = MemorySink()
    engine.bus.add(sink)
    result = engine.run()
    assert result.exit_code == 0, result.error
    assert result.output == {"draft": "v2, for beginners"}
    _, evaluate, reply, after = (r.body for r in oa.chat_requests())
    assert "Open a dialog when the audience is unclear." in evaluate["messages"][0]["content"]
    assert evaluate["response_format"]["json_schema"]["schema"]["required"] == [
        "trigger", "reason", "question"]
    assert reply["messages"][-1] == {"role": "user", "content": "For beginners"}
    assert "response_format" not in reply
    assert "User: For beginners\nAgent: Beginners it is." in after["messages"][-1]["content"]
    assert [e.call for e in sink.events if isinstance(e, ModelExchange)] == [
        None, "dialog", "conversation", "after_dialog"]
