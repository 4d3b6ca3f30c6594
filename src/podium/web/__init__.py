"""The web console: `podium serve` and `podium run --web` (Starlette app, SSE, static page).

Nothing here is imported by `validate` or `run` unless the console is asked for.
"""
