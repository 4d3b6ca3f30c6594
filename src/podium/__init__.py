"""podium: deterministic multi-agent LLM workflows in Conductor's YAML language."""

__version__ = "0.1.0"

__all__ = ["__version__"]
