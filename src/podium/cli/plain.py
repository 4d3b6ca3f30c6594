"""`podium validate` without typer, for the arguments it is mostly given.

typer and click are a fifth of a cold `podium validate` of the article (they import, then
build a pydantic TypeAdapter for each parameter it is given: ~30 ms of ~260). `validate` is
the command people and editors run most, and its options are few, so the console script reads
its plain form here: `validate`, then files and folders, `--strict`, `--budget`, `--format X`
(`--format=X`, `-f X`) in any order, and `--` before files that start with a dash. Anything
else (no file, `--help`, an option this does not know, `-`, `--store`, an option before the
command name) returns None and goes to typer, which gives its help and its errors.
`tests/test_plain_validate.py` runs both on the same arguments and compares what they print
and the exit code; the options accepted here are checked against the typer command's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from podium.records import record

FLAGS = ("--strict", "--budget")
FORMAT = ("--format", "-f")


@record(frozen=True)
class PlainValidate:
    files: tuple[str, ...]
    output_format: str = "text"
    strict: bool = False
    budget: bool = False


def parse(args: list[str]) -> PlainValidate | None:
    """`args` (after the program name) as a plain `validate`, or None."""
    if not args or args[0] != "validate":
        return None
    files: list[str] = []
    fmt, strict, budget = "text", False, False
    rest = iter(args[1:])
    for arg in rest:
        if arg == "--":
            files += rest
            break
        if arg == "--strict":
            strict = True
        elif arg == "--budget":
            budget = True
        elif arg in FORMAT:
            value = next(rest, None)  # whatever follows, as click takes it
            if value is None or value == "--":
                return None  # click's error, or a form left to click
            fmt = value
        elif arg.startswith("--format="):
            fmt = arg.split("=", 1)[1]
        elif arg.startswith("-"):
            return None
        else:
            files.append(arg)
    if not files:
        return None
    return PlainValidate(tuple(files), fmt, strict, budget)


def run(plain: PlainValidate) -> int:
    """What the typer command `validate` does with the same arguments, ending as click ends
    a command: Ctrl+C exit 130, a reader that went away (`| head`) exit 1, quietly."""
    from podium.cli.entry import ready
    from podium.cli.guard import end_without_finalization
    from podium.cli.validate_cmd import run_validate

    ready(checks_once=True)
    end_without_finalization()  # no thread, no file but stdout and stderr
    try:
        code = run_validate([Path(f) for f in plain.files], plain.output_format,
                            plain.strict, plain.budget)
        sys.stdout.flush()  # a reader that went away shows here, not at the exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # what is still buffered for the pipe would fail again at exit: it goes nowhere
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
