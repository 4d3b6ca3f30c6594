"""podium.providers."""
