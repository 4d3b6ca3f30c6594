"""Runs on Temporal workers: the workflow that drives a run node by node, the activities that
advance it against the shared run store, the worker and the follower of `podium run
--temporal` (docs/decisions/0016-temporal-executor.md). Only the commands that use Temporal
import this package (and temporalio)."""
