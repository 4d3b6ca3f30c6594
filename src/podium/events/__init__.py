"""podium.events."""
