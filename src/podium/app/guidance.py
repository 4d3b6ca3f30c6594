"""Mid-run guidance (Conductor's `conductor guide`, `resume --guidance`; spec 5.4).

A person's guidance is queued in the run's options (`guidance`, every text ever given, in
order) by whichever process takes it (`podium guide`, `podium resume --guidance`); the process
that advances the run reads that queue before each agent prompt (as the console's answerer
reads the store for gate answers), records each new text as a `guidance_added` event and
lists them all under `[User Guidance]` in that prompt and every later one. A parked or
interrupted run takes its queue in when it is resumed. A secret in a text is queued as
`<secret:NAME>` (app/secrets.py), and the owner puts its value back when it reads the queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from podium.errors import UsageError
from podium.records import record

if TYPE_CHECKING:
    from podium.store.base import RunRecord, RunStore

MAX_CHARS = 10_000  # one guidance text, as Conductor bounds it


def checked(text: str) -> str:
    """The text stripped; UsageError when it is empty or longer than MAX_CHARS."""
    stripped = text.strip()
    if not stripped:
        raise UsageError("the guidance text is empty")
    if len(stripped) > MAX_CHARS:
        raise UsageError(f"the guidance text is {len(stripped):,} characters; "
                         f"{MAX_CHARS:,} at most")
    return stripped


@record(frozen=True)
class Guided:
    run: RunRecord  # the top-level run that takes it in
    queued: int  # texts in its queue now
    live: bool  # a live process advances it: its next agent step takes the text in


def add_guidance(store: RunStore, run_id: str, texts: list[str]) -> Guided:
    """Queue guidance texts for a run (its top-level run, for a sub-workflow's id)."""
    from podium.app.family import root_of
    from podium.app.owners import liveness
    from podium.app.runs import Refused

    run = root_of(store, store.find_run(run_id))
    given = redacted_guidance(run, texts)
    if run.status in ("success", "failed", "error", "limit") and not liveness(store, run).live:
        raise Refused(f"run {run.id} already finished ({run.status}); guidance reaches only "
                      "a run that goes on", kind="conflict")
    options = store.change_run_options(
        run.id, lambda options: {**options, "guidance": [*queued(options), *given]})
    store.commit()
    return Guided(run, len(queued(options)), liveness(store, run).live)


def redacted_guidance(run: RunRecord, texts: list[str]) -> list[str]:
    """The texts checked, and with the secrets of `run` this process knows redacted: the
    queue is in the store, which keeps no secret."""
    from podium.app.secrets import run_redactor

    given = [checked(t) for t in texts]
    hide = run_redactor(run)
    return [hide.text(t) for t in given] if hide else given


def queued(options: dict[str, object] | None) -> list[str]:
    raw = (options or {}).get("guidance")
    return [str(t) for t in raw] if isinstance(raw, list) else []


RECHECK = 0.02  # seconds a read of the queue serves the prompts rendered after it


def store_source(store: RunStore, run_id: str) -> Callable[[str, int], list[str]]:
    """The queue of a run as its owner reads it before each agent prompt: from the store at
    most every RECHECK seconds (a wide fan-out's members render their prompts together, and
    each would read it), so what `podium guide` queues reaches the prompts rendered from
    RECHECK after its commit."""

    from podium.app.secrets import restore

    last: list[tuple[float, list[str]]] = []  # (when read, the queue): one entry, swapped

    def read(step: str, iteration: int) -> list[str]:
        now = time.monotonic()
        if last and now - last[0][0] < RECHECK:
            return list(last[0][1])
        try:
            texts = queued(store.run_options(run_id))
        except Exception:  # a run not in the store (a sub-workflow's own engine)
            return []
        # the store's redactor is the run's: it has the values the queue holds as tokens
        got = [str(t) for t in restore(texts, store.redactor)]
        last[:] = [(now, got)]
        return list(got)

    return read
