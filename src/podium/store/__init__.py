"""podium.store."""
