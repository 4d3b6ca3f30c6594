"""Fail before spending: the model providers a run's agents use are set up before its first
step, so a missing key or runtime stops the run before any script ran or anything was paid,
with the variable to set and the ways to run without it."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from podium import exitcodes
from podium.errors import PodiumError

if TYPE_CHECKING:
    from podium.engine.run import Engine


class ProviderUnavailable(PodiumError):
    """A provider the workflow needs cannot be used here."""

    exit_code = exitcodes.INVALID


def check_providers(engine: Engine) -> None:
    """Create every provider the workflow's own agents use (the registry keeps them for the
    run). Scripted answers (`--responses` with agents) replace them all: nothing to check."""
    from podium.language.model import AgentStep

    services = engine.services
    if services.providers.override is not None:
        return
    runtime = engine.workflow.workflow.runtime
    users: dict[str, list[str]] = {}
    agents = [step for step in [*engine.workflow.agents,
                                *(g.agent for g in engine.workflow.for_each)]
              if isinstance(step, AgentStep)]
    if not agents:  # no provider to set up (nor the agent step's modules to load)
        return
    from podium.providers.base import ProviderError
    from podium.providers.settings import SettingsError, resolve_settings
    from podium.steps.agent import provider_name_for

    for step in agents:
        users.setdefault(provider_name_for(services, step), []).append(step.name)
    for name, steps in users.items():
        try:
            services.providers.get(name, functools.partial(resolve_settings, name, runtime))
        except (ProviderError, SettingsError) as exc:
            used = ", ".join(f"'{s}'" for s in steps[:3]) + (" ..." if len(steps) > 3 else "")
            raise ProviderUnavailable(
                f"{exc} (needed by {used}); nothing was run. To run without it: --responses "
                "FILE answers the agents from a file (offline), or -p PROVIDER uses another "
                "provider for the workflow's default") from None
