"""The workflow language: loading YAML with positions, the typed model, and diagnostics."""
