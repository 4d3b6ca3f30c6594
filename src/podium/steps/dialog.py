"""An agent's `dialog:`: the evaluator decides whether the agent opens a conversation with the
person, and the conversation itself (spec 3.3).

After the output, a model call judges it against `trigger_prompt` and answers
`{trigger, reason, question}`. When it triggers, the person is asked through the run's gate
answerers (the terminal, the console, a responses file's `dialogs:`, a parked run's stored
answer): "discuss" (turns of their text and the agent's replies, until they say done; then the
agent runs again with a `--- DIALOG WITH USER ---` transcript appended to its prompt) or "do
your best" (the output stays). Under --skip-gates the evaluator runs and the conversation is
skipped. When nobody can answer the opening question the run parks like a gate (exit 5);
`podium gate answer RUN best` or `... RUN "a message"` goes on from there without asking the
model again. A failed evaluation, reply or re-execution keeps the output (Conductor's rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from podium.events.model import (
    DialogEvaluated,
    DialogFinished,
    DialogMessage,
    DialogStarted,
    Warning_,
)
from podium.gates.base import GateAnswer, GateRequest, GateUnanswerable
from podium.language.model import GateOption
from podium.records import record
from podium.steps.agent_checks import RECOVERABLE, json_text, reply_object, spent_of, truncate

if TYPE_CHECKING:
    from podium.steps.agent_checks import AgentRun, SideSession

# Conductor's wording (src/conductor/engine/dialog_evaluator.py, gates/dialog.py).
EVALUATOR_SYSTEM_PROMPT = """\
You are a dialog trigger evaluator. Your job is to examine an agent's output \
and decide whether the agent should pause and start a conversation with the user.

The workflow author has defined the following criteria for triggering dialog:

--- CRITERIA ---
{trigger_prompt}
--- END CRITERIA ---

Examine the agent's output below and decide:
1. Does the output meet the criteria for triggering a dialog with the user?
2. If yes, what question or topic should the agent open the dialog with? \
Include full context — file paths, code snippets, data points, and reasoning — \
so the user has everything they need to respond meaningfully.

You MUST respond with ONLY a JSON object (no markdown, no extra text):
{{"trigger": true/false, "reason": "brief explanation", "question": "the opening \
question to ask the user with full context (only if trigger is true)"}}
"""

EVALUATOR_USER_PROMPT = """\
Agent name: {agent_name}
Agent output:
{agent_output}
"""

DIALOG_AGENT_SYSTEM_PROMPT = """\
You are helping with a workflow dialog. A workflow agent named "{agent_name}" \
has produced output and needs to discuss it with the user.

YOUR TASK: Act as the agent "{agent_name}" and have a conversation with the \
user about the output below. You must stay in character and discuss the output \
topic naturally. This is NOT a coding task — the user wants to discuss the \
content of the agent's output, whatever the topic may be.

RULES:
- Discuss the output topic as written — do NOT refuse, redirect, or claim \
  the topic is "out of scope"
- Share full context including file paths, code snippets, and reasoning \
  when relevant
- When you believe you have enough information to proceed, include the \
  exact marker [READY_TO_CONTINUE] at the end of your message
- If the user says "done", "continue", or "go ahead", treat that as \
  permission to stop discussing

--- AGENT OUTPUT TO DISCUSS ---
{agent_output}
--- END AGENT OUTPUT ---
"""

Choice = Literal["discuss", "done", "best"]
READY_MARKER = "[READY_TO_CONTINUE]"
OUTPUT_LIMIT = 4000
MAX_TURNS = 50  # the person's turns in one conversation; then it ends as if they said done

# What a person may type to end the conversation (Conductor's list); at the opening question
# they (and an empty answer) mean "do your best".
DISMISS = frozenset({"done", "continue", "go ahead", "proceed", "that's all", "thats all",
                     "resume", "exit", "/done", "/continue"})
BEST = frozenset({"best", "do your best", "/best", "skip"})


def _options(step: str, opening: bool) -> tuple[GateOption, ...]:
    talk = GateOption(label="Discuss: answer the agent" if opening else "Reply",
                      value="discuss", route=step, prompt_for="message", multiline=True)
    if opening:
        return talk, GateOption(label="Do your best: keep the output", value="best", route=step)
    return talk, GateOption(label="Done: the agent runs again with this conversation",
                            value="done", route=step)


def interpret(answer: GateAnswer, opening: bool) -> tuple[Choice, str]:
    """(choice, text) of a person's answer: discuss with their text, done, or best. An
    option value (the console, `podium gate answer`) or free text (the terminal, a
    responses file) both work."""
    stop: Choice = "best" if opening else "done"
    value = answer.value.strip()
    if value in ("best", "done"):
        return stop, ""
    message = answer.additional_input.get("message")
    text = (message if value == "discuss" else message or value) or ""
    text = text.strip()
    if not text or text.lower() in DISMISS or text.lower() in BEST:
        return stop, ""
    return "discuss", text


@record(frozen=True)
class Evaluation:
    trigger: bool
    reason: str = ""
    question: str = ""
    errored: bool = False


def parse_evaluation(content: dict[str, Any] | None) -> Evaluation:
    if content is None:
        return Evaluation(False, "the evaluation is not a JSON object", errored=True)
    raw = content.get("trigger", False)
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        raw = raw.strip().lower() == "true"
    if not isinstance(raw, bool):
        return Evaluation(False, f"'trigger' is {raw!r}, not a boolean", errored=True)
    return Evaluation(raw, str(content.get("reason") or ""), str(content.get("question") or ""))


def _evaluate(agent: AgentRun, output: Any) -> Evaluation:
    step, run = agent.step, agent.call.run
    assert step.dialog is not None
    model = agent.plan.request.model
    prompt = EVALUATOR_USER_PROMPT.format(agent_name=step.name,
                                          agent_output=truncate(json_text(output),
                                                                OUTPUT_LIMIT))
    session: SideSession | None = None
    tokens_in, tokens_out, cost = 0, 0, None
    try:
        session = agent.side("dialog", "dialog", prompt=prompt,
                             system=EVALUATOR_SYSTEM_PROMPT.format(
                                 trigger_prompt=step.dialog.trigger_prompt),
                             schema=_evaluation_schema(), model=model)
        reply, usage = session.send(prompt)
        model, tokens_in, tokens_out = usage.model, usage.input_tokens, usage.output_tokens
        cost = usage.cost_usd if usage.priced else None
        found = parse_evaluation(reply_object(reply))
    except RECOVERABLE as exc:
        found = Evaluation(False, f"the evaluation failed: {exc}", errored=True)
    finally:
        if session is not None:
            session.close()
    if found.trigger and not found.question.strip():
        found = Evaluation(True, found.reason, found.reason or "Can we discuss this output?")
    run.bus.emit(DialogEvaluated(step=step.name, iteration=agent.call.iteration,
                                 trigger=found.trigger, reason=found.reason,
                                 question=found.question if found.trigger else "",
                                 errored=found.errored, model=model, input_tokens=tokens_in,
                                 output_tokens=tokens_out, cost_usd=cost))
    if found.errored:
        run.bus.emit(Warning_(step=step.name, message=f"dialog: {found.reason}; no dialog"))
    return found


def _evaluation_schema() -> dict[str, Any]:
    from podium.language.model import OutputField
    from podium.steps.schema import to_json_schema

    return to_json_schema({"trigger": OutputField(type="boolean"),
                           "reason": OutputField(type="string"),
                           "question": OutputField(type="string")})


def run_dialog(agent: AgentRun, output: Any) -> Any:
    """Evaluate; when it triggers, talk with the person (or skip, under --skip-gates).
    Returns the output that stands."""
    run, name, it = agent.call.run, agent.step.name, agent.call.iteration
    found = _evaluate(agent, output)
    if not found.trigger:
        return output
    if run.options.skip_gates:
        run.bus.emit(DialogFinished(step=name, iteration=it, outcome="skipped"))
        return output
    run.bus.emit(DialogStarted(step=name, iteration=it, question=found.question,
                               reason=found.reason, output=output, spent=agent.spend.dump()))
    run.bus.emit(DialogMessage(step=name, iteration=it, role="agent", content=found.question))
    return _talk(agent, output, found.question)


def resume_dialog(agent: AgentRun, carried: dict[str, Any]) -> Any:
    """Go on with the dialog a parked run waited in (its output and what it had spent come
    from its dialog_started event)."""
    agent.spend.load(carried.get("spent"))
    return _talk(agent, carried.get("output"), str(carried.get("question", "")))


def _talk(agent: AgentRun, output: Any, question: str) -> Any:
    run, name, it = agent.call.run, agent.step.name, agent.call.iteration
    transcript: list[tuple[str, str]] = [("agent", question)]
    asked, dismissed, proposed = question, False, False
    session: SideSession | None = None
    try:
        for turn in range(MAX_TURNS):
            request = GateRequest(run.run_id, name, it, asked, _options(name, turn == 0),
                                  kind="dialog")
            answer = run.answerer.answer(request)
            if answer is None:
                if turn == 0:
                    raise GateUnanswerable(
                        f"agent '{name}' opened a dialog and needs a person to answer it, but "
                        "nobody can answer here (no terminal, no scripted answer); use "
                        "--skip-gates to skip the conversation", request)
                dismissed = True  # nobody to go on talking: the conversation ends
                break
            choice, text = interpret(answer, turn == 0)
            run.bus.emit(DialogMessage(step=name, iteration=it, role="user", content=text,
                                       choice=choice,
                                       answered_by=answer.answered_by))
            if choice == "best":
                run.bus.emit(DialogFinished(step=name, iteration=it, outcome="declined",
                                            turns=len(transcript)))
                return output
            if choice == "done":
                dismissed = True
                break
            transcript.append(("user", text))
            try:
                if session is None:
                    session = agent.side(
                        "conversation", "dialog", prompt="",
                        system=DIALOG_AGENT_SYSTEM_PROMPT.format(
                            agent_name=name, agent_output=json_text(output)),
                        schema=None, model=agent.plan.request.model)
                reply, _ = session.send(text)
            except RECOVERABLE as exc:
                run.bus.emit(Warning_(step=name, message=f"dialog: the agent could not reply "
                                                         f"({exc})"))
                asked = f"(The agent could not reply: {exc}. Write again, or say done.)"
                continue
            ready = reply.text.rstrip().endswith(READY_MARKER)
            said = reply.text.rstrip()[: -len(READY_MARKER)].rstrip() if ready else reply.text
            proposed = proposed or ready
            transcript.append(("agent", said))
            run.bus.emit(DialogMessage(step=name, iteration=it, role="agent", content=said))
            asked = said + ("\n\n(The agent proposes to go on: say done to let it run again "
                            "with this conversation.)" if ready else "")
    finally:
        if session is not None:
            session.close()
    return _after(agent, output, transcript, dismissed, proposed)


def transcript_section(transcript: list[tuple[str, str]]) -> str:
    """The text appended to the agent's prompt for its re-execution (Conductor's wording)."""
    lines = "\n".join(f"{'User' if role == 'user' else 'Agent'}: {text}"
                      for role, text in transcript)
    return ("\n\n--- DIALOG WITH USER ---\n"
            "The following conversation occurred after your initial output. "
            "Use this context to refine your response:\n\n"
            f"{lines}\n"
            "--- END DIALOG ---\n\n"
            "Now produce your final output incorporating the dialog above.")


def _after(agent: AgentRun, output: Any, transcript: list[tuple[str, str]], dismissed: bool,
           proposed: bool) -> Any:
    """The agent runs again with the conversation; if that fails, the output stays."""
    run, name, it = agent.call.run, agent.step.name, agent.call.iteration
    section = transcript_section(transcript)
    try:
        again = agent.rerun(section, "after_dialog")
    except RECOVERABLE as exc:
        agent.spend.add("dialog", spent_of(exc))
        run.bus.emit(DialogFinished(step=name, iteration=it, outcome="failed",
                                    turns=len(transcript), user_dismissed=dismissed,
                                    agent_proposed_continue=proposed, error=str(exc)))
        run.bus.emit(Warning_(step=name, message=f"dialog: the re-execution failed ({exc}); "
                                                 "the first output stays"))
        return output
    agent.extra += section
    agent.spend.replaced("dialog", again.usage)
    run.bus.emit(DialogFinished(step=name, iteration=it, outcome="discussed",
                                turns=len(transcript), user_dismissed=dismissed,
                                agent_proposed_continue=proposed))
    return again.output
