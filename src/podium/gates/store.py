"""Answers that people gave to parked gates, read back from the run store on resume."""

from __future__ import annotations

import threading

from podium.gates.base import GateAnswer, GateRequest
from podium.store.base import RunStore


class StoreAnswerer:
    """Returns the recorded answer of a parked gate of the asking run (or sub-run), once."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        # group members and items ask from several threads: an answer goes to one of them
        self._lock = threading.Lock()

    def answer(self, request: GateRequest) -> GateAnswer | None:
        with self._lock:
            for gate in self.store.gates(run_id=request.run_id, status="answered"):
                if gate.step == request.step and gate.kind == request.kind and \
                        gate.answer is not None:
                    self.store.consume_gate(gate.id)
                    return GateAnswer(gate.answer, dict(gate.additional_input),
                                      gate.answered_by or "store")
        return None
