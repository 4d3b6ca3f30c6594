"""The cold paths that bench_conductor.py and compare.py time: the workflows they run (each one
read unchanged by podium and by Conductor), the argv of each path, and the per-step slopes.

A path is one whole command in a fresh process; a per-step cost is the slope between two runs
of the same loop, (T(long) - T(short)) / (long - short), so start-up cancels out.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _common import REPO
from bench_engine import script_loop_yaml as script_loop  # one script loop for every bench
from gen_workflows import generate

ARTICLE = REPO / "examples" / "dev-review" / "workflow.yaml"
BIG = 800
# loop lengths for the per-step slopes: short and long runs of the same workflow. The script
# loop is as long as the set loop: Conductor starts in 3-5 s, give or take 0.2 s, and 100 of
# its ~3 ms script steps were within that noise (slopes of 0.2-2.4 ms a step between runs)
SET_STEPS = (10, 410)
SCRIPT_STEPS = (10, 410)

TWO_STEP = """\
workflow:
  name: two-step
  description: Two set steps, no model (bench/_cold_paths.py)
  entry_point: first
agents:
  - name: first
    type: set
    value: "{{ 1 + 1 }}"
    routes: [{to: second}]
  - name: second
    type: set
    value: "{{ first.output + 1 }}"
    routes: [{to: $end}]
output:
  result: "{{ second.output }}"
"""


def set_loop(n: int) -> str:
    return f"""\
workflow:
  name: set-loop-{n}
  description: One set step counting to {n}, routing back to itself
  entry_point: count
  limits:
    max_iterations: 500
agents:
  - name: count
    type: set
    value: "{{{{ (count.output | int if count is defined else 0) + 1 }}}}"
    routes:
      - to: $end
        when: "{{{{ count.output | int >= {n} }}}}"
      - to: count
output:
  count: "{{{{ count.output }}}}"
"""


def write_workflows(folder: Path) -> dict[str, Path]:
    """Every workflow the paths run, written into `folder`; key -> file."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"article": ARTICLE, f"linear-{BIG}": generate(folder / "linear", (BIG,))[0]}
    texts = {"two-step": TWO_STEP}
    texts.update({f"set-{n}": set_loop(n) for n in SET_STEPS})
    texts.update({f"script-{n}": script_loop(n) for n in SCRIPT_STEPS})
    for key, text in texts.items():
        files[key] = folder / f"{key}.yaml"
        files[key].write_text(text, encoding="utf-8")
    return files


@dataclass(frozen=True)
class Cmd:
    """One timed command: its label and how to build its argv from a tool's executable."""

    label: str
    argv: Callable[[str, Mapping[str, Path]], list[str]]


def podium_paths(names: Sequence[str] | None = None) -> list[Cmd]:
    """podium's side of every path (names: a subset of labels, in this order)."""
    paths = [
        Cmd("help", lambda exe, f: [exe, "--help"]),
        Cmd("validate article", lambda exe, f: [exe, "validate", str(f["article"])]),
        Cmd(f"validate linear-{BIG}", lambda exe, f: [exe, "validate", str(f[f"linear-{BIG}"])]),
        Cmd("run two-step", lambda exe, f: [exe, "--silent", "run", str(f["two-step"])]),
    ]
    paths += [Cmd(f"run set-{n}",
                    lambda exe, f, n=n: [exe, "--silent", "run", str(f[f"set-{n}"])])
              for n in SET_STEPS]
    paths += [Cmd(f"run script-{n}",
                    lambda exe, f, n=n: [exe, "--silent", "run", str(f[f"script-{n}"])])
              for n in SCRIPT_STEPS]
    return _pick(paths, names)


def conductor_paths(names: Sequence[str] | None = None) -> list[Cmd]:
    """Conductor's side of every path, in the same mode: `--silent run` in both tools (the
    result on stdout, no progress; `run -q` would print each step's route in podium, where
    Conductor's `--quiet` prints its lifecycle)."""
    paths = [
        Cmd("help", lambda exe, f: [exe, "--help"]),
        Cmd("validate article", lambda exe, f: [exe, "validate", str(f["article"])]),
        Cmd(f"validate linear-{BIG}", lambda exe, f: [exe, "validate", str(f[f"linear-{BIG}"])]),
        Cmd("run two-step", lambda exe, f: [exe, "--silent", "run", str(f["two-step"])]),
    ]
    paths += [Cmd(f"run set-{n}",
                    lambda exe, f, n=n: [exe, "--silent", "run", str(f[f"set-{n}"])])
              for n in SET_STEPS]
    paths += [Cmd(f"run script-{n}",
                    lambda exe, f, n=n: [exe, "--silent", "run", str(f[f"script-{n}"])])
              for n in SCRIPT_STEPS]
    return _pick(paths, names)


def _pick(paths: list[Cmd], names: Sequence[str] | None) -> list[Cmd]:
    if names is None:
        return paths
    by = {p.label: p for p in paths}
    unknown = [n for n in names if n not in by]
    if unknown:
        raise SystemExit(f"unknown path(s) {unknown}; known: {sorted(by)}")
    return [by[n] for n in names]


@dataclass
class Samples:
    """Wall times (ms) of one tool per path label."""

    ms: dict[str, list[float]] = field(default_factory=dict)

    def add(self, label: str, value_ms: float) -> None:
        self.ms.setdefault(label, []).append(value_ms)

    def median(self, label: str) -> float | None:
        got = self.ms.get(label)
        return statistics.median(got) if got else None

    def slopes(self) -> dict[str, float]:
        """Per-step cost (ms) of each loop measured at both lengths: the slope of medians."""
        out: dict[str, float] = {}
        for kind, (lo, hi) in (("set", SET_STEPS), ("script", SCRIPT_STEPS)):
            a, b = self.median(f"run {kind}-{lo}"), self.median(f"run {kind}-{hi}")
            if a is not None and b is not None:
                out[f"per {kind} step"] = (b - a) / (hi - lo)
        return out
