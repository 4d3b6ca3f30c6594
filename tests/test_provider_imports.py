"""What a command imports is what it uses (issue 33): model SDKs only when an agent uses them,
and no surface (web, TUI, OpenTelemetry, Temporal, MCP) unless asked for. `podium --help`
loads neither typer nor podium's language; `podium validate` (even of the article's workflow,
budget checks included) no run store or event model; a 2-step `run` of set and script steps no
SDK. Checked on the module list each command loads (`python -X importtime` and sys.modules
at exit: helpers_engine.py `imported`), never on time."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers_engine import EXAMPLES, imported, run_cli, write

SDKS = ("openai", "anthropic", "mcp", "httpx2", "httpx", "genai_prices")
# the surfaces and their libraries: each loads only under the command that serves it
SURFACES = ("starlette", "fastapi", "uvicorn", "h11", "textual", "opentelemetry", "temporalio",
            "podium.web", "podium.tui", "podium.mcp", "podium.temporal", "podium.telemetry")
ARTICLE = EXAMPLES / "dev-review" / "workflow.yaml"
# what each command must not load beyond SDKS and SURFACES (a name forbids its submodules)
NOT_FOR = {
    "help": ("typer", "pydantic", "jinja2", "ruamel", "rich", "podium.language",
             "podium.check", "podium.cli.main", "podium.store", "sqlite3", "asyncio"),
    # the article's templates are all read by templating/lightparse.py: no Jinja2, and
    # never the engine that renders, its sandbox, podium's filters or the render bounds
    "validate": ("podium.store", "podium.events", "podium.engine", "podium.steps", "sqlite3",
                 "rich", "asyncio", "psutil", "importlib.metadata", "jsonschema", "jinja2",
                 "podium.templating.engine", "podium.templating.sandbox",
                 "podium.templating.filters", "podium.templating.budget"),
    # attrs: rich.pretty tries it (that attempt is listed too), never loads it (attr._make)
    # rich: the console sink writes plain lines to a pipe or a file itself
    # podium.steps.agent: the step registry imports an executor when a step of its type runs
    "run": ("asyncio", "psutil", "jsonschema", "importlib.metadata", "attr", "rich",
            "podium.steps.agent", "podium.steps.gate", "podium.steps.mcp_step"),
}


def loaded(names: set[str], forbidden: tuple[str, ...]) -> list[str]:
    """The modules of `names` that are, or sit under, one of `forbidden`."""
    return sorted(n for n in names for f in forbidden if n == f or n.startswith(f + "."))


def scripted_two_step(tmp_path: Path) -> Path:
    return write(tmp_path, """
        workflow:
          name: scripts-only
          entry_point: hello
          runtime: {provider: openai}
        agents:
          - name: hello
            type: script
            command: echo
            args: ['{"ok": true}']
            routes: [{to: done}]
          - {name: done, type: set, value: "{{ hello.output.ok }}"}
    """)


def test_a_workflow_without_agents_imports_no_model_sdk(tmp_path: Path) -> None:
    names = imported(tmp_path, "run", scripted_two_step(tmp_path))
    assert not {n.split(".")[0] for n in names} & set(SDKS)


def test_validate_and_help_import_no_model_sdk(tmp_path: Path) -> None:
    tops = {n.split(".")[0] for n in imported(tmp_path, "validate", ARTICLE)}
    assert not set(SDKS) & tops
    assert not set(SDKS) & {n.split(".")[0] for n in imported(tmp_path, "--help")}


@pytest.mark.parametrize("command", ["help", "validate", "run"])
def test_a_command_imports_only_what_it_uses(tmp_path: Path, command: str) -> None:
    args: tuple[str | Path, ...] = {
        "help": ("--help",), "validate": ("validate", ARTICLE),
        "run": ("run", "-q", scripted_two_step(tmp_path)),
    }[command]
    names = imported(tmp_path, *args)
    assert loaded(names, SDKS + SURFACES + NOT_FOR[command]) == []
    # and it does load what it needs, so that an empty list above means something
    needs = {"help": ["podium.cli.help_text"],
             "validate": ["podium.language.model", "podium.check.semantic",
                          "podium.templating.trees", "podium.templating.lightparse"],
             "run": ["podium.engine.run", "podium.store.sqlite", "podium.events.model"]}
    assert [n for n in needs[command] if n not in names] == []


def test_an_agent_without_tools_loads_no_tool_machinery(tmp_path: Path) -> None:
    """The agent's request names its tools (`AgentStep.wanted_tools`); the MCP client,
    the workspace tools and the toolbox builder (podium.tools) load only for an agent
    offered tools."""
    wf = write(tmp_path, """
        workflow:
          name: one-agent
          entry_point: ask
        agents:
          - {name: ask, prompt: "say hi", routes: [{to: $end}]}
    """)
    answers = write(tmp_path, "agents:\n  ask: [{text: hi}]\n", "answers.yaml")
    names = imported(tmp_path, "run", "-q", wf, "--responses", answers)
    assert "podium.steps.agent" in names
    assert loaded(names, ("podium.tools", "mcp")) == []


def test_validate_of_plain_templates_imports_no_jinja(tmp_path: Path) -> None:
    """Templates of quickparse.py's shapes (dotted names, one comparison, filters without
    arguments, `{% if x is defined %}` blocks) are checked from their parts, and the others
    lightparse.py reads from its own trees: `validate` of a workflow of only those, routes, a
    ternary and a misspelt filter included, imports no Jinja2 (about 30 ms of a cold
    process). A `{% for %}` loads it, and is checked as before."""
    text = """
        workflow:
          name: plain
          entry_point: first
        agents:
          - {name: first, type: set, value: "{{ workflow.name | length }}",
             routes: [{to: second, when: "{{ first.output >= 2 }}"}, {to: $end}]}
          - name: second
            type: set
            value: "{% if first.output is defined %}{{ first.output | FILTER }}{% endif %}"
            routes: [{to: third}]
          - name: third
            type: set
            value: "{{ (second.output if second is defined else 'x') ~ '!' }}"
            routes: [{to: $end}]
    """
    plain = write(tmp_path, text.replace("FILTER", "string"))
    assert loaded(imported(tmp_path, "validate", plain), ("jinja2",)) == []
    typo = write(tmp_path, text.replace("FILTER", "strnig"), "typo.yaml")
    got = run_cli(tmp_path / "home", "validate", typo)
    assert got.returncode == 2
    assert "unknown filter 'strnig'" in got.stdout
    assert "did you mean 'string'" in got.stdout
    loops = write(tmp_path, """
        workflow:
          name: loops
          entry_point: first
        agents:
          - {name: first, type: set, value: "{% for x in [1, 2] %}{{ x }}{% endfor %}",
             routes: [{to: $end}]}
    """, "loops.yaml")
    assert "jinja2" in imported(tmp_path, "validate", loops)


def test_the_checker_sees_a_forbidden_module(tmp_path: Path) -> None:
    """The module list is real: a command that uses the run store shows it."""
    names = imported(tmp_path, "runs")
    assert loaded(names, NOT_FOR["validate"])
