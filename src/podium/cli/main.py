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


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
