"""The `podium` process around the typer app (podium.cli.main): the app that holds only the
invoked command, and `--store` taken out of the arguments wherever it stands; the command runs
guarded (podium.cli.guard: SIGTERM as an interruption, the exit)."""

from __future__ import annotations

import copy
import os
import sys
import typing
from collections.abc import Callable
from typing import Any

import typer
from typer.models import CommandInfo

from podium.cli.guard import guarded
from podium.cli.main import app
from podium.errors import UsageError


def command_app(args: list[str]) -> typer.Typer:
    """The app that runs `podium ARGS`: for a known command, a copy of the app that holds
    only that command, since typer builds the parser of every registered command (~9 ms of
    each start) before it looks at the arguments. Anything else (no arguments, an option
    first, a name that is no command) gets the whole app, so that help and "no such command"
    list every command."""
    name = args[0] if args else ""
    if not name or name.startswith("-"):
        return app
    commands = [c for c in app.registered_commands if _command_name(c) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    only = copy.copy(app)
    only.registered_commands = commands
    only.registered_groups = groups
    for info in [*commands, app.registered_callback]:
        if info is not None and info.callback is not None:
            _evaluate_annotations(info.callback)
    return only


def _evaluate_annotations(callback: Callable[..., Any]) -> None:
    """typer reads a command's parameters twice (its name, then its callback), and each time
    evaluates every annotation its module left as a string (`from __future__ import
    annotations` in podium.cli.main): for `run`, ~120 evaluations of `Annotated[...,
    typer.Option(...)]`, half of building its parser. They are evaluated once here instead,
    to the objects typer would get (the command's own only: the others stay strings)."""
    if any(isinstance(a, str) for a in callback.__annotations__.values()):
        callback.__annotations__ = typing.get_type_hints(callback, include_extras=True)


def _after_root(args: list[str]) -> list[str]:
    """The arguments from the command name on (past root options such as --silent)."""
    i = 0
    while i < len(args) and args[i] in ("--quiet", "-q", "--silent", "-s"):
        i += 1
    return args[i:]


def _command_name(info: CommandInfo) -> str:
    if info.name:
        return info.name
    callback = info.callback
    return callback.__name__.lower().replace("_", "-") if callback else ""


def take_store(args: list[str]) -> list[str]:
    """`--store URL` (or `--store=URL`) anywhere before a bare `--`, as a root option or
    after any command name: set as PODIUM_STORE for this process and the podium processes it
    starts, and taken out of the arguments. Raises UsageError when it has no value."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out += args[i:]
            break
        if arg == "--store" or arg.startswith("--store="):
            value = arg.split("=", 1)[1] if "=" in arg else \
                (args[i + 1] if i + 1 < len(args) else "")
            if not value.strip():
                raise UsageError("--store needs a value: a postgresql:// URL, a SQLite file "
                                 "path or sqlite:///PATH")
            os.environ["PODIUM_STORE"] = value
            i += 1 if "=" in arg else 2
            continue
        out.append(arg)
        i += 1
    return out


def main() -> None:
    """Run the CLI on sys.argv (the console script goes through podium.cli.entry)."""
    # SIGTERM is an interruption (exit 130), as Ctrl+C, for the whole command: also after a
    # run's engine put back the handler it had taken, while the command finishes (a second
    # `podium stop` used to kill `podium run` there by the signal): podium.cli.guard.
    guarded(_command)


def _command() -> None:
    try:
        sys.argv[1:] = take_store(sys.argv[1:])
    except UsageError as exc:
        sys.stderr.write(f"podium: {exc}\n")
        raise SystemExit(exc.exit_code) from None
    if "run" in sys.argv[1:] and any(  # Conductor's --input.NAME=VALUE
            a.startswith("--input.") for a in sys.argv[1:]):
        from podium.cli.conductor_cmd import expand_dotted_inputs

        sys.argv[1:] = expand_dotted_inputs(sys.argv[1:])
    command_app(_after_root(sys.argv[1:]))()
