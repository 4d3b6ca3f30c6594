"""The console's HTTP API: JSON reads, two SSE streams, and the actions.

Every route needs the console token (security.Guard), except /api/info on loopback.

GET  /api/info                          the console itself (version, pid, home, remote mode)
GET  /api/runs?status=&workflow=&q=&limit=&children=1    runs, newest first, with counts
GET  /api/stream?...same filters...     SSE: `runs` messages (all rows, then changed rows)
GET  /api/runs/{id}                     one run: summary, output, open gates, children
GET  /api/runs/{id}/events?after=N      its events after seq N (JSON list)
GET  /api/runs/{id}/graph               its workflow's laid-out graph
GET  /api/runs/{id}/live                what its running steps streamed so far (live rows)
GET  /api/evals/{id}                    an eval's report (podium eval), per variant
GET  /api/runs/{id}/stream              SSE: `ev` (id = seq; Last-Event-ID resumes), `run`,
                                        `live` (as /live, whenever it changes)
POST /api/runs/{id}/gates/{gate}/answer {value, text}: answer and resume
POST /api/runs/{id}/stop                {}: SIGTERM its process (identity checked)
POST /api/runs/{id}/resume              {}: resume an interrupted run in a detached process
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from dataclasses import field
from pathlib import Path
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from podium import __version__, jsontext
from podium.errors import PodiumError
from podium.records import record
from podium.store.base import RunStore
from podium.web.actions import ActionError, Actions
from podium.web.layout import graph_of_events, graph_of_workflow, layout
from podium.web.queries import Reader
from podium.web.security import MAX_BODY
from podium.web.sse import ChangeFeed, run_stream, runs_stream

_NO_STORE = {"cache-control": "no-store"}


@record
class Console:
    """Everything the handlers share."""

    home: Path
    store: RunStore
    reader: Reader
    feed: ChangeFeed
    remote: bool = False
    # `podium run --web`: the one run this console lives for (it stops when that run ends)
    run_id: str | None = None
    started_at: float = field(default_factory=time.time)
    _graphs: OrderedDict[tuple[str, int, int], dict[str, Any]] = field(
        default_factory=OrderedDict)
    _graph_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def actions(self) -> Actions:
        return Actions(self.store, self.reader, self.home)


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers=_NO_STORE)


def _error(status: int, message: str) -> JSONResponse:
    response = _json({"error": message}, status)
    if status == 413:  # the rest of the body is not read: end the connection
        response.headers["connection"] = "close"
    return response


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _run_id(request: Request) -> str:
    return str(request.path_params["run_id"])


# ----------------------------------------------------------------------------- reads


async def info(request: Request) -> Response:
    c = _console(request)
    return _json({"podium": __version__, "pid": os.getpid(), "home": str(c.home),
                  "remote": c.remote, "started_at": c.started_at, "now": time.time()})


def _runs_query(request: Request) -> dict[str, Any]:
    q = request.query_params
    try:
        limit = int(q.get("limit", "200"))
    except ValueError:
        limit = 200
    return {"status": q.get("status") or None, "workflow": q.get("workflow") or None,
            "search": (q.get("q") or "").strip()[:200] or None, "limit": limit,
            "include_children": q.get("children") in ("1", "true")}


async def runs(request: Request) -> Response:
    c = _console(request)
    query = _runs_query(request)
    data = await anyio.to_thread.run_sync(lambda: c.reader.runs(**query))
    return _json(data)


async def runs_sse(request: Request) -> Response:
    c = _console(request)
    return _sse(runs_stream(c.feed, c.reader, _runs_query(request)))


async def run_detail(request: Request) -> Response:
    c = _console(request)
    data = await anyio.to_thread.run_sync(c.reader.detail, _run_id(request))
    if data is None:
        return _error(404, f"no run '{_run_id(request)}'")
    # `podium run --web`: this console stops when this run ends (the page then says so)
    data["console_of_run"] = c.run_id is not None and c.run_id == data["run"]["id"]
    return _json(data)


async def eval_detail(request: Request) -> Response:
    from podium.app.evals import eval_report

    c = _console(request)
    eval_id = str(request.path_params["eval_id"])
    try:
        data = await anyio.to_thread.run_sync(eval_report, c.store, eval_id)
    except PodiumError as exc:  # a plan whose dataset is gone
        return _error(409, str(exc))
    if data is None:
        return _error(404, f"no eval '{eval_id}'")
    return _json(data)


def _after(request: Request) -> int:
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    try:
        return max(0, int(raw))
    except ValueError:
        return 0


async def run_events(request: Request) -> Response:
    c = _console(request)
    rid = _run_id(request)
    if await anyio.to_thread.run_sync(c.reader.run_row, rid) is None:
        return _error(404, f"no run '{rid}'")
    rows = await anyio.to_thread.run_sync(c.reader.events_text, rid, _after(request))
    body = "[" + ",".join(text for _, text in rows) + "]"
    return Response(body, media_type="application/json", headers=_NO_STORE)


async def run_live(request: Request) -> Response:
    """What the run's running steps streamed so far, by `step#iteration` (store/sqlcore.py)."""
    c = _console(request)
    rid = _run_id(request)
    if await anyio.to_thread.run_sync(c.reader.run_row, rid) is None:
        return _error(404, f"no run '{rid}'")
    return _json({"live": await anyio.to_thread.run_sync(c.reader.streaming, rid)})


async def run_sse(request: Request) -> Response:
    c = _console(request)
    rid = _run_id(request)
    if await anyio.to_thread.run_sync(c.reader.run_row, rid) is None:
        return _error(404, f"no run '{rid}'")
    return _sse(run_stream(c.feed, c.reader, rid, _after(request)))


def _sse(stream: Any) -> Response:
    return StreamingResponse(stream, media_type="text/event-stream",
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})


async def run_graph(request: Request) -> Response:
    c = _console(request)
    rid = _run_id(request)
    data = await anyio.to_thread.run_sync(graph_for, c, rid)
    if data is None:
        return _error(404, f"no run '{rid}'")
    return _json(data)


def graph_for(c: Console, run_id: str) -> dict[str, Any] | None:
    """The laid-out graph of a run's workflow file; from its events when the file is gone or
    no longer valid; with a warning when the file changed since the run started."""
    row = c.reader.run_row(run_id)
    if row is None:
        return None
    path = Path(row["workflow_path"])
    warning = None
    try:
        st = path.stat()
        data = path.read_bytes()
    except OSError:
        return {"source": "events", "warning": f"the workflow file is gone ({path}); the "
                "graph shows only what the run did",
                "graph": layout(*graph_of_events(c.reader.history(run_id)))}
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest != row["workflow_hash"]:
        warning = "the workflow file changed since this run started; the graph shows it as it is now"
    key = (str(path), st.st_mtime_ns, st.st_size)
    with c._graph_lock:
        cached = c._graphs.get(key)
    if cached is None:
        cached = _layout_file(path)
        with c._graph_lock:
            c._graphs[key] = cached
            while len(c._graphs) > 64:
                c._graphs.popitem(last=False)
    if cached.get("graph") is None:
        return {"source": "events", "warning": cached.get("warning"),
                "graph": layout(*graph_of_events(c.reader.history(run_id)))}
    return {"source": "workflow", "warning": warning, "graph": cached["graph"]}


def _layout_file(path: Path) -> dict[str, Any]:
    from podium.check.validate import validate_file
    from podium.language.source import FileUnreadable

    try:
        result = validate_file(path)
    except (FileUnreadable, OSError) as exc:
        return {"graph": None, "warning": f"the workflow file cannot be read: {exc}"}
    if result.model is None or result.sink.errors:
        return {"graph": None, "warning": "the workflow file is no longer valid; the graph "
                "shows only what the run did"}
    from podium.events.redact import Redactor, secret_values

    graph = layout(*graph_of_workflow(result.model))
    _explore_overlay(graph, result)
    try:
        hide = Redactor(secret_values(result.model))
    except PodiumError as exc:  # a declared secret too short to be told from other text
        return {"graph": None, "warning": f"the workflow's graph is not shown: {exc}"}
    # loaded with ${VAR} expanded (in the console's environment): no secret's value is served
    return {"graph": hide.value(graph)}


def _explore_overlay(graph: dict[str, Any], result: Any) -> None:
    """Grey the edges no value can take and give each terminal its step range (podium
    explore, bounded for the console); a workflow explore cannot finish gets no overlay."""
    from podium.explore.overlay import CONSOLE_MAX_STATES, overlay_of

    try:
        found = overlay_of(result, CONSOLE_MAX_STATES)
    except Exception:  # an overlay is an extra: the graph stands without it
        return
    if not found.complete:
        return
    for edge in graph["edges"]:
        edge["unreachable"] = (edge["src"], edge["index"]) in found.unreachable and \
            edge["kind"] in ("when", "default", "option")
    for node in graph["nodes"]:
        if node["id"] in found.ranges:
            node["detail"]["steps"] = found.ranges[node["id"]]


# ----------------------------------------------------------------------------- actions


async def _body(request: Request) -> dict[str, Any]:
    """The JSON object of an action's body, read up to MAX_BODY bytes and no further (the
    Guard already refused a larger Content-Length; this bounds a chunked body)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise ActionError(413, f"the request body is too large (at most {MAX_BODY} bytes)")
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:  # bounded nesting: a deeply nested body is refused, never a RecursionError (500)
        data = jsontext.loads(raw.decode("utf-8") or "{}")
    except jsontext.JsonLimitError as exc:
        raise ActionError(400, f"the body {exc}") from None
    except ValueError:  # not UTF-8, or not JSON
        raise ActionError(400, f"the body is not valid JSON (it starts {raw[:40]!r})") from None
    if not isinstance(data, dict):
        raise ActionError(400, "the body must be a JSON object")
    return data


async def answer_gate(request: Request) -> Response:
    c = _console(request)
    try:
        gate_id = int(request.path_params["gate_id"])
    except ValueError:
        return _error(404, "no such gate")
    try:
        body = await _body(request)
        result = await anyio.to_thread.run_sync(
            lambda: c.actions.answer(_run_id(request), gate_id, body))
    except ActionError as exc:
        return _error(exc.status, str(exc))
    return _json(result)


async def stop_run(request: Request) -> Response:
    c = _console(request)
    try:
        await _body(request)
        result = await anyio.to_thread.run_sync(c.actions.stop, _run_id(request))
    except ActionError as exc:
        return _error(exc.status, str(exc))
    return _json(result, 202)


async def resume_run(request: Request) -> Response:
    c = _console(request)
    try:
        await _body(request)
        result = await anyio.to_thread.run_sync(c.actions.resume, _run_id(request))
    except ActionError as exc:
        return _error(exc.status, str(exc))
    return _json(result, 202)
