"""When an event is committed: with the next one that commits, or at once.

The run store (store/sqlcore.py) writes a run's events in transactions at its commit points,
and the JSONL copy of the events (events/sinks/jsonl.py) reaches its file at the same points,
so the two agree on when an event is there to read. One rule for both, here.
"""

from __future__ import annotations

from podium.events.model import Event
from podium.language.model import END

# Events that complete a step wait for the checkpoint's commit.
DEFERRED = frozenset({"step_finished", "route_taken", "gate_answered"})

# Steps that only compute from the run's state (no process, model, person or clock to wait
# for): the start of one commits with its end, one transaction per step instead of two (a
# `set` step's second commit was a fifth of its cost; docs/performance.md). A reader sees
# such a step start when it has finished; one killed half-way is as if it never started.
# Consecutive instant steps of an in-process run commit together (engine/run.py holds their
# run's commits, as a group does its members'): a transaction at most every COMMIT_WINDOW,
# and at the latest when a step that is not instant starts or the run ends. A kill loses
# at most that window of them, and resume runs them again from the state they read.
INSTANT = frozenset({"set"})

# How long the first write of a batch (a group's members, a run of instant steps) waits for
# others to join it in one transaction; and how long a script may run before its start
# commits on its own.
COMMIT_WINDOW = 0.005
# A script step's start and output commit with its end, one transaction per step instead of
# three (the two saved were an eighth of a short script step; docs/performance.md), unless
# the script runs longer than COMMIT_WINDOW: its start then commits while it runs
# (steps/script.py asks the bus), so a reader sees a long script running. A script killed before its end runs again
# on resume either way; a failure of its route keeps its start and output (store/sqlcore.py).
SCRIPT = "script"
# A group member's agent starts in the same commit as the next thing it records, its prompt
# (or its failure): the prompt is rendered from the run's state right after it, so a reader
# sees the member start a moment later (its group is seen running meanwhile), and a member
# then killed is as if it never started. One transaction less per member of an agent
# fan-out (docs/performance.md). A top-level agent's start commits at once: creating its
# provider or starting its MCP servers may take seconds, which its run must show. While a
# group holds its run's commits (the store's hold()), a prompt is a member's (the run's own
# thread waits for the group): the start and the prompt join the batch, not a transaction
# of their own.


def completes_step(event: Event) -> bool:
    """Does this event complete a step that its checkpoint must commit? A group member's
    step_finished does not: a member is committed on its own as soon as it finishes, so a
    resume after a kill inside the group reuses it instead of running it again."""
    # the field read from the model's own values: an event type without it (route_taken)
    # would go through pydantic's __getattr__ and an AttributeError, on every event
    return event.type in DEFERRED and event.__dict__.get("group") is None


def defers(event: Event) -> bool:
    """Does this event wait with its run's pending writes (for a checkpoint or run_finished)?"""
    if completes_step(event):
        return True
    if event.type == "step_started":
        kind = event.__dict__.get("step_type")
        if (kind in INSTANT or kind == SCRIPT) and event.__dict__.get("group") is None:
            return True
        if kind == "agent" and event.__dict__.get("group") is not None:
            return True
    if event.type == "script_output":  # with its step's end (or its start, while it runs)
        return True
    if event.type == "model_exchange" and event.__dict__.get("group") is not None:
        # a group member's answer: what follows it (the member's end, or its parse
        # recovery) commits at once, and a member killed before its end runs again anyway
        return True
    # by its type's name: an isinstance of a pydantic model goes through its metaclass
    return event.type == "checkpoint" and event.__dict__.get("next_step") in (None, END)


_WAIT_WHILE_HELD = frozenset({"prompt_rendered", "checkpoint"})


def batched(event: Event) -> bool:
    """While its run's commits are held (the store's hold()), does this event wait for the
    batch? While a group holds them: a member's events and a prompt (the run's own thread
    waits for the group, so a prompt is a member's); the group's own events commit as they
    come. While a run of instant steps holds them: their checkpoints (their other events
    wait for those anyway). Nothing else waits: an event that commits at once commits the
    batch with it."""
    return event.__dict__.get("group") is not None or event.type in _WAIT_WHILE_HELD
