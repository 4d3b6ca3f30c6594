"""`podium fleet`: a Textual TUI over the run store (the `tui` extra).

A surface like the CLI and the web console: it reads runs through the store and the app
layer's read model (app/fleet.py) and acts only through the app layer (app/runs.py,
app/spawn.py). It never runs the engine: resuming or starting a run spawns a detached
`python -m podium resume|run` process. Importing this package imports Textual.
"""
