"""Fixtures of the console tests: a run store with finished, parked and failed runs, and the
console serving it in this process (for HTTP-level tests)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from console_helpers import SSE, Client, gate_flow, run_id_of, run_podium

from helpers_engine import EXAMPLES
from podium.web.server import ConsoleServer


@dataclass
class Store:
    home: Path
    flows: Path
    success: str
    parked: str


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """A PODIUM_HOME with a finished loop run and a run parked at a gate."""
    root = tmp_path_factory.mktemp("console")
    home, flows = root / "home", root / "flows"
    done = run_podium(home, "run", EXAMPLES / "review-counter" / "workflow.yaml")
    assert done.returncode == 0, done.stderr
    flow, responses = gate_flow(flows)
    parked = run_podium(home, "run", flow, "--responses", responses)
    assert parked.returncode == 5, parked.stderr
    return Store(home, flows, run_id_of(done), run_id_of(parked))


@dataclass
class Live:
    home: Path
    port: int
    token: str
    server: ConsoleServer

    def client(self, token: bool = True) -> Client:
        return Client(self.port, self.token if token else "")

    def sse(self, path: str, headers: dict[str, str] | None = None) -> SSE:
        """An event stream of this console, opened with its token."""
        return SSE(self.port, path, headers or {}, self.token)

    def stop(self) -> None:
        self.server.stop()


def start_console(home: Path) -> Live:
    """The console over `home`, served by uvicorn on a free loopback port in this process."""
    server = ConsoleServer(home, "127.0.0.1", 0)
    server.prepare()
    server.start_background()
    return Live(home, server.port, server.token, server)


@pytest.fixture(scope="module")
def console(store: Store) -> Iterator[Live]:
    """The console over `store`, served by uvicorn on a free loopback port in this process."""
    live = start_console(store.home)
    try:
        yield live
    finally:
        live.stop()
