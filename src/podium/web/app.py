"""The console's Starlette application: API routes, the page and its few static files.

Static files are served from a fixed list read from the package at start-up (name -> bytes),
so no request path is ever joined to a folder: a path that is not on the list is 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from importlib import resources

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from podium.records import record
from podium.web import api
from podium.web.api import Console
from podium.web.security import Guard, GuardConfig

# The files of the page: served name -> content type.
STATIC_FILES: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "dom.js": "text/javascript; charset=utf-8",
    "net.js": "text/javascript; charset=utf-8",
    "runs.js": "text/javascript; charset=utf-8",
    "run.js": "text/javascript; charset=utf-8",
    "evals.js": "text/javascript; charset=utf-8",
    "graph.js": "text/javascript; charset=utf-8",
    "steps.js": "text/javascript; charset=utf-8",
    "markdown.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


@record(frozen=True)
class StaticFile:
    body: bytes
    content_type: str
    etag: str


def load_static() -> dict[str, StaticFile]:
    folder = resources.files("podium.web") / "static"
    out = {}
    for name, ctype in STATIC_FILES.items():
        body = (folder / name).read_bytes()
        out[name] = StaticFile(body, ctype, '"' + hashlib.sha256(body).hexdigest()[:20] + '"')
    return out


def _serve(request: Request, item: StaticFile) -> Response:
    headers = {"cache-control": "no-cache", "etag": item.etag}
    if request.headers.get("if-none-match") == item.etag:
        return Response(status_code=304, headers=headers)
    return Response(item.body, media_type=item.content_type, headers=headers)


def create_app(console: Console, guard: GuardConfig) -> Guard:
    files = load_static()

    async def page(request: Request) -> Response:
        return _serve(request, files["index.html"])

    async def static(request: Request) -> Response:
        item = files.get(str(request.path_params["name"]))
        if item is None:
            return JSONResponse({"error": "not found"}, status_code=404)
        return _serve(request, item)

    async def favicon(request: Request) -> Response:
        return _serve(request, files["favicon.svg"])

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": "not found"}, status_code=404)

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": "method not allowed"}, status_code=405)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(console.feed.run())
        try:
            yield
        finally:
            console.feed.close()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    routes = [
        Route("/", page),
        Route("/runs/{run_id:str}", page),
        Route("/evals/{eval_id:str}", page),
        Route("/static/{name:str}", static),
        Route("/favicon.ico", favicon),
        Route("/api/info", api.info),
        Route("/api/runs", api.runs),
        Route("/api/stream", api.runs_sse),
        Route("/api/runs/{run_id:str}", api.run_detail),
        Route("/api/runs/{run_id:str}/events", api.run_events),
        Route("/api/runs/{run_id:str}/graph", api.run_graph),
        Route("/api/runs/{run_id:str}/live", api.run_live),
        Route("/api/evals/{eval_id:str}", api.eval_detail),
        Route("/api/runs/{run_id:str}/stream", api.run_sse),
        Route("/api/runs/{run_id:str}/gates/{gate_id:str}/answer", api.answer_gate,
              methods=["POST"]),
        Route("/api/runs/{run_id:str}/stop", api.stop_run, methods=["POST"]),
        Route("/api/runs/{run_id:str}/resume", api.resume_run, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={404: not_found, 405: not_allowed})
    app.state.console = console
    return Guard(app, guard)
