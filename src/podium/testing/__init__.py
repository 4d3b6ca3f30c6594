"""Workflow tests: YAML files of scripted answers and expectations, with route coverage."""
