"""Every workflow of a folder as an MCP tool, over stdio or streamable HTTP (MCP SDK, low-level
server). A call runs the workflow durably in the run store, in a worker thread (the engine is
synchronous), and returns its output; a run parked at a gate returns a handle that the
`podium_answer` tool resumes. Nothing but the protocol goes to stdout: notes go to stderr.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.errors import PodiumError
from podium.records import record

if TYPE_CHECKING:
    from podium.app.runs import Advanced
    from podium.language.model import WorkflowFile
    from podium.store.base import RunStore

ANSWER_TOOL = "podium_answer"
STATUS_TOOL = "podium_status"
HOW = f"call the {ANSWER_TOOL} tool with run_id and value"


@record
class Exposed:
    """One workflow file served as one tool."""

    tool: str
    path: Path
    workflow: WorkflowFile


def _note(text: str) -> None:
    sys.stderr.write(f"podium mcp: {text}\n")
    sys.stderr.flush()


def tool_name(name: str, taken: set[str]) -> str:
    """The workflow's name as an MCP tool name ([A-Za-z0-9_-], 64 at most), unique."""
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:60] or "workflow"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    taken.add(candidate)
    return candidate


def discover(folder: Path) -> list[Exposed]:
    """The valid workflow files of `folder` (*.yaml, *.yml; not *.test.yaml), sorted by file
    name; an invalid file is left out with its diagnostics on stderr."""
    from podium.app.workflows import load_valid

    files = sorted(p for p in folder.iterdir()
                   if p.is_file() and p.suffix in (".yaml", ".yml")
                   and not p.name.endswith((".test.yaml", ".test.yml")))
    taken = {ANSWER_TOOL, STATUS_TOOL}
    out = []
    for path in files:
        wf, _code = load_valid(path, warnings=[], err=sys.stderr)
        if wf is None:
            _note(f"{path.name} is left out: it is not a valid workflow")
            continue
        out.append(Exposed(tool_name(wf.workflow.name, taken), path, wf))
    return out


def input_schema(wf: WorkflowFile) -> dict[str, Any]:
    """The workflow's input declarations as a JSON Schema object."""
    props: dict[str, Any] = {}
    required = []
    for name, decl in wf.workflow.input.items():
        prop: dict[str, Any] = {"type": decl.type}
        if decl.description:
            prop["description"] = decl.description
        if decl.default is not None:
            prop["default"] = decl.default
        elif decl.required:
            required.append(name)
        props[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


# ----------------------------------------------------------------------------- calls (sync)


def _waiting(store: RunStore, run_id: str) -> dict[str, Any]:
    from podium.app.family import open_gates

    gates = open_gates(store, run_id)
    out: dict[str, Any] = {"status": "waiting", "run_id": run_id, "how": HOW}
    if gates:
        g = gates[-1]
        out["gate"] = {"step": g.step, "kind": g.kind, "prompt": g.prompt, "run_id": g.run_id}
        out["options"] = [{k: o[k] for k in ("value", "label", "prompt_for") if k in o}
                          for o in g.options]
    return out


def _ended(store: RunStore, done: Advanced) -> dict[str, Any]:
    r = done.result
    if r.status == "waiting":
        return _waiting(store, r.run_id)
    out: dict[str, Any] = {"status": r.status, "run_id": r.run_id, "output": r.output}
    if r.status != "success":
        why = str(r.error) if r.error is not None else (r.reason or r.status)
        out["error"] = why.strip().splitlines()[0] if why.strip() else r.status
    # the client gets what the store holds: the run's secrets as <secret:NAME>
    hidden: dict[str, Any] = done.engine.bus.redactor.value(out)
    return hidden


def _launch() -> Any:
    from podium.app.launch import LaunchOptions

    # no observers: no progress anywhere (stdout is the protocol in stdio mode)
    return LaunchOptions(verbosity=-1, interactive=False)


def run_workflow(exposed: Exposed, arguments: dict[str, Any], home: Path | None) -> dict[str, Any]:
    from podium.app.home import open_store
    from podium.app.inputs import resolve_inputs
    from podium.app.runs import StartRequest, start_run

    inputs = resolve_inputs(exposed.workflow, arguments)
    store = open_store(home=home)
    try:
        done = start_run(store, StartRequest(exposed.workflow, exposed.path, inputs,
                                             options={"surface": "mcp"}, command="mcp"),
                         _launch())
        return _ended(store, done)
    finally:
        store.close()


def answer(run_id: str, value: str, text: str | None, home: Path | None) -> dict[str, Any]:
    from podium.app.home import open_store
    from podium.app.runs import ResumeRequest, answer_gate, owner_takes, resume_answered

    store = open_store(home=home)
    try:
        answered = answer_gate(store, run_id, value, text, by="mcp")
        root = answered.root
        if owner_takes(store, answered):  # another process advances the run and takes it
            return {"status": "running", "run_id": root.id,
                    "note": f"run {root.id} is running and goes on with the answer; call "
                            f"{STATUS_TOOL} to follow it"}
        done = resume_answered(store, root.id, ResumeRequest(root.id, verbosity=-1,
                                                             interactive=False))
        # None: the process that held the run meanwhile ended it, or goes on with it
        return _status(store, root.id) if done is None else _ended(store, done)
    finally:
        store.close()


def status(run_id: str, home: Path | None) -> dict[str, Any]:
    from podium.app.home import open_store

    store = open_store(home=home)
    try:
        return _status(store, run_id)
    finally:
        store.close()


def _status(store: RunStore, run_id: str) -> dict[str, Any]:
    from podium.app.owners import seen

    run = store.find_run(run_id)
    now = seen(store, run).status
    if now == "waiting":
        out = _waiting(store, run.id)
    else:
        out = {"status": now, "run_id": run.id, "output": run.output}
        if run.error:
            out["error"] = run.error
    out["workflow"] = run.workflow_name
    return out


# ----------------------------------------------------------------------------- the server


def _result(payload: dict[str, Any], is_error: bool = False) -> Any:
    import mcp_types as types

    text = json.dumps(payload, ensure_ascii=False, default=str)
    if is_error and payload.get("error"):
        text = f"{payload['error']}\n{text}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=payload, is_error=is_error)


def _error(message: str) -> Any:
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(type="text", text=message)],
                                is_error=True)


def build_server(exposed: list[Exposed], home: Path | None = None) -> Any:
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from podium import __version__

    by_name = {e.tool: e for e in exposed}
    tools = [types.Tool(name=e.tool, description=e.workflow.workflow.description
                        or f"Run the podium workflow '{e.workflow.workflow.name}' "
                           f"({e.path.name}).",
                        input_schema=input_schema(e.workflow)) for e in exposed]
    tools.append(types.Tool(
        name=ANSWER_TOOL,
        description="Answer the gate a podium run waits at, and resume the run: returns its "
                    "output, or the next gate it waits at.",
        input_schema={"type": "object", "required": ["run_id", "value"], "properties": {
            "run_id": {"type": "string", "description": "The run id (or a unique prefix)."},
            "value": {"type": "string", "description": "The option's value (or label, or "
                      "number); for an iteration limit, how many more iterations."},
            "text": {"type": "string", "description": "Free text for an option that asks "
                     "for it (prompt_for)."}}}))
    tools.append(types.Tool(
        name=STATUS_TOOL,
        description="A podium run's status, output, or the gate it waits at.",
        input_schema={"type": "object", "required": ["run_id"], "properties": {
            "run_id": {"type": "string", "description": "The run id (or a unique prefix)."}}}))

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        args = dict(params.arguments or {})
        work: Callable[[], dict[str, Any]]
        if params.name == ANSWER_TOOL:
            run_id, value, text = args.get("run_id"), args.get("value"), args.get("text")
            if not isinstance(run_id, str) or value is None:
                return _error(f"{ANSWER_TOOL} needs run_id and value")
            rid: str = run_id

            def work() -> dict[str, Any]:
                return answer(rid, str(value), None if text is None else str(text), home)
        elif params.name == STATUS_TOOL:
            run_id = args.get("run_id")
            if not isinstance(run_id, str):
                return _error(f"{STATUS_TOOL} needs run_id")
            asked: str = run_id

            def work() -> dict[str, Any]:
                return status(asked, home)
        elif params.name in by_name:
            target = by_name[params.name]

            def work() -> dict[str, Any]:
                return run_workflow(target, args, home)
        else:
            return _error(f"unknown tool '{params.name}'")
        try:
            payload = await anyio.to_thread.run_sync(work)
        except PodiumError as exc:
            msg = str(exc).strip() or f"{type(exc).__name__} (exit {getattr(exc, 'exit_code', '?')})"
            return _error(msg.splitlines()[0])
        except Exception as exc:  # a bug: the server goes on, the caller learns what failed
            _note(f"{params.name} failed: {type(exc).__name__}: {exc}")
            return _error(f"{type(exc).__name__}: {exc}")
        return _result(payload, is_error=payload.get("status") not in ("success", "waiting",
                                                                        "running"))

    return Server("podium", version=__version__,
                  instructions="Each tool runs one podium workflow; a run that waits at a "
                               f"gate returns its run_id: answer it with {ANSWER_TOOL}.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve(folder: Path, *, http: bool = False, host: str = "127.0.0.1", port: int = 0,
          ready: Callable[[str], None] | None = None) -> None:
    """Serve the folder's workflows until the transport closes (stdio) or the process is
    stopped (HTTP). `ready(url)` is told the HTTP address once it listens."""
    import anyio

    exposed = discover(folder)
    if not exposed:
        _note(f"no valid workflow in {folder}: only {ANSWER_TOOL} and {STATUS_TOOL} are served")
    _note("serving " + (", ".join(e.tool for e in exposed) or "no workflow")
          + (" over streamable HTTP" if http else " over stdio"))
    server = build_server(exposed)
    if not http:
        from mcp.server.stdio import stdio_server

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(main)
        return
    import socket

    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen()
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/mcp"
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning")
    if ready is not None:
        ready(url)
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))
