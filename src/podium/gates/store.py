"""Answers that people gave to parked gates, read back from the run store on resume (a
secret in what they typed is stored redacted, and put back here for the run)."""

from __future__ import annotations

import threading

from podium.events.redact import Redactor
from podium.gates.base import GateAnswer, GateRequest
from podium.store.base import GateBook


class StoreAnswerer:
    """Returns the recorded answer of a parked gate of the asking run (or sub-run), once."""

    def __init__(self, store: GateBook, redactor: Redactor) -> None:
        self.store = store
        self.redactor = redactor  # the run's: it has the values of the secrets it redacts
        # group members and items ask from several threads: an answer goes to one of them
        self._lock = threading.Lock()

    def answer(self, request: GateRequest) -> GateAnswer | None:
        with self._lock:
            for gate in self.store.gates(run_id=request.run_id, status="answered"):
                if gate.step == request.step and gate.kind == request.kind and \
                        gate.answer is not None:
                    self.store.consume_gate(gate.id)
                    return GateAnswer(gate.answer, self._restored(gate.additional_input),
                                      gate.answered_by or "store")
        return None

    def _restored(self, given: dict[str, str]) -> dict[str, str]:
        """The additional input as the person gave it: the store keeps `<secret:NAME>` where
        they typed a secret, and the run's redactor has its value."""
        from podium.events.redact import restore_secrets

        secrets = self.redactor.secrets
        return {k: str(restore_secrets(v, set(secrets), secrets)) for k, v in given.items()}
