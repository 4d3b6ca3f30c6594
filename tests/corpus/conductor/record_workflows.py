"""Record what Conductor itself gives for each case of workflows.yaml, into
workflows.expected.json.

Like record.py, this runs Conductor's own code, never podium's, and never at test time
(tests/test_conductor_parity_workflows.py only reads what it writes). For each case it writes
the workflow (and its sibling files) into a fresh folder, then

  - loads it with conductor.config.loader.load_config and validates it with
    conductor.config.validator.validate_workflow_config (what `conductor validate` runs):
    {"ok": [warnings]} or {"error": message}, a load error included;
  - unless the case says `run: false`, runs it with conductor.engine.workflow.WorkflowEngine
    (skip_gates=True, as `conductor run --skip-gates`; no provider: the cases use no LLM
    agent) on the case's inputs, whether or not validate passed (Conductor's `run` does not
    validate): {"ok": final output} or {"error": {"type", "message"}}.

Recorded from Conductor at commit 3c07139, installed from its source as record.py says:

    /tmp/conductor-venv/bin/python <this repo>/tests/corpus/conductor/record_workflows.py
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

HERE = Path(__file__).resolve().parent
CONDUCTOR_COMMIT = "3c07139"


def _write(case: dict[str, Any], folder: Path) -> Path:
    for name, text in (case.get("files") or {}).items():
        (folder / name).write_text(text, encoding="utf-8")
    path = folder / "wf.yaml"
    path.write_text(case["workflow"], encoding="utf-8")
    return path


def _validate(path: Path) -> tuple[dict[str, Any], Any]:
    from conductor.config.loader import load_config
    from conductor.config.validator import validate_workflow_config

    try:
        config = load_config(path)
    except Exception as exc:  # a load error is validate's error too
        return {"error": f"{type(exc).__name__}: {exc}"}, None
    try:
        return {"ok": list(validate_workflow_config(config, path))}, config
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}, config


def _run(path: Path, config: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    from conductor.engine.workflow import WorkflowEngine

    engine = WorkflowEngine(config, skip_gates=True, workflow_path=path)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return {"ok": asyncio.run(engine.run(dict(inputs)))}
    except Exception as exc:  # what ended the run is the result
        return {"error": {"type": type(exc).__name__, "message": str(exc)[:500]}}


def record(case: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cwf-") as tmp:
        path = _write(case, Path(tmp))
        validate, config = _validate(path)
        out: dict[str, Any] = {"validate": validate}
        if case.get("run", True):
            out["run"] = (_run(path, config, case.get("inputs") or {}) if config is not None
                          else {"error": {"type": "load", "message": validate["error"]}})
        # the folder is new each time: keep the recording stable
        shown = json.dumps(out, ensure_ascii=False).replace(str(Path(tmp).resolve()), "<dir>")
        return dict(json.loads(shown.replace(tmp, "<dir>")))


def main() -> int:
    data = YAML(typ="safe", pure=True).load(
        (HERE / "workflows.yaml").read_text(encoding="utf-8"))
    cases = data["cases"]
    ids = [c["id"] for c in cases]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise SystemExit(f"duplicate case ids: {sorted(dupes)}")
    os.environ.setdefault("TMPDIR", tempfile.mkdtemp(prefix="cwf-home-"))  # checkpoints land here
    import conductor

    results = {c["id"]: record(c) for c in cases}
    out = {"conductor_commit": CONDUCTOR_COMMIT,
           "conductor_version": getattr(conductor, "__version__", None),
           "python": sys.version.split()[0],
           "results": results}
    (HERE / "workflows.expected.json").write_text(
        json.dumps(out, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    print(f"recorded {len(results)} cases into {HERE / 'workflows.expected.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
