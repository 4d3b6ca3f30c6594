"""The `podium` command: a thin typer app. Each command imports its machinery lazily, then
calls ready() (the console script keeps the collector off until then: podium.cli.entry)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from podium.cli.entry import ready
from podium.cli.groups import checkpoint_app, fleet_app, gate_app, mcp_app, registry_app
from podium.exitcodes import EXIT_CODES_HELP

# Help names arguments by their metavar (FILE, RUN_ID), as the usage line does: typer would add
# Python types after them (`FILE <path>`, `FILES <list[Path]>`), which mean nothing to a user.
typer.core.TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]

app = typer.Typer(
    name="podium",
    help="Run deterministic multi-agent LLM workflows written in Conductor's YAML language.\n\n"
    + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from podium import __version__

        typer.echo(f"podium {__version__}")
        raise typer.Exit(0)


ROOT = {"quiet": False, "silent": False}  # podium --quiet / --silent, read by run and resume


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q",
                                        help="run/resume: only lifecycle and routes.")] = False,
    silent: Annotated[bool, typer.Option("--silent", "-s", help="run/resume: no progress, "
                                         "only the result on stdout.")] = False,
    store: Annotated[str | None, typer.Option(
        "--store", metavar="URL", show_default=False,
        help="The run store, for every command (also accepted after the command name): "
        "postgresql://USER:PASSWORD@HOST/DB (needs podium[postgres]), or a SQLite file path "
        "or sqlite:///PATH. Default: $PODIUM_STORE, else $PODIUM_HOME/podium.db.")] = None,
) -> None:
    """podium: deterministic orchestration of LLM agents, scripts and people."""
    if quiet and silent:
        raise typer.BadParameter("--quiet and --silent exclude each other")
    ROOT.update(quiet=quiet, silent=silent)
    if store:  # main() takes it out of argv first; this serves the app called directly
        os.environ["PODIUM_STORE"] = store


def _verbosity(quiet: bool, verbose: bool) -> int:
    if ROOT["silent"]:
        return -1
    return 0 if quiet or ROOT["quiet"] else (2 if verbose else 1)


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Workflow files (or folders) to check.",
                                                 show_default=False, metavar="FILE")],
    output_format: Annotated[str, typer.Option("--format", "-f",
                                               help="Output format: text or json.", metavar="FORMAT")] = "text",
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    budget: Annotated[bool, typer.Option("--budget",
                                         help="Also report step budgets per outcome.")] = False,
) -> None:
    """Check workflow files: schema, routes, templates, context and paths.

    Exit codes: 0 valid (warnings allowed), 2 invalid, 3 file missing or unreadable.
    """
    from podium.cli.validate_cmd import run_validate
    ready(checks_once=True)

    raise typer.Exit(run_validate(files, output_format, strict, budget))


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="The workflow file, or a registry reference NAME[@REGISTRY][#REF].", show_default=False, metavar="FILE")],
    inputs: Annotated[list[str] | None, typer.Option(
        "--input", "-i", metavar="NAME=VALUE",
        help="A workflow input NAME=VALUE (repeatable).")] = None,
    input_file: Annotated[Path | None, typer.Option(
        "--input-file", help="A YAML or JSON file of inputs.", metavar="FILE")] = None,
    skip_gates: Annotated[bool, typer.Option(
        "--skip-gates", help="Human gates take their first option; limits are not raised.")] = False,
    responses: Annotated[Path | None, typer.Option(
        "--responses", help="Scripted answers from this file: its agents: section answers "
        "every agent offline; a file with only gates: scripts only the people.", metavar="FILE")] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print the whole result (run id, status, output, steps) as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only lifecycle and routes.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                          help="Also prompts, outputs and script output.")] = False,
    provider: Annotated[str | None, typer.Option(
        "--provider", "-p", help="Use this provider for every agent.", metavar="NAME")] = None,
    events: Annotated[Path | None, typer.Option(
        "--events", help="Also write the JSONL event log to this file.", metavar="FILE")] = None,
    no_record: Annotated[bool, typer.Option(
        "--no-record", help="Do not record model exchanges and script output (no replay).")
    ] = False,
    web: Annotated[bool, typer.Option(
        "--web", help="Also serve the web console on a free loopback port (URL on stderr) "
        "until the run ends; its gates are answered there.")] = False,
    input_json: Annotated[list[str] | None, typer.Option(
        "--input-json", metavar="NAME=JSON", help="A workflow input whose value is JSON "
        "(repeatable).")] = None,
    metadata: Annotated[list[str] | None, typer.Option(
        "--metadata", "-m", metavar="KEY=VALUE", help="Kept with the run, shown by runs, show "
        "and status, filtered by runs --metadata (repeatable).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Validate, print the route plan and the step budgets; run "
        "nothing.")] = False,
    log_file: Annotated[str | None, typer.Option(
        "--log-file", "-l", metavar="PATH", help="Also write the full (verbose) progress to "
        "PATH, or with auto to $PODIUM_HOME/logs.")] = None,
    no_interactive: Annotated[bool, typer.Option(
        "--no-interactive", help="Never prompt: a human gate parks the run (answer it with "
        "podium gate answer).")] = False,
    web_port: Annotated[int | None, typer.Option(
        "--web-port", metavar="PORT", help="The console's port (0: a free one); implies "
        "--web.")] = None,
    web_bg: Annotated[bool, typer.Option(
        "--web-bg", help="Run in the background with the console; print its URL and "
        "return.")] = False,
    workspace_instructions: Annotated[bool, typer.Option(
        "--workspace-instructions", help="Give every agent the AGENTS.md, CLAUDE.md, "
        ".github/copilot-instructions.md and .github/instructions files found from here up "
        "to the repository root.")] = False,
    instructions: Annotated[list[Path] | None, typer.Option(
        "--instructions", metavar="FILE", help="Give every agent this file's text "
        "(repeatable).")] = None,
    print_loaded_instructions: Annotated[bool, typer.Option(
        "--print-loaded-instructions", help="List the files --workspace-instructions "
        "found (stderr).")] = False,
    temporal: Annotated[str | None, typer.Option(
        "--temporal", metavar="HOST:PORT", help="Run on the Temporal workers of this server "
        "(podium worker) and follow it here; also PODIUM_TEMPORAL_ADDRESS.")] = None,
    task_queue: Annotated[str, typer.Option(
        "--task-queue", metavar="QUEUE", help="The workers' Temporal task queue.")] = "podium",
) -> None:
    """Run a workflow. Progress goes to stderr, the final output (JSON) to stdout.

    Exit codes: 0 success, 1 failed terminate, 2 invalid, 3 runtime error, 4 limit, 130
    interrupted.
    """
    from podium.cli.run_cmd import RunRequest, run_command
    ready(checks_once=True)

    if web and web_bg:
        raise typer.BadParameter("--web and --web-bg exclude each other")
    verbosity = _verbosity(quiet, verbose)
    req = RunRequest(file, inputs or [], input_file, skip_gates, responses, json_out, verbosity,
                     provider, events, record=not no_record, input_json=input_json or [],
                     metadata=metadata or [], dry_run=dry_run, log_file=log_file,
                     interactive=False if no_interactive else None, web_port=web_port or 0,
                     web_bg=web_bg, workspace_instructions=workspace_instructions,
                     instructions=instructions or [],
                     print_loaded_instructions=print_loaded_instructions,
                     silent=verbosity < 0, temporal=temporal, task_queue=task_queue)
    if (web or web_port is not None) and not dry_run and not web_bg:
        from podium.web.server import ConsoleHooks

        raise typer.Exit(run_command(req, hooks=ConsoleHooks(req)))
    raise typer.Exit(run_command(req))


@app.command()
def worker(
    temporal: Annotated[str | None, typer.Option(
        "--temporal", metavar="HOST:PORT", help="The Temporal server (default: "
        "PODIUM_TEMPORAL_ADDRESS).")] = None,
    task_queue: Annotated[str, typer.Option(
        "--task-queue", metavar="QUEUE", help="The task queue to serve.")] = "podium",
    namespace: Annotated[str, typer.Option(
        "--namespace", metavar="NAME", help="The Temporal namespace.")] = "default",
    concurrency: Annotated[int, typer.Option(
        "--concurrency", metavar="N", help="Steps and group members at once.")] = 100,
    grace: Annotated[float, typer.Option(
        "--grace", metavar="SECONDS", help="On SIGTERM, how long steps in flight may finish; "
        "those still running then run again on another worker.")] = 30.0,
) -> None:
    """Advance runs on Temporal: serve a task queue until SIGTERM or Ctrl-C.

    The runs' store is this process's (PODIUM_HOME or PODIUM_STORE): every worker and every
    `podium run --temporal` must share it. Exit codes: 0 stopped, 2 usage, 3 server
    unreachable.
    """
    from podium.app.remote import address
    ready()

    where = address(temporal)
    if where is None:
        raise typer.BadParameter("give --temporal HOST:PORT or set PODIUM_TEMPORAL_ADDRESS")
    if concurrency < 1:
        raise typer.BadParameter("--concurrency must be at least 1")
    from podium.temporal.worker import WorkerRequest, run_worker

    raise typer.Exit(run_worker(WorkerRequest(where, namespace, task_queue, concurrency,
                                              max(0.0, grace))))


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.", metavar="HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0 picks a free one).", metavar="PORT")] = 8765,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Allow a non-loopback --host; every request then needs the "
        "token.")] = False,
    open_browser: Annotated[bool | None, typer.Option(
        "--open/--no-open", help="Open the console in a browser (default: when a desktop "
        "is available).", show_default=False)] = None,
) -> None:
    """Serve the web console over the run store: every run, live, with its graph, steps and
    gates. Prints the URL (with the access token) and runs until Ctrl+C."""
    from podium.web.server import serve_command
    ready()

    raise typer.Exit(serve_command(host, port, allow_remote, open_browser))


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="The run id (or a unique prefix).",
                                          show_default=False, metavar="RUN_ID")],
    from_step: Annotated[str | None, typer.Option(
        "--from", help="Run again from this step (its latest execution), keeping the history.", metavar="STEP")
    ] = None,
    allow_changed: Annotated[bool, typer.Option(
        "--allow-changed", help="Resume even though the workflow file changed.")] = False,
    skip_gates: Annotated[bool | None, typer.Option(
        "--skip-gates/--no-skip-gates", help="Override the run's --skip-gates setting.")] = None,
    responses: Annotated[Path | None, typer.Option(
        "--responses", help="Scripted answers (default: the ones the run started with).", metavar="FILE")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    provider: Annotated[str | None, typer.Option("--provider", "-p", metavar="NAME")] = None,
    events: Annotated[Path | None, typer.Option(
        "--events", help="Also append the JSONL event log to this file.", metavar="FILE")] = None,
    guidance: Annotated[list[str] | None, typer.Option(
        "--guidance", metavar="TEXT", help="Guidance every later agent prompt lists under "
        "[User Guidance] (repeatable).")] = None,
    metadata: Annotated[list[str] | None, typer.Option(
        "--metadata", "-m", metavar="KEY=VALUE", help="Add to the run's metadata "
        "(repeatable).")] = None,
    no_interactive: Annotated[bool, typer.Option(
        "--no-interactive", help="Never prompt: a human gate parks the run.")] = False,
    log_file: Annotated[str | None, typer.Option(
        "--log-file", "-l", metavar="PATH", help="Also write the full progress to PATH (or "
        "auto).")] = None,
    web: Annotated[bool, typer.Option(
        "--web", help="Also serve the web console until the run ends; its gates are answered "
        "there.")] = False,
    web_port: Annotated[int | None, typer.Option(
        "--web-port", metavar="PORT", help="The console's port (0: a free one); implies "
        "--web.")] = None,
    web_bg: Annotated[bool, typer.Option(
        "--web-bg", help="Resume in the background with the console; print its URL and "
        "return.")] = False,
) -> None:
    """Continue a stored run from its last committed step (same run id, one history)."""
    from podium.cli.resume_cmd import ResumeRequest, resume_command
    ready()

    req = ResumeRequest(
        run_id, from_step, allow_changed, skip_gates, responses,
        _verbosity(quiet, verbose), json_out, provider, events, guidance=guidance or [],
        interactive=False if no_interactive else None)
    if web_bg:
        from types import SimpleNamespace

        from podium.cli.conductor_cmd import start_in_background

        raise typer.Exit(start_in_background(
            SimpleNamespace(web_port=web_port or 0, file=run_id), "resume"))
    hooks = None
    if web or web_port is not None:
        from types import SimpleNamespace

        from podium.web.server import ConsoleHooks

        hooks = ConsoleHooks(SimpleNamespace(web_port=web_port or 0,
                                             skip_gates=bool(skip_gates)))
    raise typer.Exit(resume_command(req, metadata or [], log_file, hooks))


@app.command()
def runs(
    status: Annotated[str | None, typer.Option("--status", help="Only runs with this status.", metavar="STATUS")
                      ] = None,
    workflow: Annotated[str | None, typer.Option("--workflow", "-w",
                                                 help="Only runs of this workflow.", metavar="WORKFLOW")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many runs.", metavar="N")] = 30,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.", metavar="FORMAT")] = "text",
    metadata: Annotated[list[str] | None, typer.Option(
        "--metadata", "-m", metavar="KEY=VALUE", help="Only runs started with this "
        "--metadata (repeatable: all must match).")] = None,
) -> None:
    """List recent runs, newest first (id, workflow, status, step, age, tokens, cost)."""
    from podium.cli.runs_cmd import runs_command
    ready()

    raise typer.Exit(runs_command(status, workflow, limit, output_format, metadata or []))


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run id (or a unique prefix).",
                                          show_default=False, metavar="RUN_ID")],
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.", metavar="FORMAT")] = "text",
) -> None:
    """Show a run: the path taken, each step's output, cost per agent, the output or error."""
    from podium.cli.runs_cmd import show_command
    ready()

    raise typer.Exit(show_command(run_id, output_format))


@app.command()
def events(
    run_id: Annotated[str, typer.Argument(help="The run id (or a unique prefix).",
                                          show_default=False, metavar="RUN_ID")],
    after: Annotated[int, typer.Option("--after", help="Only events after this seq.", metavar="SEQ")] = 0,
) -> None:
    """Print a run's events as JSONL (one JSON object per line)."""
    from podium.cli.runs_cmd import events_command
    ready()

    raise typer.Exit(events_command(run_id, after))


@app.command()
def stop(
    run_id: Annotated[str | None, typer.Argument(help="The run id (or a unique prefix).",
                                                 show_default=False, metavar="RUN_ID")] = None,
    run_id_opt: Annotated[str | None, typer.Option(
        "--run-id", help="The run id (as the argument).", metavar="RUN_ID")] = None,
    stop_all: Annotated[bool, typer.Option(
        "--all", help="Every run a live process on this machine advances, and every run "
        "on Temporal workers.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Kill a run that has not stopped after --wait (SIGKILL); it "
        "resumes from its last checkpoint.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="--all without asking.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    wait: Annotated[float, typer.Option("--wait", help="Seconds to wait for the stop.", metavar="SECONDS")] = 15.0,
) -> None:
    """Stop a running run gracefully (it keeps its checkpoint and stays resumable).

    Exit codes: 0 stopped (or not running), 2 usage, 3 a run is still running.
    """
    from podium.cli.conductor_cmd import stop_command
    ready()

    if run_id is not None and run_id_opt is not None and run_id != run_id_opt:
        raise typer.BadParameter("give the run id once (RUN_ID or --run-id)")
    raise typer.Exit(stop_command(run_id or run_id_opt, stop_all, force=force, yes=yes,
                                  json_out=json_out, wait=wait))


@app.command()
def status(
    json_out: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
) -> None:
    """The runs a live process on this machine advances now (id, workflow, step, pid)."""
    from podium.cli.conductor_cmd import status_command
    ready()

    raise typer.Exit(status_command(json_out))


@app.command()
def guide(
    run_id: Annotated[str, typer.Argument(help="The run id (or a unique prefix).",
                                          show_default=False, metavar="RUN_ID")],
    text: Annotated[list[str], typer.Option(
        "--text", "-t", metavar="TEXT", help="The guidance (repeatable; 10,000 characters "
        "each at most).", show_default=False)],
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Give a running or parked run guidance: every later agent prompt lists it under
    [User Guidance]; it is recorded as an event and replayed."""
    from podium.cli.conductor_cmd import guide_command
    ready()

    raise typer.Exit(guide_command(run_id, text, json_out))


@app.command()
def replay(
    run: Annotated[str, typer.Argument(
        help="A run id (or prefix), or a JSONL event log exported with podium events.",
        show_default=False, metavar="RUN")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the replay report as JSON.")
                        ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the replayed steps.")
                       ] = False,
) -> None:
    """Re-execute a recorded run offline (no model, no script, no person) and check that the
    trajectory is identical.

    Exit codes: 0 identical (the final output is printed as run does), 6 diverged (the first
    differing step and why), 2 not recorded, 3 workflow file missing.
    """
    from podium.cli.replay_cmd import replay_command
    ready()

    raise typer.Exit(replay_command(run, 2 if verbose else 0, json_out))


@app.command()
def fork(
    run: Annotated[str, typer.Argument(help="The run to fork (id or prefix).",
                                       show_default=False, metavar="RUN")],
    from_step: Annotated[str, typer.Option(
        "--from", help="STEP or STEP:N (its N-th execution; default its last): replay the "
        "recording up to it, run live from it.", show_default=False, metavar="STEP")],
    inputs: Annotated[list[str] | None, typer.Option(
        "--input", "-i", metavar="NAME=VALUE",
        help="Change an input NAME=VALUE (repeatable).")] = None,
    responses: Annotated[Path | None, typer.Option(
        "--responses", help="Scripted answers for the live part.", metavar="FILE")] = None,
    skip_gates: Annotated[bool, typer.Option("--skip-gates")] = False,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    no_interactive: Annotated[bool, typer.Option(
        "--no-interactive", help="Never prompt: a human gate parks the run.")] = False,
) -> None:
    """Start a new run that reuses a recorded run up to a step and runs live from there."""
    from podium.cli.replay_cmd import fork_command
    ready()

    raise typer.Exit(fork_command(run, from_step, inputs or [], responses=responses,
                                  skip_gates=skip_gates,
                                  verbosity=0 if quiet else (2 if verbose else 1),
                                  json_out=json_out,
                                  interactive=False if no_interactive else None))


@app.command()
def diff(
    run_a: Annotated[str, typer.Argument(help="The first run.", show_default=False, metavar="RUN_A")],
    run_b: Annotated[str, typer.Argument(help="The second run.", show_default=False, metavar="RUN_B")],
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.", metavar="FORMAT")] = "text",
) -> None:
    """Show side by side where two runs took different routes, which outputs differed, and
    the cost and token difference per agent. Exit 0 when they match, 1 when they differ."""
    from podium.cli.replay_cmd import diff_command
    ready()

    raise typer.Exit(diff_command(run_a, run_b, output_format))


@app.command()
def graph(
    file: Annotated[Path, typer.Argument(help="The workflow file.", show_default=False, metavar="FILE")],
    output_format: Annotated[str, typer.Option("--format", "-f",
                                               help="mermaid or dot.", metavar="FORMAT")] = "mermaid",
    overlay: Annotated[bool, typer.Option(
        "--explore", help="Grey the routes no value can take and give each outcome its step "
        "range (podium explore).")] = False,
) -> None:
    """Draw the route graph: steps, routes with conditions, gate options, terminals."""
    from podium.cli.graph_cmd import graph_command
    ready()

    raise typer.Exit(graph_command(file, output_format, overlay))


@app.command()
def explore(
    file: Annotated[Path, typer.Argument(help="The workflow file.", show_default=False,
                                         metavar="FILE")],
    require: Annotated[list[str] | None, typer.Option(
        "--require", "-r", metavar="PROPERTY",
        help="A property every trajectory must keep (repeatable): 'STEP before OUTCOME', "
        "'never OUTCOME' or 'STEP at most N'.")] = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.",
                                               metavar="FORMAT")] = "text",
    emit_tests: Annotated[Path | None, typer.Option(
        "--emit-tests", metavar="DIR",
        help="Write workflow tests (*.test.yaml) that drive one witness per route.")] = None,
    max_states: Annotated[int | None, typer.Option(
        "--max-states", metavar="N", help="Stop after N states (default 200,000).")] = None,
) -> None:
    """Explore every trajectory the workflow can take, before it runs: each outcome's reach,
    step range and a witness; findings; properties.

    Exit codes: 0 no error finding and every property holds, 1 a property fails or an error
    finding, 2 invalid workflow or usage.
    """
    from podium.cli.explore_cmd import explore_command
    ready()

    raise typer.Exit(explore_command(file, require or [], output_format, emit_tests,
                                     max_states))


@app.command("eval")
def eval_(
    target: Annotated[Path | None, typer.Argument(
        help="An eval spec (*.eval.yaml), or a workflow file with --dataset.",
        show_default=False, metavar="SPEC|WORKFLOW")] = None,
    dataset: Annotated[Path | None, typer.Option(
        "--dataset", "-d", metavar="ROWS",
        help="Rows (JSONL, CSV or YAML), each with inputs and optionally id, expect, "
        "responses.")] = None,
    variant: Annotated[list[str] | None, typer.Option(
        "--variant", "-V", metavar="NAME=SETTINGS",
        help="A variant (repeatable): AGENT.model=M, AGENT.provider=P, "
        "AGENT.reasoning.effort=E (AGENT may be *), responses=FILE, @FILE; comma-separated.")
    ] = None,
    repeat: Annotated[int | None, typer.Option("--repeat", "-n", metavar="N",
                                               help="Runs per row and variant.")] = None,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", "-j", metavar="K", help="Runs at a time (default 2).")] = None,
    budget: Annotated[float | None, typer.Option(
        "--budget", metavar="USD", help="Stop launching runs once the eval spent this.")] = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.",
                                               metavar="FORMAT")] = "text",
    resume: Annotated[str | None, typer.Option(
        "--resume", metavar="ID", help="Go on with an interrupted eval.")] = None,
) -> None:
    """Compare variants of a workflow (models, providers, efforts, answers) over a dataset:
    ordinary durable runs tagged eval=ID, and a report per variant.

    Exit codes: 0 the eval ran and every assertion held, 1 an assertion failed, 2 invalid
    spec or usage, 4 the budget stopped it.
    """
    from podium.cli.eval_cmd import EvalRequest, eval_command
    ready()

    raise typer.Exit(eval_command(EvalRequest(target, dataset, variant or [], repeat,
                                              concurrency, budget, output_format, resume)))


@app.command("test")
def workflow_tests(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Test files (*.test.yaml) or folders to search; default: the current folder.",
        show_default=False, metavar="PATH")] = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.", metavar="FORMAT")] = "text",
    select: Annotated[str | None, typer.Option(
        "-k", help="Only tests whose name contains this text.", metavar="NAME")] = None,
) -> None:
    """Run workflow tests: scripted answers in, expected path, terminal and output out.

    Reports route coverage at the end. Exit codes: 0 all passed, 1 a test failed, 2 a test
    file or workflow is invalid.
    """
    from podium.testing.runner import test_command
    ready()

    raise typer.Exit(test_command(paths or [Path(".")], output_format, select))


@app.command()
def doctor(
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.", metavar="FORMAT")] = "text",
    port: Annotated[int, typer.Option(
        "--port", help="The console port to check (podium serve's --port).", metavar="PORT")] = 8765,
) -> None:
    """Check the run store (integrity, leases, processes runs left behind), the providers'
    keys and runtimes, and the console port; print what is wrong and how to fix it.

    Exit codes: 0 nothing wrong (notes allowed), 1 a problem was found, 3 the run store is
    damaged or unreadable.
    """
    from podium.cli.doctor_cmd import doctor_command
    ready()

    raise typer.Exit(doctor_command(output_format, port))


app.add_typer(gate_app, name="gate")
app.add_typer(checkpoint_app, name="checkpoint")
app.add_typer(fleet_app, name="fleet")
app.add_typer(mcp_app, name="mcp")
app.add_typer(registry_app, name="registry")
