"""An exception none of podium's checks expected, raised inside a step (a bug in podium or in
a library it calls), ends the run as a step error: exit 3, no traceback, the exception's
class, message and place quoted, secrets redacted, everything before it kept, and the run
resumable once the cause is gone (errors.py `internal_error`)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from helpers_engine import cli_env, podium_argv, run_cli, run_workflow, write
from podium.events.model import StepFailed
from podium.providers.base import AgentRequest, Provider, Reply

TWO_SETS = """
workflow:
  name: two-sets
  entry_point: first
agents:
  - {name: first, type: set, value: "one", routes: [{to: second}]}
  - {name: second, type: set, value: "two"}
"""

# `python -m podium ARGS` with the set step's executor failing in step 'second' while the
# file FIXED does not exist: a bug that a later podium no longer has
BROKEN = """
import os, runpy
import podium.steps.set_step as s
real = s.execute_set
def failing(call):
    if call.step.name == "second" and not os.path.exists(os.environ["FIXED"]):
        raise KeyError("surprise " + os.environ["OPENAI_API_KEY"] + " " + "x" * 500)
    return real(call)
s.execute_set = failing
runpy.run_module("podium", run_name="__main__", alter_sys=True)
"""
SECRET = "sk-test-internal-0123456789abcdef"


def test_an_unexpected_exception_is_a_step_error_and_the_run_resumes(tmp_path: Path) -> None:
    wf = write(tmp_path, TWO_SETS)
    fixed = tmp_path / "fixed"
    env = {**cli_env(tmp_path / "home"), "FIXED": str(fixed), "OPENAI_API_KEY": SECRET}
    argv = podium_argv("run", wf)
    proc = subprocess.run([argv[0], "-c", BROKEN, *argv[3:]], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert SECRET not in proc.stderr + proc.stdout
    line = next(x for x in proc.stderr.splitlines() if x.startswith("error:"))
    assert "step 'second'" in line
    assert "podium failed inside this step: KeyError: 'surprise <secret:OPENAI_API_KEY> x" in line
    assert "at <string>:" in line  # the innermost frame: here, the patched executor
    assert "x" * 300 not in line  # the message is quoted, not dumped
    found = re.search(r"run ([0-9a-f]{12}) started", proc.stderr)
    assert found is not None, proc.stderr
    run_id = found.group(1)
    shown = run_cli(tmp_path / "home", "runs")
    assert re.search(rf"{run_id}\s+two-sets\s+error\s+second", shown.stdout), shown.stdout
    fixed.touch()
    resumed = run_cli(tmp_path / "home", "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "path: first → second" in resumed.stderr + resumed.stdout


FOR_EACH = """
workflow:
  name: fan
  entry_point: fan
  input:
    items: {type: array, default: [a, b, c]}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    max_concurrent: 1
    agent: {name: worker, prompt: "item {{ item }}"}
agents: []
"""


class _Breaks:
    """Wraps a provider: the session of the member whose prompt names item b raises a
    ZeroDivisionError, as a bug in a provider adapter would."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name, self.capabilities = inner.name, inner.capabilities

    def open_session(self, request: AgentRequest) -> Any:
        return _BreaksSession(self.inner.open_session(request))

    def close(self) -> None:
        self.inner.close()


class _BreaksSession:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def send(self, message: str) -> Reply:
        raise AssertionError("a group member used the blocking send")

    async def asend(self, message: str) -> Reply:
        if "item b" in message:
            return 1 // 0  # type: ignore[no-any-return]
        reply: Reply = await self.inner.asend(message)
        return reply

    def close(self) -> None:
        self.inner.close()


def test_a_members_unexpected_exception_fails_that_member_as_a_step_error(
        tmp_path: Path) -> None:
    run = run_workflow(write(tmp_path, FOR_EACH), wrap_provider=_Breaks,
                       responses={"agents": {"worker": [{"text": "done"}] * 3}})
    assert run.result.exit_code == 3, run.result
    failed = [e for e in run.sink.events if isinstance(e, StepFailed)]
    member = [e for e in failed if e.group is not None]
    assert len(member) == 1, failed
    assert member[0].error_type == "InternalError"
    assert "ZeroDivisionError: integer division or modulo by zero at " in member[0].message
    assert "test_internal_errors.py" in member[0].message
    finished = [e for e in run.sink.events if e.type == "step_finished" and e.group is not None]
    assert [e.output for e in finished] == [{"result": "done"}]  # item a, before: kept
    ended = run.sink.events[-1].model_dump()
    assert (ended["type"], ended["status"], ended["exit_code"]) == ("run_finished", "error", 3)
