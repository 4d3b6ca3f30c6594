"""The secrets of a stored run as a process other than its owner knows them (`podium guide`,
`podium gate answer`, the console): the providers' keys and the run's workflow's `secrets:`,
valued from this process's environment, so that what it writes into the store for the run
(guidance, a gate's additional input) is redacted as the run's own events are.

The owner, which has the values, puts them back where the run needs them (`restore`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.events.redact import KEY_VARIABLES, Redactor, restore_secrets

if TYPE_CHECKING:
    from podium.store.base import RunRecord


def declared_secrets(run: RunRecord) -> set[str]:
    """The variables whose values are secrets for `run`: the providers' keys and its
    workflow's `secrets:` (read from its file; the keys alone when the file is gone or no
    longer loads)."""
    names = set(KEY_VARIABLES)
    from podium.language.load import load_workflow
    from podium.language.source import FileUnreadable

    try:
        loaded = load_workflow(Path(run.workflow_path))
    except (FileUnreadable, OSError):
        return names
    if loaded.model is not None:
        names.update(loaded.model.workflow.secrets)
    return names


def run_redactor(run: RunRecord) -> Redactor:
    """A Redactor of `run`'s secrets with the values this process's environment gives them."""
    return Redactor({n: v for n in declared_secrets(run) if (v := os.environ.get(n, ""))})


def restore(value: Any, redactor: Redactor) -> Any:
    """`value` read back from the store with the secrets `redactor` knows put back (the run's
    owner: its redactor holds every value the run has)."""
    return restore_secrets(value, set(redactor.secrets), redactor.secrets)
