"""`provider: hermes`: Conductor's runtime on the Hermes agent (the hermes-agent package, its
public `run_agent.AIAgent`), which talks to an OpenAI-compatible endpoint.

Each agent execution is one AIAgent (one Hermes session); `send` is one user turn answered by
Hermes's own agent loop with its own toolsets, continuing the execution's conversation, so a
structured-output correction is seen in the same session. The endpoint is the provider
object's `base_url` / `api_key` (or HERMES_BASE_URL / HERMES_API_KEY, then OPENAI_BASE_URL /
OPENAI_API_KEY); `hermes_home` is Hermes's profile folder (set for the agent's thread only),
`hermes_toolsets` the toolsets every agent gets, `hermes_skip_memory` and
`hermes_skip_context_files` turn off its memory and SOUL.md/context files. An agent's `tools:`
picks toolsets: podium's workspace tool names map to Hermes's `file` and `terminal`, other names
are Hermes toolsets; `[]` gives none. Hermes's own API retries are off (podium's retry policy
decides). The streamed text goes out as `model_delta` events, each tool Hermes runs as a
`tool_called` event, and each turn's tokens (the session's counters' growth) and Hermes's own
cost estimate travel on the Reply. The package is imported only when an agent uses it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from podium.providers.base import AgentRequest, ProviderError, Reply
from podium.providers.catalog import HERMES_CAPABILITIES, HERMES_TOOLS
from podium.providers.loop import DeltaStream
from podium.providers.runtime_common import clip, time_left
from podium.providers.settings import PLACEHOLDER_KEY, ProviderSettings
from podium.records import record

CAPABILITIES = HERMES_CAPABILITIES
_COUNTERS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@record(frozen=True)
class HermesConfig:
    base_url: str | None
    api_key: str | None
    home: str | None
    toolsets: tuple[str, ...] | None
    skip_memory: bool
    skip_context_files: bool
    headers: Mapping[str, str]

    def __repr__(self) -> str:  # the key stays out of logs and tracebacks
        return f"HermesConfig(base_url={self.base_url!r}, home={self.home!r})"


def resolve_config(settings: ProviderSettings) -> HermesConfig:
    opts = settings.options
    base_url = settings.base_url or settings.env("HERMES_BASE_URL", "OPENAI_BASE_URL")
    key = settings.api_key or settings.env("HERMES_API_KEY", "OPENAI_API_KEY")
    if base_url and not key:
        key = PLACEHOLDER_KEY  # a local endpoint needs none; the SDK needs one
    toolsets = opts.get("hermes_toolsets")
    return HermesConfig(base_url, key, opts.get("hermes_home"),
                        None if toolsets is None else tuple(toolsets),
                        bool(opts.get("hermes_skip_memory")),
                        bool(opts.get("hermes_skip_context_files")), dict(settings.headers))


def toolsets_for(request: AgentRequest, config: HermesConfig) -> list[str] | None:
    """The toolsets the agent's Hermes gets: from its `tools:` (workspace names mapped to
    Hermes toolsets, other names taken as toolsets), else `hermes_toolsets`, else None (Hermes's
    defaults)."""
    names = request.effective_tools if request.effective_tools is not None else request.tools
    if names is None:
        return None if config.toolsets is None else list(config.toolsets)
    out: list[str] = []
    for name in names:
        out += HERMES_TOOLS.get(name, (name,))
    return list(dict.fromkeys(out))


class HermesSession:
    """One AIAgent and the conversation of one agent execution."""

    def __init__(self, provider: HermesProvider, request: AgentRequest) -> None:
        self.provider = provider
        self.request = request
        self.deadline = (time.monotonic() + request.timeout) if request.timeout else None
        self.history: list[dict[str, Any]] = []
        self.spent = dict.fromkeys(_COUNTERS, 0)
        self.cost = 0.0
        self.deltas = DeltaStream(request)
        self.started: dict[str, float] = {}
        self.agent: Any = None

    # ------------------------------------------------------------------ the agent

    def _make_agent(self) -> Any:
        from run_agent import AIAgent

        req, cfg = self.request, self.provider.config
        overrides: dict[str, Any] = {}
        if req.temperature is not None:
            overrides["temperature"] = req.temperature
        if cfg.headers:
            overrides["extra_headers"] = dict(cfg.headers)
        kwargs: dict[str, Any] = {
            "base_url": cfg.base_url, "api_key": cfg.api_key, "model": req.model or "",
            "quiet_mode": True, "save_trajectories": False,
            "enabled_toolsets": toolsets_for(req, cfg),
            "skip_memory": cfg.skip_memory, "skip_context_files": cfg.skip_context_files,
            "max_iterations": req.max_agent_iterations,
            "stream_delta_callback": self._delta,
            "tool_start_callback": self._tool_start,
            "tool_complete_callback": self._tool_done,
            "request_overrides": overrides or None,
        }
        if req.max_tokens:
            kwargs["max_tokens"] = req.max_tokens
        if req.reasoning_effort:
            from hermes_constants import parse_reasoning_effort

            kwargs["reasoning_config"] = parse_reasoning_effort(req.reasoning_effort)
        agent = AIAgent(**kwargs)
        agent._api_max_retries = 1  # one attempt per call: podium's retry policy retries
        # Hermes's status lines (retries, errors) would land in podium's stdout, which is the
        # run's output (`--json`): its own switch for machine-readable runs, and no printer
        agent.suppress_status_output = True
        agent._print_fn = _discard
        return agent

    # ------------------------------------------------------------------ callbacks

    def _delta(self, text: Any) -> None:
        if isinstance(text, str):
            self.deltas.add("text", text)

    def _tool_start(self, call_id: Any, name: Any, args: Any) -> None:
        self.deltas.flush()
        self.started[str(call_id)] = time.monotonic()

    def _tool_done(self, call_id: Any, name: Any, args: Any, result: Any) -> None:
        emit = self.request.emit
        began = self.started.pop(str(call_id), time.monotonic())
        if emit is None:
            return
        from podium.events.model import ToolCalled

        text = result if isinstance(result, str) else str(result)
        emit(ToolCalled(step=self.request.step, iteration=self.request.iteration,
                        tool=str(name), source="hermes",
                        arguments=clip(args) if isinstance(args, dict) else {},
                        output=clip(text), is_error=_is_error(text),
                        elapsed=time.monotonic() - began))

    # ------------------------------------------------------------------ a turn

    def _turn(self, message: str, box: dict[str, Any]) -> None:
        token = None
        try:
            if self.provider.config.home:
                from hermes_constants import set_hermes_home_override

                token = set_hermes_home_override(self.provider.config.home)
            if self.agent is None:
                self.agent = self._make_agent()
            box["result"] = self.agent.run_conversation(
                message, system_message=self.request.system_prompt,
                conversation_history=list(self.history) or None)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            if token is not None:
                from hermes_constants import reset_hermes_home_override

                reset_hermes_home_override(token)

    def send(self, message: str) -> Reply:
        left = time_left(self.request.timeout, self.deadline)
        box: dict[str, Any] = {}
        worker = threading.Thread(target=self._turn, args=(message, box), daemon=True,
                                  name=f"podium-hermes-{self.request.step}")
        worker.start()
        worker.join(left)
        self.deltas.flush()
        if worker.is_alive():
            if self.agent is not None:
                self.agent.interrupt("podium: the agent's timeout")
            raise ProviderError(f"hermes: no answer within {left:g}s (the agent's timeout)",
                                category="timeout")
        if "error" in box:
            exc = box["error"]
            raise ProviderError("hermes: " + " ".join(str(exc).split())[:600]) from None
        return self._reply(box["result"])

    def _reply(self, result: dict[str, Any]) -> Reply:
        grown = {k: int(result.get(k) or 0) - self.spent[k] for k in _COUNTERS}
        self.spent = {k: int(result.get(k) or 0) for k in _COUNTERS}
        cost = float(result.get("estimated_cost_usd") or 0.0)
        cost_grown, self.cost = cost - self.cost, cost
        if result.get("failed") or not result.get("completed", True):
            from podium.providers.base import TokenUsage

            detail = result.get("error") or result.get("final_response") or "the turn failed"
            spent = TokenUsage(grown["input_tokens"], grown["output_tokens"],
                               grown["cache_read_tokens"], grown["cache_write_tokens"],
                               self.request.model)
            raise ProviderError(f"hermes: {' '.join(str(detail).split())[:600]}",
                                retryable=result.get("failure_reason") in _RETRYABLE,
                                spent=[spent] if grown["input_tokens"] else None)
        self.history = list(result.get("messages") or [])
        return Reply(str(result.get("final_response") or ""), None, grown["input_tokens"],
                     grown["output_tokens"], grown["cache_read_tokens"],
                     str(result.get("model") or self.request.model or "") or None,
                     {"runtime": "hermes", "session_id": result.get("session_id"),
                      "turns": result.get("api_calls"),
                      "reported_cost_usd": cost_grown if result.get("cost_status") not in
                      (None, "unknown") else None,
                      "context_tokens": result.get("last_prompt_tokens") or None,
                      "stop": result.get("turn_exit_reason")},
                     grown["cache_write_tokens"])

    def close(self) -> None:
        agent, self.agent = self.agent, None
        self.provider.discard(self)
        if agent is not None:
            close = getattr(agent, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):  # teardown must not fail a finished agent
                    close()


# Hermes's classified failure reasons (agent/error_classifier.py FailoverReason) worth a retry
_RETRYABLE = ("server_error", "rate_limit", "upstream_rate_limit", "timeout", "overloaded")


def _discard(*args: Any, **kwargs: Any) -> None:
    return None


def _is_error(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith(("error", '{"error"')) or '"success": false' in head


class HermesProvider:
    name = "hermes"
    capabilities = CAPABILITIES

    def __init__(self, config: HermesConfig) -> None:
        self.config = config
        self.open: set[HermesSession] = set()
        self._lock = threading.Lock()

    def open_session(self, request: AgentRequest) -> HermesSession:
        session = HermesSession(self, request)
        with self._lock:
            self.open.add(session)
        return session

    def discard(self, session: HermesSession) -> None:
        with self._lock:
            self.open.discard(session)

    def close(self) -> None:
        for session in list(self.open):
            session.close()


def create_hermes(settings: ProviderSettings) -> HermesProvider:
    return HermesProvider(resolve_config(settings))
