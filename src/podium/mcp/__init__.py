"""`podium mcp serve`: the workflows of a folder as the tools of an MCP server (a surface,
beside the CLI, the web console and the fleet TUI: it acts through the app layer)."""
