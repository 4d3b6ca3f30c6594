"""The application layer: every operation on runs (start, resume, answer a gate, stop, tell
liveness, list), in one place that the command line, the console, the fleet TUI and the MCP
server call. Surfaces parse and render; the rules about runs live here."""
