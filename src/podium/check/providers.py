"""Validate checks for providers, models, tools and prices.

- provider names (workflow default and per agent) must be ones podium knows; the error lists
  them; the provider object may only carry the fields its provider takes;
- a reasoning effort the provider (or the model) cannot take is an error;
- `tools:` names must be workspace tools or `<server>__<tool>` of a declared MCP server, or
  (for agents on a runtime: copilot, claude-agent-sdk) a tool of the runtime's own, such as
  Copilot's `web_search`; the root list is checked for the agents that inherit it; MCP
  server names must be usable in such names;
- under `budget_mode: enforce`, every model an agent can use (a literal, or every string
  constant its template can produce) needs a price (genai-prices, podium's table, or
  `cost.pricing`): a budget never fails open silently.

No SDK is imported; the price table is loaded only for a model podium's own table lacks.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from podium.language.diagnostics import KeyPath, closest, did_you_mean
from podium.language.model import AgentStep, ProviderConfig
from podium.providers.catalog import (
    NOT_SUPPORTED,
    PROVIDERS,
    RUNTIME_CAPABILITIES,
    RUNTIME_OWN_TOOLS,
    canonical,
    describe_known,
    effort_problem,
    info,
    known_names,
    runtime_tool_owner,
    tool_problem,
)
from podium.templating.text import RenderFailure, is_template

if TYPE_CHECKING:
    from jinja2 import nodes

    from podium.check.semantic import Checker
else:  # the trees are lightparse.py's or Jinja's: kinds.py names their nodes in both
    from podium.templating import kinds as nodes

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
CONDUCTOR_ONLY = tuple(NOT_SUPPORTED)


def check_providers(checker: Checker) -> None:
    """Add every provider, model, tool and price diagnostic of the workflow to `checker`."""
    wf = checker.wf
    runtime = wf.workflow.runtime
    default = runtime.provider_name
    default_path: KeyPath = ("workflow", "runtime", "provider")
    if isinstance(runtime.provider, ProviderConfig):
        default_path = (*default_path, "name")
        _check_object(checker, runtime.provider)
    _check_name(checker, default_path, default)
    _check_servers(checker)
    agents = _agents(checker)
    inheriting = {step.name: canonical(step.provider or default) for _, step in agents
                  if step.tools is None} or {"": canonical(default)}
    for j, name in enumerate(wf.tools):
        _check_tool(checker, ("tools", j), name, inheriting)
    used: set[str] = set()
    for path, step in agents:
        pname = step.provider or default
        if step.provider:
            _check_name(checker, (*path, "provider"), step.provider)
        used.add(canonical(pname))
        _check_effort(checker, path, step, pname)
        for j, name in enumerate(step.tools or []):
            _check_tool(checker, (*path, "tools", j), name, {step.name: canonical(pname)})
        _check_runtime_capabilities(checker, path, step, pname)
    from podium.check.runtime_keys import check_runtime_keys

    check_runtime_keys(checker, agents)
    if isinstance(runtime.provider, ProviderConfig):
        _check_copilot_object(checker, runtime.provider)
    _check_temperature(checker, used)
    limits = wf.workflow.limits
    if limits.budget_usd is not None and limits.budget_mode == "enforce":
        _check_prices(checker)  # an unpriced model is an error there
    else:
        _check_model_names(checker)


def _agents(checker: Checker) -> list[tuple[KeyPath, AgentStep]]:
    out: list[tuple[KeyPath, AgentStep]] = [
        (("agents", i), s) for i, s in enumerate(checker.wf.agents) if isinstance(s, AgentStep)]
    out += [(("for_each", i, "agent"), g.agent) for i, g in enumerate(checker.wf.for_each)
            if isinstance(g.agent, AgentStep)]
    return out


# --------------------------------------------------------------------------- names and objects


def _check_name(checker: Checker, path: KeyPath, name: str) -> None:
    if info(name) is not None:
        return
    if name in NOT_SUPPORTED:
        checker.err(path, f"provider '{name}' ({NOT_SUPPORTED[name]}) is not supported by "
                    f"podium; podium has: {describe_known()}", code="not-supported", at="value")
        return
    hint = did_you_mean(name, known_names())
    checker.err(path, f"unknown provider '{name}'; podium has: {describe_known()}", hint,
                code="unknown-provider", at="value")


def _check_object(checker: Checker, cfg: ProviderConfig) -> None:
    p = info(cfg.name)
    if p is None or p.factory is None:
        return  # an unknown name is reported once; Conductor-only runtimes keep their fields
    base: KeyPath = ("workflow", "runtime", "provider")
    for key in sorted(cfg.model_fields_set - {"name"}):
        if key not in p.fields:
            checker.err((*base, key), f"'{key}' does not apply to provider '{p.name}' (it "
                        f"takes: {', '.join(p.fields)})", did_you_mean(key, p.fields),
                        code="provider-field")
    if cfg.api_key is not None and cfg.api_key_env is not None:
        checker.err((*base, "api_key_env"), "give either api_key or api_key_env, not both",
                    code="provider-field")


def _check_temperature(checker: Checker, used: set[str]) -> None:
    temp = checker.wf.workflow.runtime.temperature
    if temp is None:
        return
    for name in sorted(used):
        p = PROVIDERS.get(name)
        if p is not None and temp > p.max_temperature:
            checker.err(("workflow", "runtime", "temperature"),
                        f"temperature {temp:g} is above {p.max_temperature:g}, the most provider "
                        f"'{name}' accepts", code="provider-temperature", at="value")


# --------------------------------------------------------------------------- effort


def _check_effort(checker: Checker, path: KeyPath, step: AgentStep, pname: str) -> None:
    runtime = checker.wf.workflow.runtime
    own = step.reasoning.effort if step.reasoning and step.reasoning.effort else None
    effort = own or runtime.default_reasoning_effort
    if not effort or is_template(effort):
        return
    where: KeyPath = (*path, "reasoning", "effort") if own else \
        ("workflow", "runtime", "default_reasoning_effort")
    models: list[str | None] = [*model_candidates(checker, step)[0]] or [None]
    for model in models:
        problem = effort_problem(pname, model, effort)
        if problem:
            checker.err(where, f"agent '{step.name}': {problem}", code="reasoning-effort",
                        at="value")
            return


# --------------------------------------------------------------------------- tools


def _servers(checker: Checker) -> list[str]:
    return list(checker.wf.workflow.runtime.mcp_servers)


def _check_servers(checker: Checker) -> None:
    for name in _servers(checker):
        if not _SERVER_NAME.match(name) or "__" in name:
            checker.err(("workflow", "runtime", "mcp_servers", name),
                        f"MCP server name '{name}' cannot name its tools: use letters, digits, "
                        "'-' and single '_' (the model sees tools as <server>__<tool>)",
                        code="mcp-server")


def _check_tool(checker: Checker, path: KeyPath, name: str, users: dict[str, str]) -> None:
    """One `tools:` entry, for the agents that use it (agent name -> provider; "" for none)."""
    from podium.tools.workspace import WORKSPACE_TOOL_NAMES

    if name in WORKSPACE_TOOL_NAMES:
        return
    servers = _servers(checker)
    server, sep, tool = name.partition("__")
    if sep and server in servers and tool:
        return
    if sep and tool:
        match = closest(server, servers)
        declared = ", ".join(servers) or "none"
        checker.err(path, f"unknown MCP server '{server}' in tool '{name}' (runtime.mcp_servers "
                    f"declares: {declared})", f"did you mean '{match}__{tool}'?" if match
                    else None, code="unknown-tool", at="value")
        return
    by_provider: dict[str, list[str]] = {}
    for agent, provider in users.items():
        by_provider.setdefault(provider, []).append(agent)
    for provider, agents in sorted(by_provider.items()):
        if info(provider) is None:
            continue  # an unknown provider is reported once, where it is named
        who = _who(agents, provider)
        own = RUNTIME_OWN_TOOLS.get(provider)
        if own is not None:
            if name not in own:
                checker.warn(path, f"'{name}' is not a tool podium knows provider "
                             f"'{provider}' to have; it is asked of the runtime as is "
                             f"({who})", did_you_mean(name, [*own, *WORKSPACE_TOOL_NAMES]),
                             code="unknown-tool", at="value")
            continue
        pool = [*WORKSPACE_TOOL_NAMES, *(f"{s}__*" for s in servers)]
        owner = runtime_tool_owner(name)
        what = (f"'{name}' is a tool of the {owner} runtime, which provider '{provider}' does "
                "not have" if owner else f"unknown tool '{name}'")
        checker.err(path, f"{what} ({who}): tools are {', '.join(WORKSPACE_TOOL_NAMES)}, or "
                    "<server>__<tool> for a server in runtime.mcp_servers",
                    did_you_mean(name, pool), code="unknown-tool", at="value")


def _who(agents: list[str], provider: str) -> str:
    named = [a for a in agents if a]
    if not named:
        return f"provider '{provider}'"
    shown = ", ".join(f"'{a}'" for a in named[:3]) + (" ..." if len(named) > 3 else "")
    return f"agent{'s' if len(named) > 1 else ''} {shown} on provider '{provider}'"


# --------------------------------------------------------------------------- prices


def model_candidates(checker: Checker, step: AgentStep) -> tuple[list[str], bool]:
    """The models an agent can use: (names, complete). A template yields every string constant
    it can print; `complete` is False when it can print something else too."""
    model = step.model or checker.wf.workflow.runtime.default_model
    if model is None:
        return [], False
    if not is_template(model):
        return [model], True
    try:
        tree = checker.parser.parse(model)
    except RenderFailure:
        return [], False
    found: list[str] = []
    complete = True
    for out in tree.find_all(nodes.Output):
        for n in out.nodes:
            complete = _printed(n, found) and complete
    return list(dict.fromkeys(found)), complete


def _printed(node: nodes.Node, found: list[str]) -> bool:
    """Add the string constants `node` can print to `found`; False when it can print
    something else too. (Not a closure that calls itself: that is a reference cycle.)"""
    if isinstance(node, nodes.Const) and isinstance(node.value, str):
        if node.value.strip():
            found.append(node.value.strip())
        return True
    if isinstance(node, nodes.CondExpr):
        complete = _printed(node.expr1, found)
        if node.expr2 is not None:
            complete = _printed(node.expr2, found) and complete
        return complete
    if isinstance(node, nodes.TemplateData):
        return not node.data.strip()
    return False


# providers whose model names are a public list that podium's price tables know
_LISTED = frozenset({"openai", "anthropic", "claude", "copilot"})


def _check_model_names(checker: Checker) -> None:
    """A model name no price table knows, close to one podium knows, on a provider with a
    public model list, is most likely a typo that `--budget` could not price: a warning,
    with the closest known name."""
    wf = checker.wf.workflow
    if isinstance(wf.runtime.provider, ProviderConfig) and wf.runtime.provider.base_url:
        return  # a custom endpoint serves models of its own
    agents = _agents(checker)
    if not agents:  # no model to look up (nor the price tables to load)
        return
    from podium.providers.pricing import BUILTIN_PRICES, is_priced

    for path, step in agents:
        pname = canonical(step.provider or wf.runtime.provider_name)
        if pname not in _LISTED:
            continue
        where: KeyPath = (*path, "model") if step.model else ("workflow", "runtime",
                                                              "default_model")
        models, _ = model_candidates(checker, step)
        for model in models:
            if is_priced(model, wf.cost.pricing, pname) or is_priced(model, wf.cost.pricing):
                continue
            hint = did_you_mean(model, sorted(BUILTIN_PRICES))
            if hint:  # a name like no known one (a local model's) is left alone
                checker.warn(where, f"agent '{step.name}': model '{model}' is not a model "
                             "podium's price tables know, so its cost is not counted and "
                             "--budget cannot price it", hint, code="unknown-model",
                             at="value")


def _check_prices(checker: Checker) -> None:
    wf = checker.wf.workflow
    overrides = wf.cost.pricing
    agents = _agents(checker)
    if not agents:  # no model to price (nor the price tables to load)
        return
    from podium.providers.pricing import is_priced

    for path, step in agents:
        pname = canonical(step.provider or wf.runtime.provider_name)
        where: KeyPath = (*path, "model") if step.model else ("workflow", "runtime",
                                                              "default_model")
        models, complete = model_candidates(checker, step)
        if not models and not complete:
            checker.warn(where if step.model or wf.runtime.default_model else path,
                         f"agent '{step.name}': its model is not known before the run, so "
                         "budget_mode: enforce cannot check its price", code="unpriced-model")
        elif not complete:
            checker.warn(where, f"agent '{step.name}': its model template can give models "
                         "that are not written in it; budget_mode: enforce checks only "
                         f"{', '.join(models)}", code="unpriced-model")
        for model in models:
            if not is_priced(model, overrides, pname):
                checker.err(where, f"agent '{step.name}': model '{model}' has no known price, "
                            "and budget_mode: enforce needs one to count what the run spends",
                            f"price it under cost.pricing: {model}: {{input_per_mtok: ..., "
                            "output_per_mtok: ...}", code="unpriced-model", at="value")


# --------------------------------------------------------------------------- agent runtimes
# What the runtimes (copilot, claude-agent-sdk) cannot do, from their declared Capabilities
# (providers/catalog.py, no SDK imported), reported before anything runs.


def _check_runtime_capabilities(checker: Checker, path: KeyPath, step: AgentStep,
                                pname: str) -> None:
    name = canonical(pname)
    caps = RUNTIME_CAPABILITIES.get(name)
    if step.session_key and not (caps is not None and caps.session_continuity):
        having = ", ".join(n for n, c in RUNTIME_CAPABILITIES.items() if c.session_continuity)
        checker.err((*path, "session_key"), f"agent '{step.name}': session_key needs session "
                    f"continuity, which provider '{name}' does not have (providers that have "
                    f"it: {having})", code="provider-capability")
    if caps is None:
        return
    servers = _servers(checker)
    names = step.tools if step.tools is not None else (checker.wf.tools or None)
    where: KeyPath = (*path, "tools") if step.tools is not None else ("tools",)
    for j, tool in enumerate(names or []):
        problem = tool_problem(name, tool, servers)
        if problem:
            checker.err((*where, j), f"agent '{step.name}': {problem}",
                        code="provider-capability", at="value")
    if servers and not caps.mcp:
        checker.err(path, f"agent '{step.name}': provider '{name}' cannot use MCP servers",
                    code="provider-capability")
    runtime_dir = checker.wf.workflow.runtime.working_dir
    if (step.working_dir or runtime_dir) and not caps.working_dir:
        where_dir = (*path, "working_dir") if step.working_dir else ("workflow", "runtime",
                                                                     "working_dir")
        checker.err(where_dir, f"agent '{step.name}': provider '{name}' works in podium's "
                    "own folder and takes no working_dir", code="provider-capability")


def _check_copilot_object(checker: Checker, cfg: ProviderConfig) -> None:
    """The copilot provider object's own rules (spec 2.6)."""
    if canonical(cfg.name) != "copilot":
        return
    base: KeyPath = ("workflow", "runtime", "provider")
    fields = cfg.model_fields_set
    for key in ("api_key", "bearer_token", "runtime_url", "runtime_token", "base_url"):
        value = getattr(cfg, key)
        if key in fields and isinstance(value, str) and not value.strip():
            checker.err((*base, key), f"'{key}' is empty", code="provider-field")
    routing = {"type", "wire_api", "headers", "azure"} & fields
    if routing and not {"base_url", "api_key", "api_key_env", "bearer_token"} & fields:
        checker.err((*base, sorted(routing)[0]), f"{', '.join(sorted(routing))} configure a "
                    "custom endpoint: give its base_url (and api_key, api_key_env or "
                    "bearer_token) too", code="provider-field")
    if "headers" in fields and not cfg.headers:
        checker.err((*base, "headers"), "headers must not be empty", code="provider-field")
    if cfg.azure is not None and cfg.type != "azure":
        checker.err((*base, "azure"), "the azure block needs type: azure",
                    code="provider-field")
    if cfg.runtime_token is not None and cfg.runtime_url is None:
        checker.err((*base, "runtime_token"), "runtime_token needs runtime_url",
                    code="provider-field")
