"""A secret written as `${MY_TOKEN}` in a step's description or a route condition (issue 28,
item 2): the views that lay the workflow out with the environment expanded (the console's
graph endpoint, `podium graph`, `run --dry-run`) show `<secret:MY_TOKEN>`, never its value.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from console_helpers import write_flow

from conftest import start_console
from helpers_engine import cli_env, podium_argv

TOKEN = "tok-graph-SECRET-8080"

FLOW = """
workflow:
  name: drawn
  entry_point: check
  secrets: [MY_TOKEN]
agents:
  - name: check
    type: set
    description: "checks the key ${MY_TOKEN}"
    value: "x"
    routes:
      - {to: done, when: "check_output == '${MY_TOKEN}'"}
      - {to: done}
  - {name: done, type: set, value: 1}
"""


def _podium(home: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), env=cli_env(home, {"MY_TOKEN": TOKEN}),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60, check=False)


def test_graph_and_dry_run_show_no_secret(tmp_path: Path) -> None:
    flow = write_flow(tmp_path / "flows", "drawn.yaml", FLOW)
    home = tmp_path / "home"
    for shown in (_podium(home, "graph", flow), _podium(home, "graph", flow, "--format", "dot"),
                  _podium(home, "run", flow, "--dry-run")):
        assert shown.returncode == 0, shown.stderr
        assert "<secret:MY_TOKEN>" in shown.stdout
        assert TOKEN not in shown.stdout + shown.stderr


def test_the_consoles_graph_shows_no_secret(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    flow = write_flow(tmp_path / "flows", "drawn.yaml", FLOW)
    home = tmp_path / "home"
    done = _podium(home, "run", flow, "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    monkeypatch.setenv("MY_TOKEN", TOKEN)  # the console's process has it too
    live = start_console(home)
    try:
        graph = live.client().get(f"/api/runs/{run_id}/graph").json()
    finally:
        live.stop()
    assert graph["source"] == "workflow"
    text = json.dumps(graph)
    assert "<secret:MY_TOKEN>" in text
    assert TOKEN not in text
