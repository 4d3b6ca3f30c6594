"""The documented exit codes of every podium command, in one place."""

from __future__ import annotations

OK = 0
TERMINATED_FAILED = 1
INVALID = 2
RUNTIME_ERROR = 3
FILE_ERROR = 3
LIMIT = 4
WAITING = 5
REPLAY_DIVERGED = 6
INTERRUPTED = 130

EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 the run ended in a failed terminate step (a named business "
    "outcome); 2 invalid workflow or usage; 3 runtime error, or file missing/unreadable; "
    "4 a limit (iterations, time, budget) was exhausted; 5 waiting at a parked gate; "
    "130 interrupted."
)
