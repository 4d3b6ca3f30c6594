"""The `podium` command: a thin typer app; each command imports its machinery lazily."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from podium.cli.exitcodes import EXIT_CODES_HELP

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


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """podium: deterministic orchestration of LLM agents, scripts and people."""


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Workflow files to check.",
                                                 show_default=False)],
    output_format: Annotated[str, typer.Option("--format", "-f",
                                               help="Output format: text or json.")] = "text",
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    budget: Annotated[bool, typer.Option("--budget",
                                         help="Also report step budgets per outcome.")] = False,
) -> None:
    """Check workflow files: schema, routes, templates, context and paths.

    Exit codes: 0 valid (warnings allowed), 2 invalid, 3 file missing or unreadable.
    """
    from podium.cli.validate_cmd import run_validate

    raise typer.Exit(run_validate(files, output_format, strict, budget))


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="The workflow file.", show_default=False)],
    inputs: Annotated[list[str] | None, typer.Option(
        "--input", "-i", help="A workflow input NAME=VALUE (repeatable).")] = None,
    input_file: Annotated[Path | None, typer.Option(
        "--input-file", help="A YAML or JSON file of inputs.")] = None,
    skip_gates: Annotated[bool, typer.Option(
        "--skip-gates", help="Human gates take their first option; limits are not raised.")] = False,
    responses: Annotated[Path | None, typer.Option(
        "--responses", help="Run offline: scripted model and gate answers from this file.")] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print the whole result (run id, status, output, steps) as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only lifecycle and routes.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                          help="Also prompts, outputs and script output.")] = False,
    provider: Annotated[str | None, typer.Option(
        "--provider", "-p", help="Use this provider for every agent.")] = None,
    events: Annotated[Path | None, typer.Option(
        "--events", help="Also write the JSONL event log to this file.")] = None,
) -> None:
    """Run a workflow. Progress goes to stderr, the final output (JSON) to stdout.

    Exit codes: 0 success, 1 failed terminate, 2 invalid, 3 runtime error, 4 limit, 130
    interrupted.
    """
    from podium.cli.run_cmd import RunRequest, run_command

    verbosity = 0 if quiet else (2 if verbose else 1)
    raise typer.Exit(run_command(RunRequest(
        file, inputs or [], input_file, skip_gates, responses, json_out, verbosity, provider,
        events)))


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
