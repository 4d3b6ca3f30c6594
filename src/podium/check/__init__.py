"""Static checks of workflows: semantics, paths, budgets and graph export."""
