"""SIGTERM (`podium stop`) landing while the engine records an event: the interrupt waits until
the event is recorded, so no seq is given without its event and every sink gets it.

The store stress test on PostgreSQL found a run stopped at its last step with events 1..14
and 16: the KeyboardInterrupt of the engine's SIGTERM handler had been raised inside the bus
after seq 15 was given and before any sink had it. Here a sink raises SIGTERM against its own
process from inside an emit (deterministic: the handler runs as soon as the signal is raised).
"""

from __future__ import annotations

import signal
from pathlib import Path

from helpers_engine import MemorySink, run_yaml
from podium.events.model import Event

WF = """
workflow: {name: stopped, entry_point: a}
agents:
  - {name: a, type: set, value: 1, routes: [{to: b}]}
  - {name: b, type: set, value: 2, routes: [{to: c}]}
  - {name: c, type: set, value: 3}
"""


class TermAt:
    """An observer that raises SIGTERM against its own process at one event type of a step."""

    def __init__(self, event_type: str, step: str) -> None:
        self.event_type, self.step = event_type, step
        self.raised = False

    def handle(self, event: Event) -> None:
        if not self.raised and event.type == self.event_type and \
                getattr(event, "step", None) == self.step:
            self.raised = True
            signal.raise_signal(signal.SIGTERM)

    def close(self) -> None:
        pass


def test_sigterm_inside_an_emit_waits_for_the_event_to_be_recorded(tmp_path: Path) -> None:
    trip, after = TermAt("step_started", "b"), MemorySink()
    run = run_yaml(tmp_path, WF, sinks=[trip, after])
    assert trip.raised
    assert run.result.status == "interrupted"
    first = [(e.seq, e.type) for e in run.sink.events]
    assert [seq for seq, _ in first] == list(range(1, len(first) + 1))
    # the sink after the one that raised the signal got that event too, and all the others
    assert [(e.seq, e.type) for e in after.events] == first
    assert ("step_started", "b") in [(e.type, getattr(e, "step", None)) for e in after.events]
