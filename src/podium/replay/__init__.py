"""Recordings of runs: replay, fork and diff."""
