"""Model SDKs are imported only when an agent uses them: a workflow without agents, `podium
validate` (even of the article's workflow, budget checks included) and `--help` load none of
openai, anthropic, mcp or httpx2 (measured with `python -X importtime`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers_engine import EXAMPLES, cli_env, podium_argv, write

SDKS = ("openai", "anthropic", "mcp", "httpx2", "genai_prices")


def imported(tmp_path: Path, *args: str | Path) -> set[str]:
    argv = podium_argv(*args)
    proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]],
                          env=cli_env(tmp_path / "home"), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    assert "podium" in names
    return names


def test_a_workflow_without_agents_imports_no_model_sdk(tmp_path: Path) -> None:
    path = write(tmp_path, """
        workflow:
          name: scripts-only
          entry_point: hello
          runtime: {provider: openai}
        agents:
          - name: hello
            type: script
            command: echo
            args: ['{"ok": true}']
            routes: [{to: done}]
          - {name: done, type: set, value: "{{ hello.output.ok }}"}
    """)
    assert not set(SDKS) & imported(tmp_path, "run", path)


def test_validate_and_help_import_no_model_sdk(tmp_path: Path) -> None:
    assert not set(SDKS) & imported(tmp_path, "validate", EXAMPLES / "dev-review" /
                                    "workflow.yaml")
    assert not set(SDKS) & imported(tmp_path, "--help")
