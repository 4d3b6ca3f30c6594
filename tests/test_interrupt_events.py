"""SIGTERM (`podium stop`) at awkward moments. Landing while the engine records an event: the
interrupt waits until the event is recorded, so no seq is given without its event and every
sink gets it. Several at once (two `podium stop`s), and one after the run ended while the
command finishes: the run ends interrupted, exit 130, never hung nor killed by the signal.

The store stress test on PostgreSQL found a run stopped at its last step with events 1..14
and 16: the KeyboardInterrupt of the engine's SIGTERM handler had been raised inside the bus
after seq 15 was given and before any sink had it. Here a sink raises SIGTERM against its own
process from inside an emit (deterministic: the handler runs as soon as the signal is raised).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

from helpers_engine import MemorySink, cli_env, podium_argv, run_yaml, wait_until, write
from podium.events.model import Event

WF = """
workflow: {name: stopped, entry_point: a}
agents:
  - {name: a, type: set, value: 1, routes: [{to: b}]}
  - {name: b, type: set, value: 2, routes: [{to: c}]}
  - {name: c, type: set, value: 3}
"""


class TermAt:
    """An observer that raises a signal (SIGTERM unless told) against its own process at one
    event type of a step."""

    def __init__(self, event_type: str, step: str, sig: int = signal.SIGTERM) -> None:
        self.event_type, self.step, self.sig = event_type, step, sig
        self.raised = False

    def handle(self, event: Event) -> None:
        if not self.raised and event.type == self.event_type and \
                getattr(event, "step", None) == self.step:
            self.raised = True
            signal.raise_signal(self.sig)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupt_inside_an_emit_waits_for_the_event_to_be_recorded(
        tmp_path: Path, sig: int) -> None:
    """`podium stop` (SIGTERM) and Ctrl+C (SIGINT) alike."""
    trip, after = TermAt("step_started", "b", sig), MemorySink()
    run = run_yaml(tmp_path, WF, sinks=[trip, after])
    assert trip.raised
    assert run.result.status == "interrupted"
    first = [(e.seq, e.type) for e in run.sink.events]
    assert [seq for seq, _ in first] == list(range(1, len(first) + 1))
    # the sink after the one that raised the signal got that event too, and all the others
    assert [(e.seq, e.type) for e in after.events] == first
    assert ("step_started", "b") in [(e.type, getattr(e, "step", None)) for e in after.events]


HELD = """
workflow: {name: held, entry_point: hold}
agents:
  - name: hold
    type: script
    command: python
    args: ["-c", "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(60)",
           "{{ workflow.dir }}/started"]
    routes: [{to: done}]
  - {name: done, type: terminate, status: success, reason: held}
"""


def test_stops_at_once_and_after_the_run_ended_exit_130(tmp_path: Path) -> None:
    """Two SIGTERMs back to back (a second inside the handling of the first once hung the
    run: threading.Event.set is not reentrant), then one more once the run's summary is out
    (the engine had put SIGTERM back to its default: the process died by the signal)."""
    wf = write(tmp_path, HELD)
    proc = subprocess.Popen(podium_argv("run", wf), cwd=tmp_path, env=cli_env(tmp_path / "home"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        assert wait_until((tmp_path / "started").exists, 60)
        os.kill(proc.pid, signal.SIGTERM)
        os.kill(proc.pid, signal.SIGTERM)
        seen = []
        for line in proc.stderr:  # until the run's end is printed
            seen.append(line)
            if line.startswith("next: podium resume "):  # the summary is out
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
                break
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()  # by its pid: this test started it
            proc.communicate()
    err = "".join(seen) + rest
    assert proc.returncode == 130, err
    assert "Traceback" not in err
