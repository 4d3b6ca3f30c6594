"""Event sinks: console, JSONL file, run store."""
