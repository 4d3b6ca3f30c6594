"""podium.tools: the tools an agent's model may call (workspace files and commands, MCP)."""
