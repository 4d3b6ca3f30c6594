"""An agent's `validator:`: a second model call judges the output against a rubric (spec 3.3).

The verdict `{passed, issues}` comes from the agent's provider (the validator's `model`, or
the agent's), with no tools, bounded by the agent's timeout. On a fail with `max_retries: 1`
the agent runs once more with a `## Validation feedback` section listing the issues, and that
output is final. `on_error: pass` (Conductor's fail-open, the default): a call that fails or
answers something unreadable counts as a pass (`errored: true`), and a failed verdict no re-run
fixes keeps the output. `on_error: fail` (podium's fail closed): an output passes only on a
verdict that says so (the re-run's output is judged too, in the same conversation); anything
else fails the step with an error that names the issues.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any

from podium.errors import StepError
from podium.events.model import ValidationFailed, ValidatorFinished, ValidatorStarted, Warning_
from podium.records import record
from podium.steps.agent_checks import RECOVERABLE, json_text, reply_object, spent_of, truncate

if TYPE_CHECKING:
    from podium.language.model import ValidatorConfig
    from podium.steps.agent_checks import AgentRun, SideSession

# Conductor's wording (src/conductor/engine/validator.py), so a grader sees the same task.
VALIDATOR_SYSTEM_PROMPT = """\
You are an output validator. Your job is to decide whether an agent's output \
satisfies a set of acceptance criteria defined by the workflow author. You are \
a strict but fair grader — do not invent requirements beyond the criteria, but \
do not pass output that fails any of them.

--- CRITERIA ---
{criteria}
--- END CRITERIA ---

Examine the agent's task and its output, then decide whether the output fully \
satisfies every point in the criteria.

You MUST respond with ONLY a JSON object (no markdown, no prose, no code fences):
{{"passed": true_or_false, "issues": ["specific actionable problem", ...]}}

- "passed" is true only if the output satisfies ALL of the criteria.
- "issues" is a list of concrete, actionable problems to fix; it must be empty \
when "passed" is true and non-empty when "passed" is false. Each issue should \
tell the agent exactly what to change.
"""

VALIDATOR_USER_PROMPT = """\
Agent name: {agent_name}

--- AGENT TASK (the prompt the agent was given) ---
{primary_prompt}
--- END AGENT TASK ---

--- AGENT OUTPUT (validate this) ---
{primary_output}
--- END AGENT OUTPUT ---
"""

# on_error: fail judges the re-run's output too, in the same conversation
REVALIDATE_PROMPT = """\
The agent ran again with your issues as feedback. Judge its new output against the same \
criteria, with the same JSON object.

--- AGENT OUTPUT (validate this) ---
{primary_output}
--- END AGENT OUTPUT ---
"""

PROMPT_LIMIT = 6000
OUTPUT_LIMIT = 8000


def _verdict_schema() -> dict[str, Any]:
    from podium.language.model import OutputField
    from podium.steps.schema import to_json_schema

    return to_json_schema({"passed": OutputField(type="boolean"),
                           "issues": OutputField(type="array",
                                                 items=OutputField(type="string"))})


@record(frozen=True)
class Verdict:
    passed: bool
    issues: list[str] = field(default_factory=list)
    errored: bool = False
    error: str | None = None


def parse_verdict(content: dict[str, Any] | None) -> Verdict:
    """Conductor's reading: anything that does not clearly say `passed` is unreadable."""
    if content is None:
        return Verdict(True, errored=True, error="the verdict is not a JSON object")
    if "passed" not in content:
        return Verdict(True, errored=True, error="the verdict has no 'passed'")
    raw = content["passed"]
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        raw = raw.strip().lower() == "true"
    if not isinstance(raw, bool):
        return Verdict(True, errored=True, error=f"'passed' is {raw!r}, not a boolean")
    issues = content.get("issues") or []
    listed = [str(i) for i in issues] if isinstance(issues, list) else [str(issues)]
    return Verdict(raw, [] if raw else listed)


def feedback_section(issues: list[str]) -> str:
    """The section appended to the agent's prompt for its re-run (Conductor's wording)."""
    bullets = "\n".join(f"- {i}" for i in issues) if issues else \
        "- The output did not satisfy the acceptance criteria."
    return ("\n\n## Validation feedback\n"
            "Your previous output did not pass validation. Address the following "
            f"and produce a corrected output:\n{bullets}\n")


def _closed(agent: AgentRun, message: str, issues: list[str]) -> StepError:
    """The step fails (on_error: fail), with what the execution spent."""
    return StepError(f"{message} (validator.on_error: fail)", step=agent.step.name,
                     iteration=agent.call.iteration,
                     details={"issues": issues, "usage_rows": dict(agent.spend.rows)})


def _issues_text(issues: list[str]) -> str:
    return "; ".join(issues) if issues else "it named no issues"


class _Judge:
    """The validator's conversation: one per execution, opened at the first verdict."""

    def __init__(self, agent: AgentRun, cfg: ValidatorConfig) -> None:
        self.agent = agent
        self.cfg = cfg
        self.model = cfg.model or agent.plan.request.model
        self.session: SideSession | None = None

    def judge(self, output: Any, round_: int) -> Verdict:
        agent, cfg = self.agent, self.cfg
        run, name, it = agent.call.run, agent.step.name, agent.call.iteration
        run.bus.emit(ValidatorStarted(step=name, iteration=it, model=self.model,
                                      criteria_preview=cfg.criteria[:200], round=round_))
        started = run.clock.monotonic()
        shown = truncate(json_text(output), OUTPUT_LIMIT)
        model, tokens_in, tokens_out, cost = self.model, 0, 0, None
        try:
            if self.session is None:
                prompt = VALIDATOR_USER_PROMPT.format(
                    agent_name=name, primary_prompt=truncate(agent.plan.request.prompt,
                                                             PROMPT_LIMIT),
                    primary_output=shown)
                self.session = agent.side(
                    "validator", "validator", prompt=prompt,
                    system=VALIDATOR_SYSTEM_PROMPT.format(criteria=cfg.criteria),
                    schema=_verdict_schema(), model=self.model)
            else:
                prompt = REVALIDATE_PROMPT.format(primary_output=shown)
            reply, usage = self.session.send(prompt)
            model, tokens_in, tokens_out = usage.model, usage.input_tokens, usage.output_tokens
            cost = usage.cost_usd if usage.priced else None
            verdict = parse_verdict(reply_object(reply))
        except RECOVERABLE as exc:
            verdict = Verdict(True, errored=True, error=f"the validator call failed: {exc}")
        passed = verdict.passed and not (verdict.errored and cfg.on_error == "fail")
        run.bus.emit(ValidatorFinished(
            step=name, iteration=it, passed=passed, issues=verdict.issues,
            errored=verdict.errored, error=verdict.error, model=model, input_tokens=tokens_in,
            output_tokens=tokens_out, cost_usd=cost, elapsed=run.clock.monotonic() - started,
            round=round_))
        if verdict.errored:
            if cfg.on_error == "fail":
                raise _closed(agent, f"the validator could not judge the output: "
                                     f"{verdict.error}", [])
            run.bus.emit(Warning_(step=name, message=f"validator: {verdict.error}; the output "
                                                     "counts as passed (fail-open)"))
        return verdict

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


def run_validator(agent: AgentRun, output: Any) -> Any:
    """Judge `output`; on a fail, re-run the agent once with the issues (max_retries: 1).
    Returns the output that stands."""
    cfg = agent.step.validator
    assert cfg is not None
    judge = _Judge(agent, cfg)
    try:
        return _validate(agent, cfg, judge, output)
    finally:
        judge.close()


def _validate(agent: AgentRun, cfg: ValidatorConfig, judge: _Judge, output: Any) -> Any:
    run, name, it = agent.call.run, agent.step.name, agent.call.iteration
    closed = cfg.on_error == "fail"
    verdict = judge.judge(output, 1)
    if verdict.passed:
        return output
    retry = cfg.max_retries > 0
    run.bus.emit(ValidationFailed(step=name, iteration=it, issues=verdict.issues,
                                  will_retry=retry))
    if not retry:
        if closed:
            raise _closed(agent, f"the output failed validation: {_issues_text(verdict.issues)}",
                          verdict.issues)
        return output
    try:
        again = agent.rerun(feedback_section(verdict.issues), "rerun")
    except RECOVERABLE as exc:
        agent.spend.add("validator", spent_of(exc))
        run.bus.emit(ValidationFailed(step=name, iteration=it, issues=verdict.issues,
                                      will_retry=False, rerun_errored=True))
        if closed:
            raise _closed(agent, f"the output failed validation "
                                 f"({_issues_text(verdict.issues)}) and its re-run failed: {exc}",
                          verdict.issues) from None
        run.bus.emit(Warning_(step=name, message=f"the re-run after a failed validation "
                                                 f"failed ({exc}); the first output stays"))
        return output
    agent.spend.replaced("validator", again.usage)
    if closed:
        second = judge.judge(again.output, 2)
        if not second.passed:
            run.bus.emit(ValidationFailed(step=name, iteration=it, issues=second.issues,
                                          will_retry=False))
            raise _closed(agent, f"the output failed validation again after its re-run: "
                                 f"{_issues_text(second.issues)}", second.issues)
    return again.output
