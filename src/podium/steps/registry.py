"""Which executor runs which step type: adding a step type is one module and one line here."""

from __future__ import annotations

from podium.steps.agent import execute_agent
from podium.steps.base import StepExecutor
from podium.steps.gate import execute_gate
from podium.steps.mcp_step import execute_mcp
from podium.steps.questions import execute_questions
from podium.steps.script import execute_script
from podium.steps.set_step import execute_set
from podium.steps.terminate import execute_terminate
from podium.steps.wait import execute_wait

EXECUTORS: dict[str, StepExecutor] = {
    "agent": execute_agent,
    "script": execute_script,
    "set": execute_set,
    "terminate": execute_terminate,
    "human_gate": execute_gate,
    "questions": execute_questions,
    "wait": execute_wait,
    "mcp": execute_mcp,
}
