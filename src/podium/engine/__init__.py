"""podium.engine."""
