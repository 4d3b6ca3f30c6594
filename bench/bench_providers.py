"""podium's own overhead per model call, against an OpenAI-compatible endpoint that answers
instantly (bench/_instant_openai.py, a separate process on 127.0.0.1).

(a) endpoint: one keep-alive HTTP POST of the same request body (http.client), per call;
(b) SDK: the `openai` client's chat.completions.create with podium's parameters, per call;
(c) podium, agent loop: a workflow whose agent runs 20 times and loops back to itself, each
    execution one model call with a structured-output schema; in-process `Engine.run()` with
    no sinks (validation, client creation, prompt rendering, pricing, events, routing
    included); (c') the marginal cost per call from 20 to 100 executions (once-per-run costs
    such as the client construction left out);
(d) podium, tool loop: one agent execution of 20 model calls (19 `list_dir` tool rounds, then
    the answer), in-process;
(e) whole processes: `podium run -q` of (c) with 20 and 100 executions; the marginal cost per
    call is (T100 - T20) / 80, next to the same for a loop of set steps (no model);
(f) connections the endpoint accepted per run (clients and connections reused), and an import
    audit: a workflow without agents loads none of openai, anthropic, mcp, httpx2,
    genai_prices.

podium's work per call = (c) or (d) per call - (b) per call (the SDK and the endpoint), and
also shown against (a) (the endpoint alone). Target: under 5 ms per call beyond the endpoint.

Usage:
    .venv/bin/python bench/bench_providers.py [--repeats 7] [--runs 7]

Prints a Markdown report on stdout; writes bench/results/providers.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    PODIUM,
    PYTHON,
    REPO,
    eprint,
    importtime,
    machine_info,
    md_table,
    measure,
    wait_for_quiet,
    write_json,
)

CALLS = 20
SDKS = ("openai", "anthropic", "mcp", "httpx2", "genai_prices")
SCHEMA = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"],
          "additionalProperties": False}


def agent_loop_yaml(n: int) -> str:
    return f"""\
workflow:
  name: bench-agent-loop
  entry_point: agent
  runtime: {{provider: openai, default_model: gpt-5-mini}}
  limits: {{max_iterations: 500}}
agents:
  - name: agent
    tools: []
    prompt: "call {{{{ context.iteration }}}}"
    output: {{n: {{type: number}}}}
    routes:
      - to: agent
        when: "{{{{ context.iteration < {n} }}}}"
      - to: $end
"""


def set_loop_yaml(n: int) -> str:
    """The same loop without a model: what a step costs the engine and the run store."""
    return f"""\
workflow:
  name: bench-set-loop
  entry_point: step
  limits: {{max_iterations: 500}}
agents:
  - name: step
    type: set
    value: "{{{{ context.iteration }}}}"
    routes:
      - to: step
        when: "{{{{ context.iteration < {n} }}}}"
      - to: $end
"""


TOOL_LOOP_YAML = """\
workflow:
  name: bench-tool-loop
  entry_point: agent
  runtime: {provider: openai, default_model: gpt-5-mini}
agents:
  - name: agent
    working_dir: work
    tools: [list_dir]
    max_agent_iterations: 25
    prompt: "look around"
    output: {n: {type: number}}
"""

NO_AGENT_YAML = """\
workflow:
  name: bench-no-agent
  entry_point: hello
  runtime: {provider: openai}
agents:
  - name: hello
    type: script
    command: echo
    args: ['{"ok": true}']
    routes: [{to: done}]
  - {name: done, type: set, value: "{{ hello.output.ok }}"}
"""


class Endpoint:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([PYTHON, str(REPO / "bench" / "_instant_openai.py")],
                                     stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict[str, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port)
        conn.request("GET", "/stats")
        data: dict[str, Any] = json.loads(conn.getresponse().read())
        conn.close()
        return data

    def reset(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port)
        conn.request("POST", "/reset", body=b"{}")
        conn.getresponse().read()
        conn.close()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def best_per_call(fn: Callable[[], int], repeats: int) -> tuple[float, list[float]]:
    """Run `fn` (which returns how many calls it made) `repeats` times; (median ms per call,
    samples)."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        calls = fn()
        samples.append((time.perf_counter() - t0) * 1000 / calls)
    return statistics.median(samples), samples


def bench_endpoint(ep: Endpoint, repeats: int) -> tuple[float, list[float]]:
    body = json.dumps({"model": "gpt-5-mini", "messages": [{"role": "user", "content": "x"}],
                       "response_format": {"type": "json_schema", "json_schema": {
                           "name": "output", "strict": True, "schema": SCHEMA}}}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", ep.port)

    def loop() -> int:
        for _ in range(CALLS):
            conn.request("POST", "/v1/chat/completions", body=body,
                         headers={"content-type": "application/json"})
            conn.getresponse().read()
        return CALLS

    loop()
    try:
        return best_per_call(loop, repeats)
    finally:
        conn.close()


def bench_sdk(ep: Endpoint, repeats: int) -> tuple[float, list[float]]:
    import openai

    client = openai.OpenAI(api_key="sk-bench", base_url=ep.url + "/v1", max_retries=0)
    fmt = {"type": "json_schema", "json_schema": {"name": "output", "strict": True,
                                                  "schema": SCHEMA}}

    def loop() -> int:
        for _ in range(CALLS):
            client.chat.completions.create(model="gpt-5-mini", response_format=fmt,  # type: ignore[call-overload]
                                           messages=[{"role": "user", "content": "x"}])
        return CALLS

    loop()
    try:
        return best_per_call(loop, repeats)
    finally:
        client.close()


def bench_sdk_tool_loop(ep: Endpoint, repeats: int) -> tuple[float, list[float]]:
    """The same 20-call conversation as (d), driven by the bare SDK (no podium)."""
    import openai

    from podium.tools.workspace import SPECS

    spec = SPECS["list_dir"]
    tools = [{"type": "function", "function": {"name": spec.name, "description":
                                               spec.description,
                                               "parameters": spec.parameters}}]
    fmt = {"type": "json_schema", "json_schema": {"name": "output", "strict": True,
                                                  "schema": SCHEMA}}

    def loop() -> int:
        client = openai.OpenAI(api_key="sk-bench", base_url=ep.url + "/v1", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "look around"}]
        for _ in range(CALLS):
            resp = client.chat.completions.create(  # type: ignore[call-overload]
                model="gpt-5-mini", messages=messages, tools=tools, response_format=fmt)
            msg = resp.choices[0].message
            calls = msg.tool_calls or []
            messages.append({"role": "assistant", "content": msg.content, "tool_calls": [
                {"id": c.id, "type": "function", "function": {
                    "name": c.function.name, "arguments": c.function.arguments}}
                for c in calls]} if calls else {"role": "assistant", "content": msg.content})
            messages += [{"role": "tool", "tool_call_id": c.id, "content": "a.txt (2 bytes)"}
                         for c in calls]
        client.close()
        return CALLS

    loop()
    return best_per_call(loop, repeats)


def run_in_process(path: Path) -> Any:
    from podium.check.validate import validate_file
    from podium.engine.run import Engine
    from podium.gates.base import ChainAnswerer
    from podium.providers.base import ProviderRegistry
    from podium.steps.base import RunOptions

    result = validate_file(path)
    if result.model is None or result.sink.errors:
        raise SystemExit(f"{path.name} is invalid: {result.sink.sorted()}")
    engine = Engine(result.model, path, inputs={}, providers=ProviderRegistry(),
                    answerer=ChainAnswerer([]), options=RunOptions())
    outcome = engine.run()
    if outcome.exit_code != 0:
        raise SystemExit(f"{path.name}: {outcome.status}: {outcome.error}")
    return engine


def bench_podium(path: Path, calls: int, repeats: int,
                 ep: Endpoint) -> tuple[float, list[float], float, list[dict[str, Any]]]:
    """(median ms per call, samples, run-store-free validate ms, endpoint stats per run)."""
    from podium.check.validate import validate_file

    run_in_process(path)  # warm: imports, genai-prices table, first client
    t0 = time.perf_counter()
    validate_file(path)
    validate_ms = (time.perf_counter() - t0) * 1000
    per_run = []

    def loop() -> int:
        ep.reset()
        run_in_process(path)
        per_run.append(ep.stats())
        return calls

    median, samples = best_per_call(loop, repeats)
    return median, samples, validate_ms, per_run


def client_construction_ms() -> float:
    import openai

    samples = []
    for _ in range(20):
        t0 = time.perf_counter()
        openai.OpenAI(api_key="sk", base_url="http://127.0.0.1:9/v1", max_retries=0).close()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7, help="in-process repeats (median)")
    ap.add_argument("--runs", type=int, default=7, help="whole-process samples")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="podium-bench-providers-"))
    (tmp / "work").mkdir()
    (tmp / "work" / "a.txt").write_text("a\n")
    loop20 = tmp / "agent-loop-20.yaml"
    loop20.write_text(agent_loop_yaml(20))
    loop100p = tmp / "agent-loop-100-process.yaml"
    loop100p.write_text(agent_loop_yaml(100))
    tools = tmp / "tool-loop.yaml"
    tools.write_text(TOOL_LOOP_YAML)
    sets = {n: tmp / f"set-loop-{n}.yaml" for n in (20, 100)}
    for n, f in sets.items():
        f.write_text(set_loop_yaml(n))
    no_agent = tmp / "no-agent.yaml"
    no_agent.write_text(NO_AGENT_YAML)

    ep = Endpoint()
    os.environ["OPENAI_BASE_URL"] = ep.url + "/v1"
    os.environ["OPENAI_API_KEY"] = "sk-bench"
    os.environ["PODIUM_HOME"] = str(tmp / "home")
    try:
        busy = wait_for_quiet()
        eprint("endpoint alone ...")
        raw_ms, raw_s = bench_endpoint(ep, args.repeats)
        eprint("openai SDK ...")
        sdk_ms, sdk_s = bench_sdk(ep, args.repeats)
        eprint("openai SDK, tool loop ...")
        sdk_tools_ms, sdk_tools_s = bench_sdk_tool_loop(ep, args.repeats)
        eprint("podium agent loop (in-process) ...")
        loop_ms, loop_s, validate_ms, loop_stats = bench_podium(loop20, CALLS, args.repeats, ep)
        loop100 = tmp / "agent-loop-100.yaml"
        loop100.write_text(agent_loop_yaml(100))
        eprint("podium agent loop, 100 executions (in-process) ...")
        loop100_ms, loop100_s, _, _ = bench_podium(loop100, 100, args.repeats, ep)
        eprint("podium tool loop (in-process) ...")
        tool_ms, tool_s, _, tool_stats = bench_podium(tools, CALLS, args.repeats, ep)
        ctor_ms = client_construction_ms()
        eprint("whole processes ...")
        env = dict(os.environ)
        p20 = measure("podium run -q (20 calls)", [PODIUM, "run", "-q", str(loop20)],
                      runs=args.runs, env=env)
        p100 = measure("podium run -q (100 calls)", [PODIUM, "run", "-q", str(loop100p)],
                      runs=args.runs, env=env)
        p0 = measure("podium run -q (no agent)", [PODIUM, "run", "-q", str(no_agent)],
                     runs=args.runs, env=env)
        s20 = measure("podium run -q (20 set steps)", [PODIUM, "run", "-q", str(sets[20])],
                      runs=args.runs, env=env)
        s100 = measure("podium run -q (100 set steps)", [PODIUM, "run", "-q", str(sets[100])],
                      runs=args.runs, env=env)
        imports = {name.split(".")[0] for name, _, _ in
                   importtime(["-m", "podium", "run", "-q", str(no_agent)], env=env)}
        sdk_imports = {name.split(".")[0]: cum for name, _, cum in
                       importtime(["-m", "podium", "run", "-q", str(loop20)], env=env)
                       if name in SDKS}
    finally:
        ep.close()

    m20 = statistics.median(p20.walls_ms)
    m100 = statistics.median(p100.walls_ms)
    marginal = (m100 - m20) / 80
    step_marginal = (statistics.median(s100.walls_ms) - statistics.median(s20.walls_ms)) / 80
    steady = (loop100_ms * 100 - loop_ms * CALLS) / (100 - CALLS)
    loaded = sorted(set(SDKS) & imports)
    data = {
        "machine": machine_info(), "cpu_busy_before": busy, "calls": CALLS,
        "endpoint_ms_per_call": round(raw_ms, 3), "endpoint_samples": raw_s,
        "sdk_ms_per_call": round(sdk_ms, 3), "sdk_samples": sdk_s,
        "agent_loop_ms_per_call": round(loop_ms, 3), "agent_loop_samples": loop_s,
        "agent_loop_podium_ms": round(loop_ms - sdk_ms, 3),
        "agent_loop_beyond_endpoint_ms": round(loop_ms - raw_ms, 3),
        "agent_loop_100_ms_per_call": round(loop100_ms, 3), "agent_loop_100_samples": loop100_s,
        "agent_loop_marginal_ms_per_call": round(steady, 3),
        "agent_loop_marginal_podium_ms": round(steady - sdk_ms, 3),
        "agent_loop_marginal_beyond_endpoint_ms": round(steady - raw_ms, 3),
        "sdk_tool_loop_ms_per_call": round(sdk_tools_ms, 3), "sdk_tool_loop_samples": sdk_tools_s,
        "tool_loop_ms_per_call": round(tool_ms, 3), "tool_loop_samples": tool_s,
        "tool_loop_podium_ms": round(tool_ms - sdk_tools_ms, 3),
        "tool_loop_beyond_endpoint_ms": round(tool_ms - raw_ms, 3),
        "validate_ms": round(validate_ms, 2), "client_construction_ms": round(ctor_ms, 3),
        # the stats request itself opens one connection
        "connections_per_run": {"agent_loop": [s["connections"] - 1 for s in loop_stats],
                                "tool_loop": [s["connections"] - 1 for s in tool_stats]},
        "requests_per_run": {"agent_loop": [s["requests"] for s in loop_stats],
                             "tool_loop": [s["requests"] for s in tool_stats]},
        "endpoint_handling_ms_per_call": round(
            statistics.median(s["seconds"] * 1000 / max(1, s["requests"]) for s in loop_stats),
            3),
        "process": {"run20": p20.summary(), "run100": p100.summary(), "no_agent": p0.summary(),
                    "set20": s20.summary(), "set100": s100.summary(),
                    "marginal_ms_per_call": round(marginal, 2),
                    "marginal_ms_per_set_step": round(step_marginal, 2),
                    "marginal_ms_per_call_beyond_a_step": round(marginal - step_marginal, 2)},
        "sdk_import_cumulative_us": sdk_imports,
        "no_agent_run_loads_sdk": loaded,
    }
    path = write_json("providers.json", data)
    print(report(data))
    eprint(f"wrote {path}")


def report(d: dict[str, Any]) -> str:
    rows = [
        ["(a) endpoint alone: keep-alive HTTP POST", d["endpoint_ms_per_call"], "", ""],
        ["(b) openai SDK, one-message call", d["sdk_ms_per_call"], "", ""],
        ["(b') openai SDK, the 20-call tool conversation", d["sdk_tool_loop_ms_per_call"], "",
         ""],
        ["(c) podium agent loop: 20 executions x 1 call", d["agent_loop_ms_per_call"],
         f"{d['agent_loop_podium_ms']} (- b)", d["agent_loop_beyond_endpoint_ms"]],
        ["(c') the same, marginal per call from 20 to 100 executions",
         d["agent_loop_marginal_ms_per_call"], f"{d['agent_loop_marginal_podium_ms']} (- b)",
         d["agent_loop_marginal_beyond_endpoint_ms"]],
        ["(d) podium tool loop: 1 execution x 20 calls", d["tool_loop_ms_per_call"],
         f"{d['tool_loop_podium_ms']} (- b')", d["tool_loop_beyond_endpoint_ms"]],
    ]
    proc = d["process"]
    prow = [[proc[k]["label"], proc[k]["median_ms"], proc[k]["min_ms"], proc[k]["max_ms"],
             proc[k]["rss_median_mib"]] for k in ("no_agent", "set20", "set100", "run20",
                                                  "run100")]
    imports = ", ".join(f"{k} {v / 1000:.0f} ms" for k, v in
                        sorted(d["sdk_import_cumulative_us"].items()))
    return "\n".join([
        "### In-process, per model call (median of repeats)", "",
        md_table(["what", "ms per call", "podium's own ms", "beyond endpoint ms (- a)"], rows),
        "",
        f"Endpoint's own handling per request: {d['endpoint_handling_ms_per_call']} ms. "
        f"Client construction (once per provider per run): {d['client_construction_ms']} ms. "
        f"Connections the endpoint accepted per run: agent loop "
        f"{d['connections_per_run']['agent_loop']}, tool loop "
        f"{d['connections_per_run']['tool_loop']} (requests per run: "
        f"{d['requests_per_run']['agent_loop'][0]} and {d['requests_per_run']['tool_loop'][0]}).",
        "", "### Whole processes", "",
        md_table(["command", "median ms", "min ms", "max ms", "RSS MiB"], prow), "",
        f"Marginal cost per agent call, (T100 - T20) / 80: {proc['marginal_ms_per_call']} ms; "
        f"per set step (the engine and the run store, no model): "
        f"{proc['marginal_ms_per_set_step']} ms; so a model call costs "
        f"{proc['marginal_ms_per_call_beyond_a_step']} ms more than a step without one. "
        f"SDK imports in a run with agents (cumulative): {imports}. "
        f"Model SDKs loaded by a run without agents: {', '.join(d['no_agent_run_loads_sdk']) or 'none'}.",
    ])


if __name__ == "__main__":
    main()
