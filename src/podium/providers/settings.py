"""How a provider is configured: the workflow's provider object (for the provider of the same
name only, spec 2.6), then the SDKs' own environment variables. No SDK is imported here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from podium.language.model import ProviderConfig, RuntimeConfig
from podium.providers.catalog import canonical
from podium.records import record

# The key sent to a custom endpoint when none is configured: local servers (Ollama, vLLM, LM
# Studio) ignore it, and the SDK refuses to start without one.
PLACEHOLDER_KEY = "podium-no-key"


@record(frozen=True)
class ProviderSettings:
    """Everything an adapter needs to build its client once per run."""

    name: str
    base_url: str | None = None
    api_key: str | None = None
    auth_token: str | None = None
    api_version: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None  # seconds per API request (runtime.timeout)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    # every field the workflow's provider object sets (for this provider), as written: the
    # runtime-specific ones (copilot's type, wire_api, bearer_token, azure, runtime_url, ...)
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # runtime.mcp_servers, for the agent runtimes that start the servers themselves
    mcp_servers: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # runtime.tool_output (None when not written), for the runtimes that cap tool results
    tool_output: Any = None

    def env(self, *names: str) -> str | None:
        for n in names:
            value = self.environ.get(n)
            if value:
                return value
        return None


class SettingsError(Exception):
    """The provider's configuration cannot work (a key variable that is not set, ...)."""


def object_for(name: str, runtime: RuntimeConfig) -> ProviderConfig | None:
    """The workflow's provider object when it belongs to provider `name`."""
    cfg = runtime.provider
    if isinstance(cfg, ProviderConfig) and canonical(cfg.name) == canonical(name):
        return cfg
    return None


def resolve_settings(name: str, runtime: RuntimeConfig,
                     environ: Mapping[str, str] | None = None) -> ProviderSettings:
    """The settings of provider `name` for a run of a workflow with this `runtime:` block."""
    env = os.environ if environ is None else environ
    cfg = object_for(name, runtime)
    api_key = None
    base_url = None
    headers: dict[str, str] = {}
    auth_token = api_version = None
    options: dict[str, Any] = {}
    if cfg is not None:
        options = cfg.model_dump(exclude_unset=True, exclude={"name"})
        base_url = cfg.base_url
        api_key = cfg.api_key
        if api_key is None and cfg.api_key_env:
            api_key = env.get(cfg.api_key_env)
            if not api_key:
                raise SettingsError(f"runtime.provider.api_key_env names {cfg.api_key_env}, "
                                    "which is not set in the environment")
        headers = dict(cfg.headers or {})
        auth_token = cfg.auth_token
        api_version = cfg.api_version
    return ProviderSettings(canonical(name), base_url, api_key, auth_token, api_version,
                            headers, runtime.timeout, dict(env), options,
                            dict(runtime.mcp_servers), runtime.tool_output)
