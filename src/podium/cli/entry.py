"""The `podium` console script: process-wide start-up settings, then the typer app.

Kept apart from podium.cli.main and podium.cli.process so that importing the app (tests, embedding podium) changes
no process-wide setting. Both settings below are about start-up time; docs/performance.md
gives their measured share and docs/decisions/0010-cold-start.md the reasons.
"""

from __future__ import annotations

import gc
import os
import sys
import types


def main() -> None:
    """Console-script entry point."""
    # Start-up allocates a few hundred thousand objects that all live until exit (modules,
    # classes, pydantic schemas); collecting while they pile up only walks them again and
    # again. ready() freezes them and turns the collector back on as soon as
    # the invoked command's code is imported, before it does any work.
    if sys.argv[1:] in (["--help"], ["-h"]) and print_stored_help():
        return
    gc.disable()
    skip_pydantic_plugins()
    from podium.cli import plain

    given = plain.parse(sys.argv[1:])
    if given is not None:  # `podium validate FILE...`: no typer (podium.cli.plain)
        from podium.cli.guard import guarded

        guarded(lambda: plain.run(given))
        return
    from podium.cli.process import main as run

    run()


def print_stored_help() -> bool:
    """`podium --help` (or `python -m podium --help`) on a terminal of 80 columns or more:
    print the text typer renders there (podium.cli.help_text, generated, checked by a test)
    without importing typer and every command's module, four fifths of the command's time.
    False (nothing printed) on a narrower terminal, where typer wraps the text to fit, and
    under another program name."""
    program = os.path.basename(sys.argv[0])
    if program == "__main__.py" and os.path.basename(os.path.dirname(sys.argv[0])) == "podium":
        program = "python -m podium"  # what click names `python -m podium`
    elif program != "podium":
        return False  # a renamed script: typer names it
    if _columns() < 80:
        return False
    from podium.cli.help_text import HELP

    sys.stdout.write(HELP.replace("Usage: podium ", f"Usage: {program} ", 1))
    sys.stdout.flush()
    return True


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size() (click's source) gives it, without
    importing shutil (and the compression modules it loads)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def ready(*, checks_once: bool = False) -> None:
    """The invoked command's code is imported: turn the garbage collector back on.

    The console script (main above) starts with the collector off; everything imported
    until now lives until exit, so it is frozen first and later collections never walk it.
    `checks_once`: the command checks its workflows once, then works or exits (`validate`,
    `run`), so what a check leaves is frozen too (podium.collector.one_check_per_process).
    Does nothing when the collector is on (tests, podium used as a library): those settings
    are the console script's, never an embedding process's.
    """
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
        if checks_once:
            from podium import collector

            collector.one_check_per_process()


PLUGIN_LOADER = "pydantic.plugin._loader"


def skip_pydantic_plugins() -> None:
    """Load no third-party pydantic plugin in this process (like PYDANTIC_DISABLE_PLUGINS=__all__).

    pydantic looks its plugins up in every installed package's entry points the first time it
    builds a validator, and the module that does so imports importlib.metadata: together
    about a tenth of a cold `podium validate`. podium's models are internal, so a plugin would
    only observe podium itself; the CLI answers pydantic's question with "no plugins" instead.
    """
    if PLUGIN_LOADER in sys.modules:  # pydantic already looked: nothing left to save
        return
    loader = types.ModuleType(PLUGIN_LOADER, "podium: no pydantic plugins in the podium CLI")
    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    sys.modules[PLUGIN_LOADER] = loader


def _no_plugins() -> tuple[()]:
    return ()
