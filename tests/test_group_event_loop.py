"""Group members as tasks of one event loop (podium/aio.py, engine/groups.py, decision 0031).

What the loop must not break: members run at the same time, on one thread that is not the
engine's; `max_concurrent` bounds how many are in flight; the real OpenAI adapter streams a
member's answer on its async path (its `model_delta` events, its output); Ctrl+C cancels the
members' SDK calls in flight (their connections close, the run ends interrupted, exit 130);
and the one implementation of an agent (a coroutine) still runs without any loop for a
top-level step. Concurrency is proven without timing: each member waits until the bound is
reached (it would fail after 10 s otherwise), and counts how many are in flight."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from helpers_engine import cli_env, podium_argv, run_workflow, wait_until, write
from helpers_providers import Servers, fake_servers, run_real_yaml
from podium import aio
from podium.events.model import ModelDelta, StepFinished
from podium.providers.base import AgentRequest, Provider, Reply

FOR_EACH = """
workflow:
  name: fan
  entry_point: fan
  runtime: {provider: PROVIDER, default_model: gpt-4o-mini}
  limits: {max_iterations: 50}
  input:
    items: {type: array, default: ITEMS}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    max_concurrent: WIDTH
    agent: {name: worker, prompt: "item {{ item }}"}
agents: []
output:
  n: "{{ fan.count }}"
"""


def _wf(tmp_path: Path, provider: str, items: int, width: int) -> Path:
    return write(tmp_path, FOR_EACH.replace("PROVIDER", provider)
                 .replace("ITEMS", json.dumps(list(range(items)))).replace("WIDTH", str(width)))


class _Counted:
    """Wraps a provider: each member's `asend` waits (on the loop) until `width` members are
    in flight, and the most in flight at once is kept."""

    def __init__(self, inner: Provider, width: int) -> None:
        self.inner, self.width = inner, width
        self.name, self.capabilities = inner.name, inner.capabilities
        self.in_flight = self.most = 0
        self.threads: set[int] = set()
        self.full: asyncio.Event | None = None

    def open_session(self, request: AgentRequest) -> Any:
        return _CountedSession(self, self.inner.open_session(request))

    def close(self) -> None:
        self.inner.close()


class _CountedSession:
    def __init__(self, owner: _Counted, inner: Any) -> None:
        self.owner, self.inner = owner, inner

    def send(self, message: str) -> Reply:
        raise AssertionError("a group member used the blocking send")

    async def asend(self, message: str) -> Reply:
        o = self.owner
        o.threads.add(threading.get_ident())
        if o.full is None:
            o.full = asyncio.Event()
        o.in_flight += 1
        o.most = max(o.most, o.in_flight)
        if o.in_flight >= o.width:
            o.full.set()
        try:
            await asyncio.wait_for(o.full.wait(), 10)  # TimeoutError: not concurrent
            reply: Reply = await self.inner.asend(message)
            return reply
        finally:
            o.in_flight -= 1

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("width", [1, 4, 12])
def test_members_run_at_once_on_one_thread_at_most_max_concurrent(tmp_path: Path,
                                                                 width: int) -> None:
    counted: list[_Counted] = []

    def wrap(inner: Provider) -> Provider:
        counted.append(_Counted(inner, min(width, 12)))
        return counted[0]  # type: ignore[return-value]

    run = run_workflow(_wf(tmp_path, "copilot", 12, width), wrap_provider=wrap,
                       responses={"agents": {"worker": {"every": {"output": {"ok": True}}}}})
    assert run.exit_code == 0, run.error_text()
    (c,) = counted
    assert c.most == min(width, 12)  # all of them at once, never more than the bound
    assert len(c.threads) == 1
    assert threading.get_ident() not in c.threads
    assert {r["thread"] for r in run.provider.requests} == c.threads
    assert len(run.of(StepFinished)) == 12 + 1
    assert run.engine.state.outputs["fan"]["count"] == 12


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    yield from fake_servers(monkeypatch)


def test_an_openai_member_streams_on_the_async_path(tmp_path: Path, servers: Servers) -> None:
    from fakes.openai_server import answer

    for i in range(3):
        servers.openai.queue.append(answer(f"answer number {i}", usage=(10, 5, 0)))
    run = run_real_yaml(tmp_path, FOR_EACH.replace("PROVIDER", "openai")
                        .replace("ITEMS", "[0, 1, 2]").replace("WIDTH", "3"))
    assert run.exit_code == 0, run.error_text()
    outputs = sorted(o["result"] for o in run.outputs["fan"]["outputs"])
    assert outputs == [f"answer number {i}" for i in range(3)]
    deltas = run.of(ModelDelta)
    assert deltas
    assert {d.step for d in deltas} == {"worker"}
    assert "".join(d.text for d in deltas if d.iteration == 1).startswith("answer number")
    assert len(servers.openai.chat_requests()) == 3


class _Silent:
    """A Chat Completions endpoint that reads each request and never answers: it counts the
    requests open and the ones whose client closed the connection."""

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                with owner.lock:
                    owner.opened += 1
                self.connection.settimeout(60)
                with contextlib.suppress(OSError):
                    self.rfile.read(1)  # b"" once the client hangs up
                with owner.lock:
                    owner.closed += 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_ctrl_c_cancels_the_members_sdk_calls_in_flight(tmp_path: Path) -> None:
    silent = _Silent()
    wf = _wf(tmp_path, "openai", 6, 4)
    env = cli_env(tmp_path / "home", {"OPENAI_BASE_URL": silent.url + "/v1",
                                      "OPENAI_API_KEY": "sk-test"})
    proc = subprocess.Popen(podium_argv("run", wf), cwd=tmp_path, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: silent.opened >= 4, 60), "the members never called"
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "Traceback" not in err
        assert wait_until(lambda: silent.closed >= 4, 30), (silent.opened, silent.closed)
        assert silent.opened == 4  # cancelled: no further member started
    finally:
        if proc.poll() is None:
            proc.kill()  # by its pid: this test started it
            proc.communicate()
        silent.close()


def test_one_implementation_runs_with_and_without_a_loop() -> None:
    async def work(aio_: bool) -> int:
        return await aio.blocking(threading.get_ident, aio_)

    assert aio.drive(work(False)) == threading.get_ident()  # no loop, this thread
    on_loop = asyncio.run_coroutine_threadsafe(work(True), aio.loop()).result(10)
    assert on_loop != threading.get_ident()

    async def suspends() -> None:
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="tried to suspend"):
        aio.drive(suspends())


class _Suspending:
    """Wraps a provider: each member's call waits on the loop until `width` members are
    calling (10 s at most), as a model call's I/O would suspend it. No member ends before
    they have all started, so no worker takes a second item while the others start."""

    def __init__(self, inner: Provider, width: int = 12) -> None:
        self.inner, self.name, self.capabilities = inner, inner.name, inner.capabilities
        self.width, self.calling = width, 0
        self.all_in: asyncio.Event | None = None

    def open_session(self, request: AgentRequest) -> Any:
        inner, owner = self.inner.open_session(request), self

        class Session:
            def send(self, message: str) -> Reply:
                raise AssertionError("a group member used the blocking send")

            async def asend(self, message: str) -> Reply:
                if owner.all_in is None:
                    owner.all_in = asyncio.Event()
                owner.calling += 1
                if owner.calling >= owner.width:
                    owner.all_in.set()
                await asyncio.wait_for(owner.all_in.wait(), 10)
                reply: Reply = await inner.asend(message)
                return reply

            def close(self) -> None:
                inner.close()

        return Session()

    def close(self) -> None:
        self.inner.close()


class _StartPasses:
    """A sink: how many polls the member loop had made when each member started."""

    reads = frozenset({"step_started"})

    def __init__(self) -> None:
        self.polls = 0
        self.at: list[int] = []

    def handle(self, event: Any) -> None:
        if event.group:
            self.at.append(self.polls)

    def close(self) -> None:
        pass


def test_members_start_a_loop_pass_apart(tmp_path: Path) -> None:
    """A group's members are started one per pass of the loop, each pass polling the sockets
    in between: the first members' I/O is served while the later ones start (engine/groups.py
    _pool_run). Started all in one pass, every member's first step ran before the loop polled
    once, so the first request waited behind every other member's first step."""
    selector = aio.loop()._selector  # type: ignore[attr-defined]
    starts = _StartPasses()
    select = selector.select

    def counted(timeout: float | None = None) -> Any:
        starts.polls += 1
        return select(timeout)

    selector.select = counted
    try:
        run = run_workflow(_wf(tmp_path, "copilot", 12, 12), wrap_provider=_Suspending,
                           sinks=[starts],
                           responses={"agents": {"worker": {"every": {"output": {"ok": True}}}}})
    finally:
        selector.select = select
    assert run.exit_code == 0, run.error_text()
    assert len(starts.at) == 12
    assert starts.at == sorted(starts.at), starts.at  # in order,
    assert len(set(starts.at)) == 12, starts.at  # each in a pass of its own


def test_a_fan_out_commits_its_members_prompts_in_batches(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """While a group holds its run's commits, a member's prompt_rendered joins the batch: it
    was a transaction of its own per member (store/sqlcore.py; docs/performance.md issue 33).
    With the batch's window widened to a second, the twelve members (started a loop pass
    apart) all render their prompts inside it, so their prompts share one transaction (two
    allow for a member started before the committer's window opened)."""
    from podium.engine import groups

    monkeypatch.setattr(groups, "COMMIT_WINDOW", 1.0)
    from podium.app.inputs import parse_inputs
    from podium.app.launch import LaunchOptions, make_engine
    from podium.engine.run import file_hash
    from podium.language.load import load_workflow
    from podium.store.base import RunRecord
    from podium.store.sqlite import SQLiteStore

    class Counting(SQLiteStore):
        prompts: ClassVar[list[int]] = []

        def _flush(self, run_ids: list[str]) -> None:
            n = sum(1 for rid in run_ids if (p := self._pending.get(rid)) for w in p.writes
                    if isinstance(w, tuple) and "prompt_rendered" in w[1])
            if n:
                self.prompts.append(n)
            super()._flush(run_ids)

    path = _wf(tmp_path, "copilot", 12, 12)
    responses = tmp_path / "responses.yaml"
    responses.write_text(json.dumps({"agents": {"worker": {"every": {"output": {"ok": True}}}}}),
                         encoding="utf-8")
    store = Counting(tmp_path / "home" / "podium.db")
    wf = load_workflow(path).model
    assert wf is not None
    inputs = parse_inputs(wf, [], None)
    engine = make_engine(wf, path, inputs, LaunchOptions(responses=responses, verbosity=0),
                         store)
    store.create_run(RunRecord(engine.run_id, wf.workflow.name, str(path), file_hash(path),
                               inputs))
    result = engine.run()
    store.close()
    assert result.exit_code == 0
    assert sum(Counting.prompts) == 12
    assert len(Counting.prompts) <= 2, Counting.prompts  # it was 12: one per member
    events = SQLiteStore(tmp_path / "home" / "podium.db").events(engine.run_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert sum(e["type"] == "prompt_rendered" for e in events) == 12
