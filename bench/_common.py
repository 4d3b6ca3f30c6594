"""Shared helpers for the benchmark scripts: child timing with per-child peak RSS, statistics,
machine description, Markdown tables and JSON results. Standard library only."""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
RESULTS = BENCH / "results"
VENV_BIN = REPO / ".venv" / "bin"
PYTHON = str(VENV_BIN / "python")
PODIUM = str(VENV_BIN / "podium")


@dataclass
class ChildRun:
    wall_s: float
    maxrss_kib: int
    returncode: int
    cpu_s: float = 0.0  # the child's user + system CPU time (wait4), steadier than wall on a busy machine


def run_child(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              cwd: Path = REPO, stdout: int | None = subprocess.DEVNULL,
              stderr: int | None = subprocess.DEVNULL) -> ChildRun:
    """Run one fresh child process; wall time from spawn to reap, and that child's own peak
    RSS from wait4() (ru_maxrss, KiB on Linux)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(argv), env=dict(env) if env is not None else None, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, tell Popen
    return ChildRun(wall, int(usage.ru_maxrss), proc.returncode,
                    usage.ru_utime + usage.ru_stime)


@dataclass
class Series:
    """Repeated cold runs of one command."""

    label: str
    argv: list[str]
    runs: list[ChildRun] = field(default_factory=list)
    expect_rc: int = 0
    cpu_busy_before: float = 0.0

    @property
    def walls_ms(self) -> list[float]:
        return [r.wall_s * 1000 for r in self.runs]

    @property
    def rss_mib(self) -> list[float]:
        return [r.maxrss_kib / 1024 for r in self.runs]

    def summary(self) -> dict[str, Any]:
        w = self.walls_ms
        m = self.rss_mib
        return {
            "label": self.label, "argv": self.argv, "runs": len(w),
            "median_ms": round(statistics.median(w), 2), "min_ms": round(min(w), 2),
            "max_ms": round(max(w), 2),
            "stdev_ms": round(statistics.stdev(w), 2) if len(w) > 1 else 0.0,
            "rss_median_mib": round(statistics.median(m), 2), "rss_max_mib": round(max(m), 2),
            "samples_ms": [round(x, 3) for x in w],
            "samples_rss_kib": [r.maxrss_kib for r in self.runs],
            "cpu_busy_before": self.cpu_busy_before,
        }


def measure(label: str, argv: Sequence[str], *, runs: int, warmups: int = 2,
            env: Mapping[str, str] | None = None, expect_rc: int = 0) -> Series:
    series = Series(label, list(argv), expect_rc=expect_rc)
    series.cpu_busy_before = wait_for_quiet()
    for _ in range(warmups):
        first = run_child(argv, env=env)
        if first.returncode != expect_rc:
            out = subprocess.run(list(argv), env=dict(env) if env else None, cwd=REPO,
                                 capture_output=True, text=True, check=False)
            raise SystemExit(f"{label}: exit code {first.returncode}, expected {expect_rc}\n"
                             f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
    for _ in range(runs):
        r = run_child(argv, env=env)
        if r.returncode != expect_rc:
            raise SystemExit(f"{label}: exit code {r.returncode}, expected {expect_rc}")
        series.runs.append(r)
    return series


def measure_interleaved(label: str, variants: Mapping[str, tuple[Sequence[str],
                                                                  Mapping[str, str]]],
                        *, runs: int, warmups: int = 2) -> dict[str, Series]:
    """A/B(/C) comparison: the variants run in turn, so a drift in machine load hits all."""
    out = {name: Series(f"{label} [{name}]", list(argv)) for name, (argv, _) in variants.items()}
    busy = wait_for_quiet()
    for s in out.values():
        s.cpu_busy_before = busy
    for i in range(warmups + runs):
        for name, (argv, env) in variants.items():
            r = run_child(argv, env=env)
            if r.returncode != 0:
                raise SystemExit(f"{label} [{name}]: exit code {r.returncode}")
            if i >= warmups:
                out[name].runs.append(r)
    return out


REFERENCE_LOOP = ("import time\nt = time.process_time()\nx = 0\nfor i in range(2_000_000):\n"
                  "    x += i\nprint(time.process_time() - t)")


def reference_loop_ms(repeats: int = 3) -> float:
    """This machine's speed as one number: the CPU time of a fixed pure-Python loop (2,000,000
    additions) in a fresh interpreter, best of `repeats`. CPU figures measured on two
    machines compare after scaling by the ratio of their reference loops."""
    best = min(float(subprocess.run([PYTHON, "-c", REFERENCE_LOOP], capture_output=True,
                                    text=True, check=True).stdout) for _ in range(repeats))
    return best * 1000


def machine_info() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        m = re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())
        mem = int(m.group(1)) // 1024 if m else None
    except OSError:
        pass
    venv_py = subprocess.run([PYTHON, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True, check=False).stdout.strip()
    podium_file = subprocess.run([PYTHON, "-c", "import podium; print(podium.__file__)"],
                                 capture_output=True, text=True, check=False).stdout.strip()
    return {
        "nproc": os.cpu_count(), "cpu_model": cpu, "mem_total_mib": mem,
        "podium_imported_from": podium_file, "PYTHONPATH": os.environ.get("PYTHONPATH"),
        "podium_bytecode": podium_bytecode_status(),
        "kernel": platform.release(), "python": venv_py, "python_executable": PYTHON,
        "loadavg": os.getloadavg(), "reference_loop_ms": reference_loop_ms(),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "git": git_info(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


_BYTECODE_PROBE = """
import importlib.util, json, os, podium
root = os.path.dirname(podium.__file__)
total = fresh = 0
for folder, _, names in os.walk(root):
    for n in names:
        if n.endswith(".py"):
            src = os.path.join(folder, n)
            pyc = importlib.util.cache_from_source(src)
            total += 1
            fresh += os.path.exists(pyc) and os.path.getmtime(pyc) >= os.path.getmtime(src)
print(json.dumps({"podium_py_files": total, "with_fresh_bytecode": fresh}))
"""


def podium_bytecode_status(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """How many of podium's source files have up-to-date bytecode where the interpreter looks
    for it: without it, every process compiles them (PYTHONDONTWRITEBYTECODE=1 stops it from
    saving the result)."""
    out = subprocess.run([PYTHON, "-c", _BYTECODE_PROBE], capture_output=True, text=True,
                         check=False, env=dict(env) if env is not None else None).stdout
    try:
        return dict(json.loads(out))
    except ValueError:
        return {}


def git_info() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              check=False).stdout.strip()

    return {"head": git("rev-parse", "--short", "HEAD"),
            "dirty": [line[3:] for line in git("status", "--porcelain").splitlines()
                      if line[3:].startswith("src/")]}


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps(payload, indent=2, default=_default) + "\n", encoding="utf-8")
    return path


def _default(o: Any) -> Any:
    if hasattr(o, "__dataclass_fields__"):
        return asdict(o)
    if isinstance(o, Path):
        return str(o)
    return str(o)


def bytecode_env(prefix: Path) -> dict[str, str]:
    """The environment with a private, writable bytecode cache. podium is installed editable
    and this machine sets PYTHONDONTWRITEBYTECODE=1: when src/ has no up-to-date
    __pycache__, every process compiles podium's modules from source. Comparing against this
    variant (after one warm-up fills the cache) shows that cost; the prefix is outside the
    repository, nothing under src/ is written."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    return env


def importtime(argv_after_python: Sequence[str], *, env: Mapping[str, str] | None = None,
               ) -> list[tuple[str, int, int]]:
    """Run `python -X importtime ...` once; [(module, self_us, cumulative_us)] in load order."""
    proc = subprocess.run([PYTHON, "-X", "importtime", *argv_after_python], cwd=REPO,
                          env=dict(env) if env is not None else None,
                          capture_output=True, text=True, check=False)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, self_us, cum_us, name = (p.strip() for p in
                                    line.replace("import time:", "|", 1).split("|"))
        rows.append((name, int(self_us), int(cum_us)))
    return rows


def cpu_busy(interval: float = 0.5) -> float:
    """Fraction of all CPUs busy over `interval` seconds (from /proc/stat)."""
    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return idle, sum(fields)

    i0, t0 = sample()
    time.sleep(interval)
    i1, t1 = sample()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_for_quiet(max_wait: float = 90.0, threshold: float = 0.15) -> float:
    """Wait (up to max_wait s) until other processes leave the CPUs mostly idle, so that
    concurrent work (a test suite, a build) does not end up in the figures. Returns the last
    busy fraction seen; callers record it."""
    if os.environ.get("PODIUM_BENCH_NO_WAIT"):
        return round(cpu_busy(0.2), 3)
    deadline = time.monotonic() + max_wait
    busy = cpu_busy()
    warned = False
    while busy > threshold and time.monotonic() < deadline:
        if not warned:
            eprint(f"  waiting for a quiet machine (CPU {busy:.0%} busy)...")
            warned = True
        busy = cpu_busy(1.0)
    if busy > threshold:
        eprint(f"  warning: machine still {busy:.0%} busy; figures may be disturbed")
    return round(busy, 3)


def eprint(*args: Any) -> None:
    print(*args, file=sys.stderr, flush=True)
