"""Property: whatever the workflow (set, script and scripted-agent steps, groups, a loop, agents
that need corrections or break their contract inside a group), what a run spent is the sum of
the calls it made: the oracle counts the scripted answers' tokens, independently of podium, and
the budget, the run result, the step events and the fold of the events all equal it. On a
real store (below): the app layer's spend equals the recorded calls, replay is identical, and
a run interrupted or SIGKILLed at a random step resumes to the uninterrupted run's output."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers_engine import run_workflow, write
from podium.events.model import ModelExchange, StepFailed, StepFinished
from podium.events.spend import fold_spend


@dataclass(frozen=True)
class Agent:
    tokens: int  # input tokens of each answer (output: a tenth)
    corrections: int  # bad answers before the good one
    breaks: bool = False  # only bad answers: it fails its contract (in a group only)

    def answers(self) -> int:
        return 3 if self.breaks else self.corrections + 1


agents = st.builds(Agent, st.integers(1, 5_000), st.integers(0, 2))
member = st.builds(Agent, st.integers(1, 5_000), st.integers(0, 2), st.booleans())
node = st.one_of(
    st.tuples(st.just("set")), st.tuples(st.just("script")), st.tuples(st.just("agent"), agents),
    # (a group whose members all break fails the run: the corpus of test_spend_truth.py
    # has those; here one member of a parallel group may break)
    st.tuples(st.just("parallel"), member, agents),
    st.tuples(st.just("for_each"), agents, st.integers(1, 3)))


def _answer(a: Agent) -> dict[str, Any]:
    usage = {"input_tokens": a.tokens, "output_tokens": a.tokens // 10}
    bad = [{"text": "not json", "usage": usage}] * (3 if a.breaks else a.corrections)
    good = [] if a.breaks else [{"output": {"v": "ok"}, "usage": usage}]
    return {"every": {"attempts": bad + good}}


def _sections(groups: list[str]) -> str:
    """The groups under one `parallel:` and one `for_each:` key (a key twice is invalid)."""
    out = ""
    for key in ("parallel:", "for_each:"):
        entries = [g.split("\n", 1)[1] for g in groups if g.startswith(key)]
        if entries:
            out += key + "\n" + "\n".join(entries) + "\n"
    return out


def _build(nodes: list[tuple[Any, ...]], loops: int) -> tuple[str, dict[str, Any], int]:
    """The workflow, its scripted answers, and the input tokens its calls must add up to."""
    steps: list[str] = []
    groups: list[str] = []
    responses: dict[str, Any] = {}
    names = [f"n{i}" for i in range(len(nodes))] + ["count"]
    agent = '{{name: {n}, prompt: "say {n}", output: {{v: {{type: string}}}}}}'
    for i, spec in enumerate(nodes):
        name, nxt, kind = names[i], names[i + 1], spec[0]
        if kind == "set":
            steps.append(f'  - {{name: {name}, type: set, value: 1, routes: [{{to: {nxt}}}]}}')
        elif kind == "script":
            steps.append(f'  - {{name: {name}, type: script, command: python, '
                         f'args: ["-c", "print(1)"], routes: [{{to: {nxt}}}]}}')
        elif kind == "agent":
            steps.append("  - " + agent.format(n=name)[:-1] + f", routes: [{{to: {nxt}}}]}}")
            responses[name] = _answer(spec[1])
        elif kind == "parallel":
            for j, m in enumerate(spec[1:]):
                steps.append("  - " + agent.format(n=f"{name}m{j}"))
                responses[f"{name}m{j}"] = _answer(m)
            groups.append(f"parallel:\n  - {{name: {name}, agents: [{name}m0, {name}m1], "
                          f"failure_mode: continue_on_error, routes: [{{to: {nxt}}}]}}")
        else:
            m = spec[1]
            groups.append(
                f"for_each:\n  - {{name: {name}, type: for_each, source: workflow.input.items, "
                f"as: item, failure_mode: continue_on_error, max_concurrent: 2, "
                f"routes: [{{to: {nxt}}}], agent: " + agent.format(n=f"{name}a") + "}")
            responses[f"{name}a"] = _answer(m)
    steps.append('  - name: count\n    type: set\n    output_type: integer\n'
                 '    value: "{{ count.output + 1 if count is defined and count.output is not '
                 'none else 1 }}"\n'
                 f'    routes: [{{to: n0, when: "{{{{ count.output < {loops} }}}}"}}, '
                 '{to: $end}]')
    items = max([s[2] for s in nodes if s[0] == "for_each"], default=1)
    text = f"""
workflow:
  name: prop
  entry_point: n0
  runtime: {{provider: copilot, default_model: team-model}}
  limits: {{budget_usd: 1000, budget_mode: audit, max_iterations: 200}}
  cost: {{pricing: {{team-model: {{input_per_mtok: 1.0, output_per_mtok: 0}}}}}}
  input: {{items: {{type: array, default: {list(range(items))}}}}}
agents:
""" + "\n".join(steps) + "\n" + _sections(groups)
    # each for-each has `items` items here: one shared input list, sized by the largest
    expected = 0
    for spec in nodes:
        if spec[0] == "agent":
            expected += spec[1].answers() * spec[1].tokens
        elif spec[0] == "parallel":
            expected += sum(m.answers() * m.tokens for m in spec[1:])
        elif spec[0] == "for_each":
            expected += spec[1].answers() * spec[1].tokens * items
    return text, {"agents": responses}, expected * loops


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(nodes=st.lists(node, min_size=1, max_size=4).filter(
           lambda ns: sum(1 for n in ns if n[0] == "script") <= 1),
       loops=st.integers(1, 2))
def test_spend_is_the_sum_of_the_calls(tmp_path: Path, nodes: list[tuple[Any, ...]],
                                       loops: int) -> None:
    text, responses, expected = _build(nodes, loops)
    run = run_workflow(write(tmp_path, text), responses=responses)
    assert run.exit_code == 0, (run.error_text(), text)
    calls = run.of(ModelExchange)
    assert sum(e.input_tokens for e in calls) == expected
    total = run.engine.meter.total()
    assert total.input_tokens == expected
    assert total.cost_usd == pytest.approx(expected / 1e6)
    assert run.result.budget is not None
    assert run.result.budget.spent_usd == pytest.approx(expected / 1e6, abs=1e-6)
    assert sum(u.input_tokens for u in run.result.usage_by_step.values()) == expected
    folded = fold_spend(e.model_dump() for e in run.events)
    assert folded.total == total
    assert sum(s.input_tokens for s in folded.by_step.values()) == expected
    # the top-level step events say what each step spent: they add up to it too
    ends = [e for e in run.events if isinstance(e, (StepFinished, StepFailed))
            and e.group is None]
    assert sum(e.input_tokens for e in ends) == expected


# --------------------------------------------------------------------------- on a real store
#
# The same workflows run through the app layer (app/runs.py start_run on a real SQLite store),
# then: what the app layer says they spent is the sum of the calls they recorded (and the
# oracle's); `podium replay`'s operation (app/replay.py) re-executes them identically; and a
# run interrupted after a random committed step (the engine's own interruption, by SIGINT
# from an observer of its bus) or SIGKILLed in a random step (a real `podium run` process,
# held in a script step until the store shows it there) resumes to the same final output,
# path and spend as the uninterrupted run.

HOLD = ('  - {{name: hold, type: script, command: python, args: ["-c", "import pathlib, time; '
        'p = pathlib.Path(r\'{go}\'); [time.sleep(0.01) for _ in range(6000) '
        'if not p.exists()]; print(2)"], routes: [{{to: {nxt}}}]}}')


def _stored(nodes: list[tuple[Any, ...]], loops: int, hold_at: int | None, go: Path
            ) -> tuple[str, dict[str, Any], int]:
    """_build's workflow with an output, and (when `hold_at`) a script step before node
    `hold_at` that waits for the file `go`."""
    text, responses, expected = _build(nodes, loops)
    outs = [f"n{i}" for i, n in enumerate(nodes) if n[0] in ("set", "script")]
    text += "output:\n  count: \"{{ count.output }}\"\n" + "".join(
        f"  {n}: \"{{{{ {n}.output | tojson }}}}\"\n" for n in outs)
    if hold_at is not None:
        target = f"n{hold_at}" if hold_at < len(nodes) else "count"
        hold = HOLD.format(go=go, nxt=target)
        if hold_at == 0:
            text = text.replace("entry_point: n0", "entry_point: hold")
            text = text.replace("{to: n0, when:", "{to: hold, when:")
        else:
            before = f"n{hold_at - 1}"
            # the node before routes to the hold step (its plain route, or its group's)
            text = "\n".join(line.replace(f"routes: [{{to: {target}}}]", "routes: [{to: hold}]")
                             if f"name: {before}," in line else line
                             for line in text.splitlines()) + "\n"
        text = text.replace("agents:\n", "agents:\n" + hold + "\n", 1)
    return text, responses, expected


@dataclass
class Stored:
    run_id: str
    status: str
    output: Any
    path: list[tuple[str, int, Any]]
    spend: tuple[int, int, int]  # input tokens (app layer), of the recorded calls, calls


def _read(store: Any, run_id: str) -> Stored:
    from podium.app.history import folded
    from podium.app.spend import run_spend

    run = store.get_run(run_id)
    events = store.events(run_id)
    calls = [e for e in events if e["type"] == "model_exchange"]
    spent = run_spend(store, run_id, events)
    path = [(r.step, r.iteration, r.output) for r in folded(events).records
            if r.step != "hold"]
    return Stored(run_id, run.status, run.output, path,
                  (spent.total.input_tokens, sum(int(e["input_tokens"]) for e in calls),
                   spent.total.calls))


class _InterruptAt:
    """An observer that interrupts the run (SIGINT, as Ctrl+C does) once `n` steps of the
    top-level run are committed."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = 0

    def handle(self, event: Any) -> None:
        import os
        import signal

        if event.type == "checkpoint" and event.parent_run_id is None:
            self.seen += 1
            if self.seen == self.n:
                os.kill(os.getpid(), signal.SIGINT)

    def close(self) -> None:
        """Nothing to release."""


def _start(home: Path, flow: Path, answers: Path, observers: list[Any] | None = None
           ) -> tuple[str, int]:
    from helpers_engine import load, venv_first_on_path
    from podium.app.home import open_store
    from podium.app.inputs import resolve_inputs
    from podium.app.launch import LaunchOptions
    from podium.app.runs import StartRequest, start_run

    wf = load(flow)
    store = open_store(home=home)
    try:
        with venv_first_on_path():
            done = start_run(store, StartRequest(wf, flow, resolve_inputs(wf, {})),
                             LaunchOptions(responses=answers, verbosity=-1, interactive=False,
                                           observers=observers or []))
        checkpoints = sum(1 for e in store.events(done.result.run_id)
                          if e["type"] == "checkpoint")
        return done.result.run_id, checkpoints
    finally:
        store.close()


def _resume(home: Path, run_id: str, answers: Path) -> None:
    from helpers_engine import venv_first_on_path
    from podium.app.home import open_store
    from podium.app.runs import ResumeRequest, resume_run

    store = open_store(home=home)
    try:
        with venv_first_on_path():
            resume_run(store, run_id, ResumeRequest(run_id, responses=answers, verbosity=-1,
                                                    interactive=False))
    finally:
        store.close()


def _stored_of(home: Path, run_id: str) -> Stored:
    from podium.app.home import open_store

    store = open_store(home=home)
    try:
        return _read(store, run_id)
    finally:
        store.close()


def _replayed(home: Path, run_id: str) -> dict[str, Any]:
    from helpers_engine import venv_first_on_path
    from podium.app.home import open_store
    from podium.app.replay import recording_of, replay_recording

    store = open_store(home=home)
    try:
        recording = recording_of(store, run_id)
    finally:
        store.close()
    with venv_first_on_path():
        return replay_recording(recording)


def _example(tmp_path: Path, tag: str, text: str, responses: dict[str, Any]
             ) -> tuple[Path, Path, Path]:
    import tempfile

    import yaml

    folder = Path(tempfile.mkdtemp(prefix=tag, dir=tmp_path))
    flow = write(folder, text)
    answers = folder / "responses.yaml"
    answers.write_text(yaml.safe_dump(responses), encoding="utf-8")
    return folder / "home", flow, answers


small = st.lists(node, min_size=1, max_size=3).filter(
    lambda ns: sum(1 for n in ns if n[0] == "script") <= 1)


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(nodes=small, loops=st.integers(1, 2), at=st.integers(0, 10_000))
def test_a_stored_run_replays_and_resumes_to_the_same_output(
        tmp_path: Path, nodes: list[tuple[Any, ...]], loops: int, at: int) -> None:
    text, responses, expected = _stored(nodes, loops, None, tmp_path)
    home, flow, answers = _example(tmp_path, "ref", text, responses)
    ref_id, steps = _start(home, flow, answers)
    ref = _stored_of(home, ref_id)
    assert ref.status == "success", text
    assert ref.spend == (expected, expected, ref.spend[2]), text
    replay = _replayed(home, ref_id)
    assert replay["identical"] is True, (replay.get("why"), text)
    assert replay["output"] == ref.output
    if steps < 2:
        return
    n = 1 + at % (steps - 1)  # interrupted after the n-th committed step, before the last
    cut_id, _ = _start(home, flow, answers, [_InterruptAt(n)])
    assert _stored_of(home, cut_id).status == "interrupted", (n, text)
    _resume(home, cut_id, answers)
    resumed = _stored_of(home, cut_id)
    assert (resumed.status, resumed.output, resumed.path) == ("success", ref.output,
                                                               ref.path), (n, text)
    assert resumed.spend == ref.spend, (n, text)


@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(nodes=st.lists(node, min_size=1, max_size=3).filter(
           lambda ns: not any(n[0] == "script" for n in ns)),
       loops=st.integers(1, 2), at=st.integers(0, 3))
def test_a_killed_run_resumes_to_the_same_output(tmp_path: Path, nodes: list[tuple[Any, ...]],
                                                 loops: int, at: int) -> None:
    import os
    import signal
    import subprocess

    from helpers_engine import cli_env, podium_argv, wait_until

    hold_at = at % (len(nodes) + 1)
    go = tmp_path / f"go-{os.urandom(4).hex()}"
    text, responses, expected = _stored(nodes, loops, hold_at, go)
    home, flow, answers = _example(tmp_path, "kill", text, responses)
    go.write_text("", encoding="utf-8")
    ref_id, _ = _start(home, flow, answers)
    ref = _stored_of(home, ref_id)
    assert ref.status == "success", text
    go.unlink()
    proc = subprocess.Popen(podium_argv("run", flow, "--responses", answers), env=cli_env(home),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        def held() -> bool:
            from podium.app.home import open_store

            store = open_store(home=home)
            try:
                rows = [r for r in store.list_runs(limit=5) if r.id != ref_id]
                return bool(rows) and rows[0].current_step == "hold"
            finally:
                store.close()

        assert wait_until(held, 60), text
        os.killpg(proc.pid, signal.SIGKILL)  # podium and its script die in the hold step
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()
    from podium.app.home import open_store

    store = open_store(home=home)
    try:
        from podium.app.owners import liveness

        (row,) = [r for r in store.list_runs(limit=5) if r.id != ref_id]
        killed = row.id
        assert (row.status, liveness(store, row).status) == ("running", "interrupted")
        assert row.current_step == "hold"
    finally:
        store.close()
    go.write_text("", encoding="utf-8")
    _resume(home, killed, answers)
    resumed = _stored_of(home, killed)
    assert (resumed.status, resumed.output, resumed.path) == ("success", ref.output,
                                                               ref.path), text
    assert resumed.spend == ref.spend == (expected, expected, ref.spend[2]), text
