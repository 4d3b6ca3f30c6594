"""The script step: run a command as argv (no shell), capture its output, apply its contract.

The child runs in its own process group (tools/processes.py): the script is done when its
main process has exited and its stdout and stderr are closed, and then whatever is left of the
group is killed; the timeout covers all of it, and ends the whole group. The group also dies
with podium, even a SIGKILLed one. stdout and stderr are kept up to a size cap (the rest is
read and dropped). Without `output:`, the output is {exit_code, stdout, stderr} plus the keys
of stdout when it is one JSON object; with `output:`, stdout must be exactly one JSON object
that satisfies the schema.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from podium.errors import LimitExceeded, OutputContractError, StepError
from podium.events.model import ScriptOutput
from podium.language.model import ScriptStep
from podium.steps.base import StepCall, StepOutcome
from podium.steps.schema import SchemaViolation, check_value, json_type_name
from podium.tools import processes
from podium.tools.processes import Command

KILL_GRACE_SECONDS = 1.0  # at a timeout or an interrupt: SIGTERM, then SIGKILL after this


def _resolve_command(command: str, env: dict[str, str], cwd: str | None) -> str | None:
    if os.sep in command:
        base = Path(cwd) if cwd else Path.cwd()
        path = Path(command) if os.path.isabs(command) else base / command
        return str(path) if path.exists() else None
    return shutil.which(command, path=env.get("PATH", os.defpath))


def render_argv(call: StepCall) -> list[str]:
    """The command and arguments a script step would run, rendered (no process started)."""
    step = call.step
    assert isinstance(step, ScriptStep)
    run = call.run
    ctx = run.step_context(step)
    name, it = step.name, call.iteration
    command = run.render(step.command, ctx, step=name, what="command", iteration=it).strip()
    args = [run.render(a, ctx, step=name, what=f"args[{i}]", iteration=it)
            for i, a in enumerate(step.args)]
    return [command, *args]


def execute_script(call: StepCall) -> StepOutcome:
    step = call.step
    assert isinstance(step, ScriptStep)
    run = call.run
    ctx = run.step_context(step)
    name, it = step.name, call.iteration
    command, *args = render_argv(call)
    cwd = None
    if step.working_dir:
        cwd = run.render(step.working_dir, ctx, step=name, what="working_dir", iteration=it)
        cwd = os.path.expanduser(cwd.strip())
        if not Path(cwd).is_dir():
            raise StepError(f"working_dir '{cwd}' does not exist or is not a directory",
                            step=name, iteration=it)
    stdin_bytes: bytes | None = None
    if step.stdin is not None:
        stdin_bytes = run.render(step.stdin, ctx, step=name, what="stdin",
                                 iteration=it).encode("utf-8")
    env = dict(os.environ)
    env["PYTHONUTF8"] = "1"
    env.update(step.env)
    if not command:
        raise StepError("command rendered to an empty string", step=name, iteration=it)
    exe = _resolve_command(command, env, cwd)
    if exe is None:
        raise StepError(f"command not found: '{command}' (working_dir={cwd or os.getcwd()})",
                        step=name, iteration=it)
    timeout: float | None = step.timeout
    remaining = run.remaining()
    bounded_by_run = False
    if remaining is not None and (timeout is None or remaining < timeout):
        timeout, bounded_by_run = max(remaining, 0.001), True
    argv = [command, *args]
    started = run.clock.monotonic()
    try:
        running = processes.start(Command(
            [exe, *args], env, cwd=cwd, stdin=stdin_bytes, run_id=run.run_id,
            output_cap=run.options.script_output_cap, term_grace=KILL_GRACE_SECONDS))
    except OSError as exc:
        raise StepError(f"failed to start '{command}': {exc.strerror or exc}", step=name,
                        iteration=it) from None
    done = running.finish(timeout)
    if done.timed_out:
        if bounded_by_run:
            raise LimitExceeded(f"the run's timeout expired while script '{name}' ran",
                                limit="timeout", step=name, iteration=it)
        raise StepError(f"script timed out after {step.timeout}s (the whole process group "
                        "was killed)", step=name, iteration=it)
    elapsed = run.clock.monotonic() - started
    exit_code, stdout, stderr = done.returncode, done.stdout.text(), done.stderr.text()
    run.bus.emit(ScriptOutput(step=name, iteration=it, argv=argv, working_dir=cwd,
                              exit_code=exit_code, stdout=stdout, stderr=stderr,
                              stdout_truncated=done.stdout.truncated,
                              stderr_truncated=done.stderr.truncated, elapsed=elapsed))
    return script_outcome(step, it, exit_code, stdout, stderr,
                          stdout_truncated=done.stdout.truncated)


def script_outcome(step: ScriptStep, iteration: int, exit_code: int, stdout: str, stderr: str,
                   *, stdout_truncated: bool = False) -> StepOutcome:
    """A script step's output from what the process returned, under the step's contract:
    {exit_code, stdout, stderr} plus stdout's JSON object (strictly checked with `output:`)."""
    output: dict[str, Any] = {"stdout": stdout, "stderr": stderr, "exit_code": exit_code}
    if step.output is None:
        parsed = _json_object(stdout)
        if parsed is not None:
            output.update(parsed)
        return StepOutcome(output, details={"exit_code": exit_code})
    return StepOutcome(_strict_output(step, output, stdout, stdout_truncated, iteration),
                       details={"exit_code": exit_code})


def _json_object(text: str) -> dict[str, Any] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _strict_output(step: ScriptStep, output: dict[str, Any], stdout: str, truncated: bool,
                   iteration: int) -> dict[str, Any]:
    stripped = stdout.strip()
    details = {"stdout": stdout[-2000:], "stderr": output["stderr"][-2000:],
               "exit_code": output["exit_code"]}
    try:
        value = json.loads(stripped)
    except ValueError as exc:
        why = "stdout was cut at the size cap" if truncated else str(exc)
        err = OutputContractError(f"declares an output schema but stdout is not one JSON object "
                                  f"({why}); exit code {output['exit_code']}. Write logs to "
                                  "stderr", step=step.name, iteration=iteration, details=details)
        raise err from None
    if not isinstance(value, dict):
        kind = "list" if isinstance(value, list) else json_type_name(value)
        err = OutputContractError(f"declares an output schema but stdout is a JSON {kind}, not "
                                  "an object", step=step.name, iteration=iteration,
                                  details=details)
        raise err
    output.update(value)
    try:
        check_value(step.output or {}, output)
    except SchemaViolation as exc:
        err = OutputContractError(f"stdout JSON breaks the output schema: {exc}",
                                  step=step.name, iteration=iteration, details=details)
        raise err from None
    return output
