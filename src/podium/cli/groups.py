"""The command groups of `podium`: gate, checkpoint, fleet, mcp and registry (podium.cli.main
adds them to the app, after its commands). Each command imports its machinery lazily, then
calls ready(), as the commands in podium.cli.main do."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from podium.cli.entry import ready

gate_app = typer.Typer(help="Human gates waiting for an answer.", no_args_is_help=True,
                       rich_markup_mode=None)


@gate_app.command("list")
def gate_list(
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.", metavar="FORMAT")] = "text",
) -> None:
    """List the gates (and iteration-limit decisions) that wait for a person."""
    from podium.cli.runs_cmd import gate_list_command
    ready()

    raise typer.Exit(gate_list_command(output_format))


@gate_app.command("respond", help="Alias of gate answer (Conductor's name).")
@gate_app.command("answer")
def gate_answer(
    run_id: Annotated[str, typer.Argument(help="The run id (or a unique prefix).",
                                          show_default=False, metavar="RUN_ID")],
    value: Annotated[str, typer.Argument(
        help="The option's value (or label, or number); for an iteration limit, how many "
        "more iterations.", show_default=False, metavar="VALUE")],
    text: Annotated[str | None, typer.Option(
        "--text", help="Free text for an option that asks for it (prompt_for).", metavar="TEXT")] = None,
    no_resume: Annotated[bool, typer.Option(
        "--no-resume", help="Only record the answer; resume later with podium resume.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    allow_changed: Annotated[bool, typer.Option(
        "--allow-changed", help="Resume even though the workflow file changed.")] = False,
) -> None:
    """Answer a parked gate and resume its run."""
    from podium.cli.resume_cmd import ResumeRequest, gate_answer_command
    ready()

    req = ResumeRequest(run_id, verbosity=0 if quiet else (2 if verbose else 1),
                        json_out=json_out, allow_changed=allow_changed)
    raise typer.Exit(gate_answer_command(run_id, value, text, not no_resume, req))


checkpoint_app = typer.Typer(help="Checkpoints: where stored runs resume from.",
                             no_args_is_help=True, rich_markup_mode=None)


@checkpoint_app.command("list")
def checkpoint_list(
    run_id: Annotated[str | None, typer.Argument(
        help="Only this run's checkpoints (default: every run's latest).", show_default=False,
        metavar="RUN_ID")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many.", metavar="N")] = 30,
) -> None:
    """List checkpoints, newest first: run, workflow, time, the step done and the next."""
    from podium.cli.conductor_cmd import checkpoint_list_command
    ready()

    raise typer.Exit(checkpoint_list_command(run_id, json_out, limit))


fleet_app = typer.Typer(help="Every run on this machine: the fleet TUI (podium[tui]), or "
                        "list and prune without it.", rich_markup_mode=None,
                        invoke_without_command=True)


@fleet_app.callback()
def fleet(ctx: typer.Context) -> None:
    """The fleet TUI: a live table of every run (filters, detail, answer a gate, stop, resume,
    start a run). Needs the tui extra: pip install 'podium[tui]'."""
    if ctx.invoked_subcommand is not None:
        return
    from podium.cli.fleet_cmd import tui_command
    ready()

    raise typer.Exit(tui_command())


@fleet_app.command("list")
def fleet_list(
    status: Annotated[str, typer.Option(
        "--status", help="all, active, waiting, running, interrupted, finished or failed.",
        metavar="FILTER")] = "all",
    search: Annotated[str, typer.Option("--search", "-s", help="Any part of the id, workflow "
                                        "or current step.", metavar="TEXT")] = "",
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many runs.", metavar="N")] = 200,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.", metavar="FORMAT")] = "text",
) -> None:
    """List every run (id, workflow, status, current step, elapsed, cost, waiting gate)."""
    from podium.cli.fleet_cmd import list_command
    ready()

    raise typer.Exit(list_command(status, search, limit, output_format))


@fleet_app.command("prune")
def fleet_prune(
    older_than: Annotated[str, typer.Option(
        "--older-than", help="Age of the finished runs to remove: 30d, 12h, 2w.",
        metavar="AGE", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Remove without asking.")] = False,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.", metavar="FORMAT")] = "text",
) -> None:
    """Remove finished runs (success, failed, error, limit) older than an age from the store,
    with their events, checkpoints and gates. Running, waiting and interrupted runs stay."""
    from podium.cli.fleet_cmd import prune_command
    ready()

    raise typer.Exit(prune_command(older_than, yes, output_format))


mcp_app = typer.Typer(help="Serve workflows to MCP clients.", no_args_is_help=True,
                      rich_markup_mode=None)


@mcp_app.command("serve")
def mcp_serve(
    folder: Annotated[Path, typer.Argument(help="The folder of workflow files.",
                                           show_default=False, metavar="FOLDER")],
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP (at /mcp) "
                                       "instead of stdio.")] = False,
    host: Annotated[str, typer.Option("--host", help="--http: the address to listen on.",
                                      metavar="HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="--http: the port (0: a free one; the "
                                      "URL is printed on stderr).", metavar="N")] = 0,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="--http: allow a --host that is not a loopback address.")] = False,
) -> None:
    """Serve every workflow of FOLDER as an MCP tool (its inputs as the tool's schema): a call
    runs the workflow in the store and returns its output; a run waiting at a gate returns its
    run id, answered with the podium_answer tool (podium_status reports on a run)."""
    from podium.cli.mcp_cmd import serve_command
    ready()

    raise typer.Exit(serve_command(folder, http, host, port, allow_remote))


registry_app = typer.Typer(help="Workflow registries (Conductor's registries.toml and "
                            "index.yaml): run their workflows as NAME[@REGISTRY][#REF].",
                            no_args_is_help=True, rich_markup_mode=None)


@registry_app.command("add")
def registry_add(
    name: Annotated[str, typer.Argument(help="The registry's name.", show_default=False,
                                        metavar="NAME")],
    source: Annotated[str, typer.Argument(help="A local folder, a git repository (URL, "
                                          "file:// URL or path) or GitHub owner/repo.",
                                          show_default=False, metavar="SOURCE")],
    kind: Annotated[str | None, typer.Option("--type", help="path, git or github (default: "
                                             "guessed from SOURCE).", metavar="TYPE")] = None,
    make_default: Annotated[bool, typer.Option("--default", help="Make it the default "
                                               "registry.")] = False,
) -> None:
    """Add a registry (a git one is cloned now, into $PODIUM_HOME/registry-cache).

    Exit codes: 0 added, 2 refused, 3 git or file failure.
    """
    from podium.cli.registry_cmd import add_command
    ready()

    raise typer.Exit(add_command(name, source, kind, make_default))


@registry_app.command("list")
def registry_list(
    name: Annotated[str | None, typer.Argument(help="List this registry's workflows.",
                                               show_default=False, metavar="NAME")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
) -> None:
    """List the registries (* marks the default), or one registry's workflows."""
    from podium.cli.registry_cmd import list_command
    ready()

    raise typer.Exit(list_command(name, json_out))


# the NAME argument of the registry commands that act on one registry
RegistryName = Annotated[str, typer.Argument(help="The registry.", show_default=False,
                                             metavar="NAME")]


@registry_app.command("show")
def registry_show(
    name: RegistryName,
) -> None:
    """Show a registry: type, source, default, cache folder."""
    from podium.cli.registry_cmd import show_command
    ready()

    raise typer.Exit(show_command(name))


@registry_app.command("remove")
def registry_remove(
    name: RegistryName,
) -> None:
    """Remove a registry and its cache."""
    from podium.cli.registry_cmd import remove_command
    ready()

    raise typer.Exit(remove_command(name))


@registry_app.command("set-default")
def registry_set_default(
    name: RegistryName,
) -> None:
    """Make a registry the default (used by NAME and NAME@#REF)."""
    from podium.cli.registry_cmd import set_default_command
    ready()

    raise typer.Exit(set_default_command(name))


@registry_app.command("update")
def registry_update(
    name: Annotated[str | None, typer.Argument(help="Only this registry (default: all).",
                                               show_default=False, metavar="NAME")] = None,
) -> None:
    """Fetch the registries' new commits; prints each default branch's commit."""
    from podium.cli.registry_cmd import update_command
    ready()

    raise typer.Exit(update_command(name))
