"""`podium validate` compares a workflow with what each provider declares it can do (its
Capabilities) and reports, before anything runs, an agent that asks a provider for what it
cannot: session continuity, MCP tool narrowing on claude-agent-sdk, the copilot provider
object's rules. What the runtimes can do validates clean. No runtime is needed."""

from __future__ import annotations

from pathlib import Path

from helpers_engine import write
from podium.check.providers import check_providers
from podium.check.semantic import Checker
from podium.language.load import load_workflow


def diagnostics(path: Path) -> list[str]:
    """validate's diagnostics including the provider checks (check/semantic.py's Checker.run
    does not call check_providers yet: then this repeat is a no-op, diagnostics dedupe)."""
    result = load_workflow(path)
    assert result.model is not None, [d.format() for d in result.sink.sorted()]
    checker = Checker(result)
    checker.run()
    check_providers(checker)
    return [d.format() for d in result.sink.sorted()]


def test_what_the_runtimes_can_do_validates(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: ok
          entry_point: a
          runtime:
            provider: {name: copilot, type: azure, base_url: "https://x.example",
                       api_key_env: HOME, azure: {api_version: "2024-10-21"},
                       wire_api: responses, headers: {X-Team: podium}}
            default_model: gpt-5-mini
            mcp_servers:
              notes: {command: python, args: [server.py]}
        agents:
          - name: a
            tools: [read_file, write_file, run_command, notes__add]
            session_key: dev
            reasoning: {effort: xhigh}
            routes: [{to: b}]
            prompt: hi
          - name: b
            provider: claude-agent-sdk
            model: claude-sonnet-5
            tools: [read_file, notes__*]
            session_key: review
            reasoning: {effort: max}
            prompt: hi
    """)
    assert [d for d in diagnostics(path) if "error" in d] == []


def test_what_a_provider_cannot_do_is_an_error_before_the_run(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: bad
          entry_point: a
          runtime:
            provider: {name: copilot, wire_api: responses, runtime_token: tok}
            default_model: gpt-5-mini
            mcp_servers:
              notes: {command: python, args: [server.py]}
        agents:
          - name: a
            provider: openai
            session_key: dev
            prompt: hi
            routes: [{to: b}]
          - name: b
            provider: claude-agent-sdk
            model: claude-sonnet-5
            tools: [notes__add]
            prompt: hi
    """)
    found = "\n".join(diagnostics(path))
    assert ("agent 'a': session_key needs session continuity, which provider 'openai' does not "
            "have (providers that have it: copilot, claude-agent-sdk)") in found
    assert ("agent 'b': provider 'claude-agent-sdk' offers an MCP server's tools all together: "
            "use 'notes__*', not 'notes__add'") in found
    assert "wire_api configure a custom endpoint: give its base_url" in found
    assert "runtime_token needs runtime_url" in found


def test_provider_object_fields_belong_to_their_provider(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: fields
          entry_point: a
          runtime:
            provider: {name: claude-agent-sdk, base_url: "http://127.0.0.1:1", wire_api: responses}
        agents:
          - {name: a, model: claude-sonnet-5, prompt: hi}
    """)
    found = "\n".join(diagnostics(path))
    assert "'wire_api' does not apply to provider 'claude-agent-sdk'" in found
