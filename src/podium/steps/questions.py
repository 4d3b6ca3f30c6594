"""The questions step: ask several questions in one step (spec 3.5).

Questions come inline (their text, hint and choices are templates) or from a list in the
context (`source:`, used verbatim). With `--skip-gates` a question with a `default` takes it
and the others are skipped; at an interactive terminal each question is asked in turn. A
run with neither cannot answer and stops with a clear error (it does not skip silently).
"""

from __future__ import annotations

import sys
from typing import Any

from podium.errors import StepError
from podium.language.model import Question, QuestionsStep
from podium.steps.base import StepCall, StepOutcome


def _questions(call: StepCall, step: QuestionsStep) -> list[dict[str, Any]]:
    run = call.run
    if step.questions is not None:
        ctx = run.full_context()
        out = []
        for i, q in enumerate(step.questions):
            def render(text: str, what: str) -> str:
                return run.render(text, ctx, step=step.name, what=what,
                                  iteration=call.iteration)

            out.append({
                "id": q.id or f"q{i + 1}", "text": render(q.text, f"questions[{i}].text"),
                "hint": render(q.hint, f"questions[{i}].hint") if q.hint else None,
                "choices": [render(c, f"questions[{i}].choices") for c in q.choices or []],
                "allow_free_text": q.allow_free_text, "default": q.default,
                "required": q.required})
        return out
    return _from_source(call, step)


def _from_source(call: StepCall, step: QuestionsStep) -> list[dict[str, Any]]:
    assert step.source is not None
    parts = step.source.split(".")
    value: Any = call.run.full_context()
    for part in parts:
        if not isinstance(value, dict) or part not in value:
            raise StepError(f"source '{step.source}': no '{part}' here", step=step.name,
                            iteration=call.iteration)
        value = value[part]
    if not isinstance(value, list):
        raise StepError(f"source '{step.source}' is not a list", step=step.name,
                        iteration=call.iteration)
    out = []
    for i, raw in enumerate(value):
        item = {"text": raw} if isinstance(raw, str) else raw
        if not isinstance(item, dict) or not isinstance(item.get("text", item.get("question")),
                                                        str):
            raise StepError(f"source '{step.source}' item {i} is not a question (a string or "
                            "an object with 'text')", step=step.name, iteration=call.iteration)
        q = Question.model_validate({"text": item.get("text", item.get("question")),
                                     **{k: v for k, v in item.items()
                                        if k in ("id", "hint", "choices", "allow_free_text",
                                                 "default", "required")}})
        out.append({"id": q.id or f"q{i + 1}", "text": q.text, "hint": q.hint,
                    "choices": list(q.choices or []), "allow_free_text": q.allow_free_text,
                    "default": q.default, "required": q.required})
    return out


def _ask(q: dict[str, Any]) -> tuple[Any, str]:
    w = sys.stderr.write
    w(f"\n{q['text']}\n")
    if q["hint"]:
        w(f"  ({q['hint']})\n")
    for i, c in enumerate(q["choices"], 1):
        w(f"  {i}. {c}\n")
    default = f" [{q['default']}]" if q["default"] is not None else ""
    while True:
        w(f"answer{default}: ")
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            return (q["default"], "default") if q["default"] is not None else (None, "skipped")
        text = line.strip()
        if not text:
            if q["default"] is not None:
                return q["default"], "default"
            if not q["required"]:
                return None, "skipped"
            w("an answer is required\n")
            continue
        if text.isdigit() and 1 <= int(text) <= len(q["choices"]):
            return q["choices"][int(text) - 1], "choice"
        if text in q["choices"]:
            return text, "choice"
        if q["allow_free_text"]:
            return text, "free_text"
        w("choose one of the numbered choices\n")


def execute_questions(call: StepCall) -> StepOutcome:
    step = call.step
    assert isinstance(step, QuestionsStep)
    run = call.run
    questions = _questions(call, step)
    interactive = run.options.interactive and not run.options.skip_gates
    if not interactive and not run.options.skip_gates and questions:
        raise StepError("this questions step needs a person at a terminal; run it "
                        "interactively, or with --skip-gates to take the defaults",
                        step=step.name, iteration=call.iteration)
    answers: dict[str, Any] = {}
    items = []
    for q in questions:
        if interactive:
            answer, source = _ask(q)
        elif q["default"] is not None:
            answer, source = q["default"], "default"
        else:
            answer, source = None, "skipped"
        skipped = source == "skipped"
        if not skipped:
            answers[q["id"]] = answer
        items.append({"id": q["id"], "question": q["text"], "answer": answer,
                      "source": source, "skipped": skipped})
    answered = [i for i in items if not i["skipped"]]
    # as Conductor joins it: a blank line between entries, unanswered questions left out
    # (each entry keeps its question's number)
    transcript = "\n\n".join(f"Q{n}. {i['question']}\nA: {i['answer']}"
                             for n, i in enumerate(items, 1) if i["answer"] is not None)
    # --skip-gates asks nobody: Conductor reports the remaining questions as skipped, even
    # when every one had a default to take
    outcome = "skipped_remaining" if questions and not interactive else "completed"
    output = {"answers": answers, "items": items, "transcript": transcript,
              "answered_count": len(answered), "skipped_count": len(items) - len(answered),
              "answered_any": bool(answered), "outcome": outcome}
    return StepOutcome(output)
