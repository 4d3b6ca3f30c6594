"""How a `podium` command runs inside its process, with or without typer: SIGTERM is an
interruption (exit 130) as Ctrl+C is, for the whole command; once the command is over it is
ignored (it would only cut short the exit), what was allocated is frozen out of the
collector's reach, and the process ends with the command's exit code (without interpreter
finalization after a Temporal client)."""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def guarded(command: Callable[[], object]) -> None:
    """Run `command` (which ends by raising SystemExit, or returns its exit code) as the
    podium process runs every command."""
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        code = command()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        leave(130)
    except SystemExit as exc:
        leave(exc.code)
    else:
        leave(code if isinstance(code, int) else 0)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # Everything allocated so far lives until exit: moving it out of the collector's
        # reach spares the interpreter's final collections (~20 ms of every command).
        gc.freeze()


_unfinalized = [False]  # end_without_finalization was asked
_kept: list[object] = []  # keep_until_exit's one object


def end_without_finalization() -> None:
    """For a command that starts no thread and writes only to stdout and stderr (the plain
    `podium validate`): end its process as one that talked to Temporal ends (`leave`),
    without the interpreter's finalization, which frees every module and object one by one
    before the process gives its memory back whole (2-4 ms; with what a large file's check
    left, keep_until_exit, 7 ms)."""
    _unfinalized[0] = True


def keep_until_exit(made: object) -> None:
    """In a process that ends without finalization (end_without_finalization), keep `made`
    (the last file's check: its models, document and source map) alive until the process
    ends, rather than freeing it object by object (6 ms for 800 steps) just before the
    process gives all of it back at once. Only the last: the one before is freed as this
    one is kept, so a folder of large files holds one file's result at a time (an 800-step
    file's is about 10 MB), as it did before. In any other process: nothing."""
    if _unfinalized[0]:
        _kept[:] = [made]


def leave(code: object) -> None:
    """End the command with `code` (SystemExit's). A process that talked to a Temporal
    server skips the interpreter's finalization: the SDK's Rust runtime keeps threads that
    may take the GIL while it is torn down, which crashes the process (SIGSEGV or SIGABRT)
    after its work is done (temporalio/sdk-python#300); so does a command that asked for it
    (end_without_finalization). Exit handlers still run and output is flushed first;
    nothing else is left to do by then."""
    if _unfinalized[0] or "temporalio.bridge" in sys.modules:
        import atexit
        import contextlib

        if isinstance(code, str):
            sys.stderr.write(code + "\n")
        number = code if isinstance(code, int) else (0 if code is None else 1)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(number)
    raise SystemExit(code) from None
