"""podium: deterministic multi-agent LLM workflows."""
