"""podium.steps."""
