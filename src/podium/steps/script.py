"""The script step: run a command as argv (no shell), capture its output, apply its contract.

The child runs in its own process group (tools/processes.py): the script is done when its
main process has exited and its stdout and stderr are closed, and then whatever is left of the
group is killed; the timeout covers all of it, and ends the whole group. The group also dies
with podium, even a SIGKILLed one.

stdout is the step's output, so it must be text: UTF-8 without NUL bytes, at most the step's
`max_output_mb` (64 MB by default); past the limit the script is stopped and the step fails,
and so does a stdout that is not text. Only an excerpt (its first and last KB) of such a
stdout is recorded. stderr is kept for people: decoded leniently (a byte that is not UTF-8,
or a NUL, shows as U+FFFD), and past the same limit cut to its first part and its last KB.
Without `output:`, the output is {exit_code, stdout, stderr} plus the keys of stdout when it
is one JSON object; with `output:`, stdout must be exactly one JSON object that satisfies
the schema. JSON is read with podium's bounds (podium/jsontext.py): too deep, an integer too
long or a lone surrogate fails the step.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from podium import jsontext
from podium.errors import LimitExceeded, OutputContractError, StepError
from podium.events.commits import COMMIT_WINDOW
from podium.events.model import ScriptOutput
from podium.language.model import MAX_SCRIPT_OUTPUT_MB, ScriptStep
from podium.steps.base import StepCall, StepOutcome
from podium.steps.schema import SchemaViolation, check_value, json_type_name, received
from podium.tools import processes
from podium.tools.processes import Captured, Command

KILL_GRACE_SECONDS = 1.0  # at a timeout or an interrupt: SIGTERM, then SIGKILL after this
MB = 1024 * 1024
EXCERPT_BYTES = processes.TAIL_BYTES  # of a refused stdout: its first and last KB are kept
BINARY_HINT = "outputs are text; write binary data to a file and print its path"


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
            output_cap=step.max_output_mb * MB, term_grace=KILL_GRACE_SECONDS,
            stop_past_stdout_cap=True))
    except OSError as exc:
        raise StepError(f"failed to start '{command}': {exc.strerror or exc}", step=name,
                        iteration=it) from None
    # a script that ends within COMMIT_WINDOW commits its start with its end; a longer one
    # commits its start once it has run that long (events/commits.py), so it shows running.
    # A group member's start is not waiting (its group commits it).
    slow = None if run.group is not None else (COMMIT_WINDOW, run.bus.commit_waiting)
    done = running.finish(timeout, slow=slow)
    if done.timed_out:
        if bounded_by_run:
            raise LimitExceeded(f"the run's timeout expired while script '{name}' ran",
                                limit="timeout", step=name, iteration=it)
        raise StepError(f"script timed out after {step.timeout}s (the whole process group "
                        "was killed)", step=name, iteration=it)
    elapsed = run.clock.monotonic() - started
    exit_code, stderr = done.returncode, _stderr_text(done.stderr)
    stdout, problem = _stdout_text(step, done.stdout)
    run.bus.emit(ScriptOutput(step=name, iteration=it, argv=argv, working_dir=cwd,
                              exit_code=exit_code, stdout=stdout, stderr=stderr,
                              stdout_truncated=done.stdout.truncated,
                              stderr_truncated=done.stderr.truncated, elapsed=elapsed))
    if problem is not None:
        raise StepError(problem, step=name, iteration=it,
                        details={"exit_code": exit_code, "stdout_bytes_read":
                                 len(done.stdout.data) + done.stdout.dropped})
    return script_outcome(step, it, exit_code, stdout, stderr,
                          stdout_truncated=done.stdout.truncated)


def _limit_message(step: ScriptStep) -> str:
    return (f"stdout of script '{step.name}' passed its limit of {step.max_output_mb} MB, "
            f"so the script was stopped; raise the limit with `max_output_mb:` on the step "
            f"(up to {MAX_SCRIPT_OUTPUT_MB}), or write large output to a file")


def _stdout_text(step: ScriptStep, out: Captured) -> tuple[str, str | None]:
    """stdout as text, or an excerpt of it and why the step refuses it (past the limit, not
    UTF-8, a NUL byte)."""
    if out.truncated:
        return _excerpt(out), _limit_message(step)
    data = bytes(out.data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _excerpt(out), (f"stdout of script '{step.name}' is not UTF-8 text (byte "
                               f"0x{data[exc.start]:02x} at offset {exc.start:,}); "
                               f"{BINARY_HINT}")
    nul = data.find(b"\0")
    if nul >= 0:
        return _excerpt(out), (f"stdout of script '{step.name}' holds a NUL byte at offset "
                               f"{nul:,}; {BINARY_HINT}")
    return text, None


def _excerpt(out: Captured) -> str:
    """The first and last EXCERPT_BYTES of a stream, as text that can be stored (lossy, no
    NUL), with a line saying how much was cut between them."""
    total = len(out.data) + out.dropped
    if total <= 2 * EXCERPT_BYTES:
        return _lossy(bytes(out.data) + out.tail)
    end = (bytes(out.data[-EXCERPT_BYTES:]) + out.tail)[-EXCERPT_BYTES:]
    cut = total - 2 * EXCERPT_BYTES
    return (_lossy(bytes(out.data[:EXCERPT_BYTES])) + f"\n[... podium cut {cut:,} bytes "
            "here ...]\n" + _lossy(end))


def _lossy(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").replace("\0", "\ufffd")


def _stderr_text(err: Captured) -> str:
    """stderr for people: lossy, and past the limit its first part and its last KB."""
    text = _lossy(bytes(err.data))
    if err.truncated:
        text += (f"\n[... podium cut {err.dropped:,} bytes past the output limit; the last "
                 f"{len(err.tail):,} follow ...]\n" + _lossy(err.tail))
    return text


def script_outcome(step: ScriptStep, iteration: int, exit_code: int, stdout: str, stderr: str,
                   *, stdout_truncated: bool = False) -> StepOutcome:
    """A script step's output from what the process returned, under the step's contract:
    {exit_code, stdout, stderr} plus stdout's JSON object (strictly checked with `output:`).
    A stdout that was cut (a recorded excerpt: it passed its limit) fails the step."""
    if stdout_truncated:
        raise StepError(_limit_message(step), step=step.name, iteration=iteration,
                        details={"exit_code": exit_code})
    output: dict[str, Any] = {"stdout": stdout, "stderr": stderr, "exit_code": exit_code}
    if step.output is None:
        parsed = _json_object(step, stdout, iteration)
        if parsed is not None:
            output.update(parsed)
        return StepOutcome(output, details={"exit_code": exit_code})
    return StepOutcome(_strict_output(step, output, stdout, iteration),
                       details={"exit_code": exit_code})


def _json_object(step: ScriptStep, text: str, iteration: int) -> dict[str, Any] | None:
    """stdout's JSON object, None when stdout is not one; JSON past podium's bounds fails."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = jsontext.loads(stripped)
    except jsontext.JsonLimitError as exc:
        raise StepError(f"stdout JSON of script '{step.name}' {exc}", step=step.name,
                        iteration=iteration, details={"stdout": text[-2000:]}) from None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _strict_output(step: ScriptStep, output: dict[str, Any], stdout: str,
                   iteration: int) -> dict[str, Any]:
    stripped = stdout.strip()
    details = {"stdout": stdout[-2000:], "stderr": output["stderr"][-2000:],
               "exit_code": output["exit_code"]}
    try:
        value = jsontext.loads(stripped)
    except jsontext.JsonLimitError as exc:
        raise OutputContractError(f"stdout JSON of script '{step.name}' {exc}",
                                  step=step.name, iteration=iteration, details=details) \
            from None
    except ValueError as exc:
        err = OutputContractError(f"declares an output schema but stdout is not one JSON object "
                                  f"({exc}); exit code {output['exit_code']}; "
                                  f"{received(stdout)}. Write logs to stderr", step=step.name, iteration=iteration, details=details)
        raise err from None
    if not isinstance(value, dict):
        kind = "list" if isinstance(value, list) else json_type_name(value)
        err = OutputContractError(f"declares an output schema but stdout is a JSON {kind}, not "
                                  f"an object; {received(stdout)}", step=step.name, iteration=iteration,
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
