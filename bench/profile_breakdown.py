"""Where the time goes: measured breakdowns behind the figures of bench_cli.py and
bench_engine.py (the input for optimisation work).

Sections (each measured, none estimated):
  1. cold `podium validate <article>` and `podium run <2-step>`: whole process vs interpreter
     start, imports and work. "Work" is measured in a fresh child that first imports every module
     the command loads, then runs the command in-process through typer, with timers wrapped
     around podium's phases (first call = what a real process pays; second call = steady).
     Imports = whole process - interpreter - first-call work; the import split by package is
     `-X importtime` self time (median of 5).
  2. `validate` phases in-process (steady state, best of 3) for the article and the generated
     50/200/800-step files, plus how often templates are parsed.
  3. Experiment: memoising `TemplateEngine.parse`/`parse_expression` (monkeypatched here, src/
     untouched) - the saving on validate.
  4. cProfile of validate (800 steps): self time by package and top functions.
  5. cProfile of `podium run -q` in-process on a 490-iteration set loop: self time by package,
     and per-step cumulative time of podium's functions.
  6-8. pydantic model construction, interpreter teardown, compiling podium's own modules.
  9. Experiment: the console script's start-up settings (podium.cli.entry), each taken away
     in turn, and podium's bytecode missing (interleaved whole-process runs).

Usage:
    .venv/bin/python bench/profile_breakdown.py [--runs 11]

Prints Markdown; writes bench/results/breakdown.json.
"""

from __future__ import annotations

import sys
import time
from typing import Any

_T0 = time.perf_counter()

# --------------------------------------------------------------------------- child mode
# `profile_breakdown.py --child MODULES_FILE -- podium-args...`: import every module listed,
# then run the podium command in-process (twice) with phase timers; print JSON on stdout.

PHASES: list[tuple[str, str, str]] = [  # (label, module, attribute path)
    ("typer: build the click command tree (get_command)", "typer.main", "get_command"),
    ("validate_file", "podium.check.validate", "validate_file"),
    ("load_workflow (YAML + model)", "podium.language.load", "load_workflow"),
    ("load_document (read + YAML compose + env)", "podium.language.load", "load_document"),
    ("Checker.__init__ (route graph)", "podium.check.semantic", "Checker.__post_init__"),
    ("collect_refs (AST walks)", "podium.check.references", "collect_refs"),
    ("run: load_valid (validation)", "podium.cli.run_cmd", "load_valid"),
    ("run: parse_inputs", "podium.cli.run_cmd", "parse_inputs"),
    ("run: open_store (SQLite)", "podium.cli.launch", "open_store"),
    ("run: make_engine", "podium.cli.launch", "make_engine"),
    ("run: Engine.run", "podium.engine.run", "Engine.run"),
    ("run: report + summary", "podium.cli.launch", "report"),
    ("run: store.create_run", "podium.store.sqlite", "SQLiteStore.create_run"),
    ("run: store.close", "podium.store.sqlite", "SQLiteStore.close"),
]


_MISSING = object()


def _undo(undo: list[tuple[Any, str, Any]]) -> None:
    for owner, name, original in reversed(undo):
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


def _install_timers(acc: dict[str, float]) -> list[tuple[Any, str, Any]]:
    """Wrap podium's phase functions with timers accumulating into `acc`; returns what to
    restore."""
    import functools
    import importlib

    def wrap(label: str, fn):  # type: ignore[no-untyped-def]
        @functools.wraps(fn)
        def timed(*a, **k):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                acc[label] = acc.get(label, 0.0) + time.perf_counter() - t
        return timed

    undo: list[tuple[Any, str, Any]] = []
    for label, modname, attr in PHASES:
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        owner_name, _, name = attr.rpartition(".")
        owner = getattr(mod, owner_name, None) if owner_name else mod
        original = getattr(owner, name, None) if owner is not None else None
        if original is None:
            continue
        timed = wrap(label, original)
        if not owner_name:  # the module's own name, and every `from module import` copy
            undo.append((mod, name, original))
            setattr(mod, name, timed)
            for m in list(sys.modules.values()):
                if m is mod:
                    continue
                if getattr(m, "__name__", "").startswith("podium") and \
                        getattr(m, name, None) is original:
                    setattr(m, name, timed)
                    undo.append((m, name, original))
        else:
            undo.append((owner, name, owner.__dict__.get(name, _MISSING)))
            setattr(owner, name, timed)
    # every check_* method of the Checker (defined on it or on its mixins)
    try:
        checker = importlib.import_module("podium.check.semantic").Checker
    except (ImportError, AttributeError):
        return undo
    for name in dir(checker):
        if name.startswith("check_") and callable(getattr(checker, name)):
            undo.append((checker, name, checker.__dict__.get(name, _MISSING)))
            setattr(checker, name, wrap(f"Checker.{name}", getattr(checker, name)))
    return undo


def _child(modules_file: str, args: list[str]) -> None:
    import contextlib
    import gc
    import importlib
    import io
    import json

    from podium.cli.entry import skip_pydantic_plugins

    t_start = time.perf_counter()
    gc.disable()  # as the console script does until the command's code is imported
    skip_pydantic_plugins()
    with open(modules_file, encoding="utf-8") as fh:
        names = fh.read().split()
    for name in names:
        if name in sys.modules:
            continue
        with contextlib.suppress(Exception):  # a module that cannot load alone is skipped
            importlib.import_module(name)
    from podium.cli.entry import ready
    from podium.cli.process import command_app

    ready()
    t_imported = time.perf_counter()

    out: dict[str, Any] = {"preimport_ms": (t_imported - t_start) * 1000, "calls": []}
    timers: dict[str, float] = {}
    _install_timers(timers)
    for _ in range(2):
        timers.clear()
        buf = io.StringIO()
        t = time.perf_counter()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                code = command_app(args)(args, standalone_mode=False)
            except SystemExit as exc:
                code = exc.code
        total = time.perf_counter() - t
        out["calls"].append({"total_ms": total * 1000, "exit": code,
                             "phases_ms": {k: v * 1000 for k, v in timers.items()}})
    print(json.dumps(out))


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "--child":
    _child(sys.argv[2], sys.argv[4:])
    raise SystemExit(0)

if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--child-models":
    # pydantic import, its lazy internals (first model), then podium's model modules, with a
    # timer around every model class construction
    import json

    t0 = time.perf_counter()
    import pydantic
    t1 = time.perf_counter()

    class _Warm(pydantic.BaseModel):
        x: int = 0
        y: list[str] | None = None

    _Warm.model_validate({"x": 1})
    t2 = time.perf_counter()
    from pydantic._internal import _model_construction as _mc

    _orig_new = _mc.ModelMetaclass.__new__
    _classes: list[tuple[str, str, float]] = []

    def _timed_new(mcs, name, bases, ns, **kw):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        cls = _orig_new(mcs, name, bases, ns, **kw)
        _classes.append((ns.get("__module__", "?"), name, time.perf_counter() - t))
        return cls

    _mc.ModelMetaclass.__new__ = _timed_new  # type: ignore[method-assign]
    modules = {}
    for mod in ("podium.language.model", "podium.events.model"):
        t = time.perf_counter()
        __import__(mod)
        modules[mod] = (time.perf_counter() - t) * 1000
    print(json.dumps({"pydantic_import_ms": (t1 - t0) * 1000,
                      "pydantic_first_model_ms": (t2 - t1) * 1000, "modules_ms": modules,
                      "classes": [[m, n, d * 1000] for m, n, d in _classes]}))
    raise SystemExit(0)

if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "--child-import-only":
    # import the listed modules; with --exit, leave through os._exit (no interpreter teardown)
    import contextlib
    import importlib
    import os

    with open(sys.argv[2], encoding="utf-8") as _fh:
        _names = _fh.read().split()
    for _name in _names:
        with contextlib.suppress(Exception):
            importlib.import_module(_name)
    if "--exit" in sys.argv:
        sys.stdout.flush()
        os._exit(0)
    if "--freeze" in sys.argv:
        import gc

        gc.freeze()  # the final collections skip everything allocated so far
    raise SystemExit(0)

if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "--list-modules":
    # run the command in-process, then print every module it loaded
    import contextlib
    import io

    from podium.cli.entry import skip_pydantic_plugins

    skip_pydantic_plugins()  # as the console script does
    from podium.cli.process import command_app

    with (contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()),
          contextlib.suppress(SystemExit)):
        command_app(sys.argv[3:])(sys.argv[3:], standalone_mode=False)
    print("\n".join(n for n in sys.modules if not n.startswith("__")))
    raise SystemExit(0)

# --------------------------------------------------------------------------- parent mode

import argparse  # noqa: E402
import contextlib  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    PODIUM,
    PYTHON,
    REPO,
    eprint,
    importtime,
    machine_info,
    md_table,
    run_child,
    wait_for_quiet,
    write_json,
)
from bench_engine import TWO_STEP_YAML, set_loop_yaml  # noqa: E402
from gen_workflows import generate  # noqa: E402

ARTICLE = "examples/dev-review/workflow.yaml"
SELF = str(Path(__file__).resolve())


def package_of(filename: str) -> str:
    if "/site-packages/" in filename:
        rest = filename.split("/site-packages/", 1)[1]
        return rest.split("/", 1)[0].removesuffix(".py")
    if "/src/podium/" in filename:
        sub = filename.split("/src/podium/", 1)[1].split("/", 1)
        return "podium." + (sub[0] if len(sub) > 1 else sub[0].removesuffix(".py"))
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins/C"
    return "stdlib:" + Path(filename).stem


def profile_by_package(stats: pstats.Stats, top: int = 20) -> tuple[list[list[Any]],
                                                                     list[list[Any]], float]:
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    by_pkg: dict[str, float] = {}
    funcs = []
    for (filename, line, fn), (_cc, nc, tt, ct, _callers) in raw.items():
        pkg = package_of(filename)
        by_pkg[pkg] = by_pkg.get(pkg, 0.0) + tt
        funcs.append((tt, ct, nc, f"{pkg}:{fn}:{line}"))
    pkgs = [[k, round(v * 1000, 1), round(100 * v / total, 1)]
            for k, v in sorted(by_pkg.items(), key=lambda kv: -kv[1])[:top]]
    funcs.sort(reverse=True)
    fns = [[name, round(tt * 1000, 1), round(ct * 1000, 1), nc]
           for tt, ct, nc, name in funcs[:top]]
    return pkgs, fns, total


def import_split(argv: list[str], repeats: int = 5) -> dict[str, float]:
    samples: dict[str, list[int]] = {}
    for _ in range(repeats):
        for name, self_us, _cum in importtime(argv):
            samples.setdefault(name.strip(), []).append(self_us)
    pk: dict[str, float] = {}
    for name, v in samples.items():
        top = name.split(".")[0]
        if top == "podium":
            top = ".".join(name.split(".")[:3])  # podium.language.model etc.
        pk[top] = pk.get(top, 0.0) + statistics.median(v) / 1000
    return dict(sorted(pk.items(), key=lambda kv: -kv[1]))


def cold_breakdown(label: str, podium_args: list[str], runs: int, tmp: Path,
                   env: dict[str, str]) -> dict[str, Any]:
    """Whole process vs interpreter vs imports vs work for one podium command."""
    listing = subprocess.run([PYTHON, SELF, "--list-modules", "--", *podium_args], cwd=REPO,
                             env=env, capture_output=True, text=True, check=True).stdout
    mods = tmp / f"modules-{label}.txt"
    mods.write_text(listing, encoding="utf-8")
    whole, bare, children = [], [], []
    for i in range(runs + 1):  # interleaved; the first round is a warmup
        w = run_child([PODIUM, *podium_args], env=env)
        b = run_child([PYTHON, "-c", "pass"], env=env)
        c = subprocess.run([PYTHON, SELF, "--child", str(mods), "--", *podium_args], cwd=REPO,
                           env=env, capture_output=True, text=True, check=True)
        if i:
            whole.append(w.wall_s * 1000)
            bare.append(b.wall_s * 1000)
            children.append(json.loads(c.stdout))
    first = [c["calls"][0] for c in children]
    second = [c["calls"][1] for c in children]
    phase_names = sorted({k for c in first for k in c["phases_ms"]})
    phases = {k: round(statistics.median(c["phases_ms"].get(k, 0.0) for c in first), 2)
              for k in phase_names}
    steady = {k: round(statistics.median(c["phases_ms"].get(k, 0.0) for c in second), 2)
              for k in phase_names}
    w_med, b_med = statistics.median(whole), statistics.median(bare)
    work_first = statistics.median(c["total_ms"] for c in first)
    work_steady = statistics.median(c["total_ms"] for c in second)
    return {
        "command": f"podium {' '.join(podium_args)}",
        "whole_process_median_ms": round(w_med, 1),
        "interpreter_start_exit_ms": round(b_med, 1),
        "work_first_call_ms": round(work_first, 1),
        "work_steady_ms": round(work_steady, 1),
        "imports_derived_ms": round(w_med - b_med - work_first, 1),
        "modules_loaded": len(listing.split()),
        "phases_first_call_ms": phases,
        "phases_steady_ms": steady,
        "import_self_ms_by_package": {k: round(v, 2) for k, v in list(
            import_split(["-m", "podium", *podium_args]).items())[:20]},
    }


def validate_phases(paths: dict[str, Path]) -> dict[str, Any]:
    """In-process, steady state: best of 3 per phase (timers wrapped around podium's own
    functions) and template parse counts."""
    import podium.check.validate as cv
    from podium.templating import TemplateEngine

    acc: dict[str, float] = {}
    undo = _install_timers(acc)
    counts = {"parse": 0, "parse_expression": 0}
    sources: set[tuple[str, str]] = set()
    orig_parse, orig_expr = TemplateEngine.parse, TemplateEngine.parse_expression

    def counting(kind: str, fn):  # type: ignore[no-untyped-def]
        def inner(self, source):  # type: ignore[no-untyped-def]
            counts[kind] += 1
            sources.add((kind, source))
            t = time.perf_counter()
            try:
                return fn(self, source)
            finally:
                acc["TemplateEngine.parse*"] = acc.get("TemplateEngine.parse*", 0.0) + \
                    time.perf_counter() - t
        return inner

    TemplateEngine.parse = counting("parse", orig_parse)  # type: ignore[method-assign]
    TemplateEngine.parse_expression = counting(  # type: ignore[method-assign]
        "parse_expression", orig_expr)
    out: dict[str, Any] = {}
    try:
        for label, path in paths.items():
            cv.validate_file(path)  # warm
            best: dict[str, float] | None = None
            for _ in range(3):
                acc.clear()
                counts.update(parse=0, parse_expression=0)
                sources.clear()
                cv.validate_file(path)
                if best is None or acc["validate_file"] < best["validate_file"]:
                    best = dict(acc)
                    calls = dict(counts)
                    unique = len(sources)
            assert best is not None
            out[label] = {"phases_ms": {k: round(v * 1000, 2) for k, v in
                                        sorted(best.items(), key=lambda kv: -kv[1])},
                          "template_parse_calls": calls, "unique_template_sources": unique}
    finally:
        TemplateEngine.parse = orig_parse  # type: ignore[method-assign]
        TemplateEngine.parse_expression = orig_expr  # type: ignore[method-assign]
        _undo(undo)
    return out


def memo_experiment(paths: dict[str, Path]) -> dict[str, Any]:
    """validate_file best-of-5 as is, then with parse/parse_expression memoised per engine."""
    import podium.check.validate as cv
    from podium.templating import TemplateEngine

    def best(path: Path) -> float:
        cv.validate_file(path)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            cv.validate_file(path)
            times.append(time.perf_counter() - t)
        return min(times) * 1000

    orig_parse, orig_expr = TemplateEngine.parse, TemplateEngine.parse_expression

    def memo(fn):  # type: ignore[no-untyped-def]
        def inner(self, source):  # type: ignore[no-untyped-def]
            cache = self.__dict__.setdefault("_bench_ast_cache", {})
            key = (fn.__name__, source)
            if key not in cache:
                cache[key] = fn(self, source)
            return cache[key]
        return inner

    import podium.check.references as refs_mod

    orig_refs = refs_mod.collect_refs
    holders = [m for m in list(sys.modules.values())
               if getattr(m, "__name__", "").startswith("podium")
               and getattr(m, "collect_refs", None) is orig_refs]
    refs_cache: dict[int, tuple[Any, Any]] = {}

    def memo_refs(tree: Any) -> Any:
        hit = refs_cache.get(id(tree))
        if hit is None or hit[0] is not tree:
            hit = (tree, orig_refs(tree))
            refs_cache[id(tree)] = hit
        refs, used = hit[1]
        return list(refs), list(used)

    out = {}
    for label, path in paths.items():
        base = best(path)
        TemplateEngine.parse = memo(orig_parse)  # type: ignore[method-assign]
        TemplateEngine.parse_expression = memo(orig_expr)  # type: ignore[method-assign]
        try:
            memoised = best(path)
            for m in holders:
                m.collect_refs = memo_refs
            both = best(path)
        finally:
            TemplateEngine.parse = orig_parse  # type: ignore[method-assign]
            TemplateEngine.parse_expression = orig_expr  # type: ignore[method-assign]
            for m in holders:
                m.collect_refs = orig_refs
            refs_cache.clear()
        out[label] = {"as_is_ms": round(base, 2), "memoised_ms": round(memoised, 2),
                      "saving_ms": round(base - memoised, 2),
                      "saving_pct": round(100 * (base - memoised) / base, 1),
                      "parse_and_refs_memoised_ms": round(both, 2),
                      "saving_both_ms": round(base - both, 2),
                      "saving_both_pct": round(100 * (base - both) / base, 1)}
    return out


def profile_validate(path: Path) -> dict[str, Any]:
    import podium.check.validate as cv

    cv.validate_file(path)
    prof = cProfile.Profile()
    prof.enable()
    cv.validate_file(path)
    prof.disable()
    pkgs, fns, total = profile_by_package(pstats.Stats(prof))
    return {"profiled_total_ms": round(total * 1000, 1), "by_package": pkgs, "top_self": fns}


def profile_run(path: Path, iterations: int) -> dict[str, Any]:
    from podium.cli.run_cmd import RunRequest, run_command

    def once() -> None:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            code = run_command(RunRequest(path, verbosity=0))
        assert code == 0, buf.getvalue()[-2000:]

    once()
    prof = cProfile.Profile()
    prof.enable()
    once()
    prof.disable()
    stats = pstats.Stats(prof)
    pkgs, fns, total = profile_by_package(stats)
    per_step = []
    for (filename, line, fn), (_cc, nc, _tt, ct, _c) in stats.stats.items():  # type: ignore[attr-defined]
        if "/src/podium/" in filename and nc >= iterations:
            per_step.append((ct, f"{package_of(filename)}:{fn}:{line}", nc))
    per_step.sort(reverse=True)
    return {"profiled_total_ms": round(total * 1000, 1), "by_package": pkgs, "top_self": fns,
            "podium_cumulative_per_step_us": [[n, round(ct * 1e6 / iterations, 1), nc]
                                              for ct, n, nc in per_step[:20]]}


def model_construction(repeats: int = 5) -> dict[str, Any]:
    """Median over fresh children of pydantic import, first model, and podium's model
    modules' import (almost all of it is model class construction), per class."""
    samples = []
    for _ in range(repeats):
        c = subprocess.run([PYTHON, SELF, "--child-models"], cwd=REPO, capture_output=True,
                           text=True, check=True)
        samples.append(json.loads(c.stdout))
    per_class: dict[tuple[str, str], list[float]] = {}
    for smp in samples:
        for m, n, d in smp["classes"]:
            per_class.setdefault((m, n), []).append(d)
    med = {k: statistics.median(v) for k, v in per_class.items()}
    by_module: dict[str, float] = {}
    counts: dict[str, int] = {}
    for (m, _n), d in med.items():
        by_module[m] = by_module.get(m, 0.0) + d
        counts[m] = counts.get(m, 0) + 1
    return {
        "pydantic_import_ms": round(statistics.median(s["pydantic_import_ms"] for s in samples), 2),
        "pydantic_first_model_ms": round(statistics.median(
            s["pydantic_first_model_ms"] for s in samples), 2),
        "module_import_ms": {m: round(statistics.median(s["modules_ms"][m] for s in samples), 2)
                             for m in samples[0]["modules_ms"]},
        "class_construction_ms": {m: round(v, 2) for m, v in by_module.items()},
        "classes": counts,
        "top_classes_ms": [[f"{m}.{n}", round(d, 2)] for (m, n), d in
                           sorted(med.items(), key=lambda kv: -kv[1])[:12]],
    }


def compile_cost(modules_file: Path) -> dict[str, Any]:
    """What compiling podium's own modules costs a process that has no bytecode for them
    (editable install + PYTHONDONTWRITEBYTECODE=1): compile() of each podium module the
    command loads, best of 3, summed."""
    import importlib.util

    names = [n for n in modules_file.read_text(encoding="utf-8").split()
             if n == "podium" or n.startswith("podium.")]
    total = 0.0
    files = 0
    per: list[tuple[float, str]] = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        source = Path(spec.origin).read_bytes()
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            compile(source, spec.origin, "exec", dont_inherit=True)
            best = min(best, time.perf_counter() - t)
        total += best
        files += 1
        per.append((best, name))
    per.sort(reverse=True)
    return {"modules": files, "total_ms": round(total * 1000, 2),
            "top_ms": [[n, round(t * 1000, 2)] for t, n in per[:8]]}


def teardown_experiment(modules_file: Path, runs: int, env: dict[str, str]) -> dict[str, Any]:
    """Import validate's modules, then exit normally, after gc.freeze(), or through os._exit
    (interleaved)."""
    normal, frozen, fast = [], [], []
    base = [PYTHON, SELF, "--child-import-only", str(modules_file)]
    for i in range(runs + 1):
        a = run_child(base, env=env)
        b = run_child([*base, "--exit"], env=env)
        c = run_child([*base, "--freeze"], env=env)
        if i:
            normal.append(a.wall_s * 1000)
            fast.append(b.wall_s * 1000)
            frozen.append(c.wall_s * 1000)
    n, f, z = (statistics.median(x) for x in (normal, fast, frozen))
    return {"normal_exit_median_ms": round(n, 1), "os_exit_median_ms": round(f, 1),
            "gc_freeze_exit_median_ms": round(z, 1), "teardown_ms": round(n - f, 1),
            "teardown_with_gc_freeze_ms": round(z - f, 1)}


def run_step_timers(path: Path, iterations: int) -> dict[str, Any]:
    """`podium run -q` in-process on the set loop with timers (no profiler) around the engine's
    per-step parts and each event sink; best of 3, microseconds per step."""
    import functools
    import importlib

    from podium.cli.run_cmd import RunRequest

    acc: dict[str, float] = {}
    targets = [("EventBus.emit (all sinks)", "podium.events.bus", "EventBus", "emit"),
               ("ConsoleSink.handle", "podium.events.sinks.console", "ConsoleSink", "handle"),
               ("SQLiteStore.handle (event rows)", "podium.store.sqlite", "SQLiteStore",
                "handle"),
               ("SQLiteStore.committed (checkpoint)", "podium.store.sqlite", "SQLiteStore",
                "committed"),
               ("Engine._execute", "podium.engine.run", "Engine", "_execute"),
               ("Engine._route", "podium.engine.run", "Engine", "_route"),
               ("Engine.run", "podium.engine.run", "Engine", "run"),
               ("run_command", "podium.cli.run_cmd", None, "run_command")]
    restore = []
    for label, modname, clsname, attr in targets:
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        owner = getattr(mod, clsname, None) if clsname else mod
        fn = getattr(owner, attr, None) if owner is not None else None
        if fn is None:
            continue

        def make(label: str, fn: Any) -> Any:
            @functools.wraps(fn)
            def timed(*a: Any, **k: Any) -> Any:
                t = time.perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    acc[label] = acc.get(label, 0.0) + time.perf_counter() - t
            return timed

        setattr(owner, attr, make(label, fn))
        restore.append((owner, attr, fn))
    run = sys.modules["podium.cli.run_cmd"].run_command
    best: dict[str, float] | None = None
    try:
        for _ in range(4):
            acc.clear()
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                code = run(RunRequest(path, verbosity=0))
            assert code == 0, buf.getvalue()[-2000:]
            if best is None or acc["Engine.run"] < best["Engine.run"]:
                best = dict(acc)
    finally:
        for owner, attr, fn in restore:
            setattr(owner, attr, fn)
    assert best is not None
    return {k: round(v * 1e6 / iterations, 1) for k, v in
            sorted(best.items(), key=lambda kv: -kv[1])}


# What the console script (podium.cli.entry) does for start-up, one setting taken away at a
# time; every variant runs `podium validate <article>` in a fresh process.
_STARTUP = (
    "import gc, sys\n"
    "sys.argv[0] = 'podium'\n"
    "{gc}"
    "{plugins}"
    "from podium.cli import main as m, process as p\n"
    "app = p.command_app(sys.argv[1:]) if {single} else m.app\n"
    "try:\n"
    "    app()\n"
    "finally:\n"
    "    gc.freeze()\n")
_SETTINGS = {  # variant -> (collector off during start-up, no plugin lookup, one command's tree)
    "as shipped (podium.cli.entry)": (True, True, True),
    "collector on during start-up": (False, True, True),
    "pydantic looks up its plugins": (True, False, True),
    "typer builds every command's parser": (True, True, False),
    "none of the three": (False, False, False),
}


def startup_experiment(runs: int, env: dict[str, str], scratch: Path) -> dict[str, Any]:
    """Each start-up setting's share, interleaved: the shipped entry code, then the same with
    one setting taken away, then with none; plus the shipped code run from a copy of podium's
    source without bytecode (PYTHONDONTWRITEBYTECODE=1), which is what
    scripts/bootstrap.sh's compileall spares."""
    import importlib.util
    import shutil

    spec = importlib.util.find_spec("podium")
    assert spec is not None
    assert spec.origin is not None
    bare = scratch / "podium-without-bytecode"
    shutil.copytree(Path(spec.origin).parent, bare / "podium",
                    ignore=shutil.ignore_patterns("__pycache__"))
    variants: dict[str, tuple[list[str], dict[str, str]]] = {}
    for name, (gc_off, no_plugins, single) in _SETTINGS.items():
        code = _STARTUP.format(
            gc="gc.disable()\n" if gc_off else "",
            plugins=("from podium.cli.entry import skip_pydantic_plugins\n"
                     "skip_pydantic_plugins()\n") if no_plugins else "",
            single=single)
        variants[name] = ([PYTHON, "-c", code, "validate", ARTICLE], env)
    shipped = variants["as shipped (podium.cli.entry)"][0]
    path = os.pathsep.join(p for p in (str(bare), env.get("PYTHONPATH", "")) if p)
    variants["as shipped, podium's bytecode missing"] = (
        shipped, {**env, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": path})
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for i in range(runs + 2):  # two warmup rounds
        for name, (argv, e) in variants.items():
            r = run_child(argv, env=e)
            if r.returncode != 0:
                raise SystemExit(f"start-up experiment, {name}: exit {r.returncode}")
            if i >= 2:
                samples[name].append(r.wall_s * 1000)
    base = statistics.median(samples["as shipped (podium.cli.entry)"])
    return {name: {"median_ms": round(statistics.median(v), 1), "min_ms": round(min(v), 1),
                   "cost_vs_shipped_ms": round(statistics.median(v) - base, 1)}
            for name, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description="Measured time breakdowns")
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="podium-bench-breakdown-"))
    os.environ["PODIUM_HOME"] = str(tmp / "home")
    env = dict(os.environ)
    gen = dict(zip((50, 200, 800), generate(tmp / "workflows", (50, 200, 800)), strict=True))
    two = tmp / "two-step.yaml"
    two.write_text(TWO_STEP_YAML, encoding="utf-8")
    loop = tmp / "set-loop-490.yaml"
    loop.write_text(set_loop_yaml(490), encoding="utf-8")
    files = {"article": REPO / ARTICLE, **{f"linear-{n}": p for n, p in gen.items()}}

    res: dict[str, Any] = {"machine": machine_info()}
    eprint("1. cold breakdowns")
    wait_for_quiet()
    res["cold"] = {
        "validate": cold_breakdown("validate", ["validate", ARTICLE], args.runs, tmp, env),
        "run": cold_breakdown("run", ["run", str(two), "--input", "who=bench", "-q"],
                              args.runs, tmp, env),
    }
    eprint("2. validate phases")
    wait_for_quiet()
    res["validate_phases"] = validate_phases(files)
    eprint("2b. validate beyond 800 steps")
    wait_for_quiet()
    big = dict(zip((400, 1600, 3200),
                   generate(tmp / "workflows-big", (400, 1600, 3200)), strict=True))
    big[800] = gen[800]
    res["validate_scaling"] = validate_phases({f"linear-{n}": big[n] for n in sorted(big)})
    eprint("3. memo experiment")
    res["memo_experiment"] = memo_experiment(files)
    eprint("4. cProfile validate")
    res["profile_validate_800"] = profile_validate(gen[800])
    res["profile_validate_article"] = profile_validate(REPO / ARTICLE)
    eprint("5. cProfile run")
    res["profile_run_set_loop_490"] = profile_run(loop, 490)
    eprint("6. run per-step timers")
    res["run_step_timers_us"] = run_step_timers(loop, 490)
    eprint("7. pydantic model construction")
    wait_for_quiet()
    res["model_construction"] = model_construction()
    eprint("8. interpreter teardown")
    wait_for_quiet()
    res["teardown"] = teardown_experiment(tmp / "modules-validate.txt", args.runs, env)
    wait_for_quiet()
    res["compile_podium_modules"] = {
        key: compile_cost(tmp / f"modules-{key}.txt") for key in ("validate", "run")}
    eprint("9. start-up settings")
    wait_for_quiet()
    res["startup_experiment"] = startup_experiment(args.runs, env, tmp)
    res["elapsed_s"] = round(time.perf_counter() - started, 1)
    out = write_json("breakdown.json", res)

    # ------------------------------------------------------------------ report
    print("## Where the time goes\n")
    for c in res["cold"].values():
        print(f"### Cold `{c['command'].replace(str(tmp) + '/', '')}`\n")
        print(md_table(["part", "ms"], [
            ["whole process (median)", c["whole_process_median_ms"]],
            ["interpreter start + exit (`python -c pass`)", c["interpreter_start_exit_ms"]],
            ["imports (whole - interpreter - first-call work)", c["imports_derived_ms"]],
            ["work, first call (all modules pre-imported)", c["work_first_call_ms"]],
            ["work, second call in the same process", c["work_steady_ms"]],
        ]))
        print(f"\nModules loaded: {c['modules_loaded']}. Phases of the first call (ms): "
              + ", ".join(f"{k} {v}" for k, v in sorted(c["phases_first_call_ms"].items(),
                                                        key=lambda kv: -kv[1]) if v))
        print("\nImport self time by package (-X importtime, ms, median of 5): "
              + ", ".join(f"{k} {v}" for k, v in c["import_self_ms_by_package"].items()))
        print()
    print("### validate phases in-process (steady, best of 3, ms)\n")
    labels = list(files)
    keys: list[str] = []
    for lab in labels:
        for k in res["validate_phases"][lab]["phases_ms"]:
            if k not in keys:
                keys.append(k)
    print(md_table(["phase", *labels], [[k, *[res["validate_phases"][lab]["phases_ms"].get(k, "")
                                              for lab in labels]] for k in keys]
                   + [["template parse calls / unique sources",
                       *[f"{sum(res['validate_phases'][lab]['template_parse_calls'].values())}"
                         f" / {res['validate_phases'][lab]['unique_template_sources']}"
                         for lab in labels]]]))
    print("\n### validate beyond 800 steps (in-process, steady, best of 3, ms)\n")
    sc = res["validate_scaling"]
    sizes = list(sc)
    rows = []
    for k in ("validate_file", "Checker.check_templates", "TemplateEngine.parse*",
              "collect_refs (AST walks)", "Checker.check_output_paths",
              "load_workflow (YAML + model)", "load_document (read + YAML compose + env)"):
        rows.append([k, *[sc[f]["phases_ms"].get(k, "") for f in sizes]])
    rows.append(["validate_file per step", *[
        round(sc[f]["phases_ms"]["validate_file"] / int(f.split("-")[1]), 3) for f in sizes]])
    print(md_table(["phase", *sizes], rows))
    print("\n### Experiment: memoise TemplateEngine.parse (validate, best of 5, ms)\n")
    print(md_table(["file", "as is", "parse memoised", "saving", "%",
                    "parse + collect_refs memoised", "saving", "%"],
                   [[k, v["as_is_ms"], v["memoised_ms"], v["saving_ms"], v["saving_pct"],
                     v["parse_and_refs_memoised_ms"], v["saving_both_ms"], v["saving_both_pct"]]
                    for k, v in res["memo_experiment"].items()]))
    for key, title in (("profile_validate_800", "cProfile: validate linear-800"),
                       ("profile_validate_article", "cProfile: validate the article"),
                       ("profile_run_set_loop_490",
                        "cProfile: `podium run -q` in-process, set loop x490")):
        p = res[key]
        print(f"\n### {title} (profiled total {p['profiled_total_ms']} ms; cProfile inflates "
              "absolute times, use the shares)\n")
        print(md_table(["package (self time)", "ms", "%"], p["by_package"][:12]))
        print()
        print(md_table(["function", "self ms", "cumulative ms", "calls"], p["top_self"][:15]))
        if "podium_cumulative_per_step_us" in p:
            print()
            print(md_table(["podium function (cumulative)", "µs per step (profiled)", "calls"],
                           p["podium_cumulative_per_step_us"][:15]))
    print("\n### `podium run -q` in-process, set loop x490: timers per step (µs, best of 3; "
          "nested, not additive)\n")
    print(md_table(["part", "µs per step"], [[k, v] for k, v in
                                             res["run_step_timers_us"].items()]))
    mc = res["model_construction"]
    print("\n### pydantic: import and model class construction (fresh children, median of 5)\n")
    rows = [["import pydantic", mc["pydantic_import_ms"]],
            ["first model class + validation (pydantic's lazy internals)",
             mc["pydantic_first_model_ms"]]]
    for m, v in mc["module_import_ms"].items():
        rows.append([f"import {m} ({mc['classes'].get(m, 0)} classes; construction "
                     f"{mc['class_construction_ms'].get(m, 0)} ms)", v])
    print(md_table(["what", "ms"], rows))
    print("\nCostliest classes (ms): " + ", ".join(f"{n} {d}" for n, d in
                                                   mc["top_classes_ms"]))
    t = res["teardown"]
    print(f"\n### Interpreter teardown (validate's {res['cold']['validate']['modules_loaded']} "
          f"modules imported, then exit; {args.runs} interleaved runs)\n")
    print(f"normal exit {t['normal_exit_median_ms']} ms, os._exit {t['os_exit_median_ms']} ms: "
          f"teardown {t['teardown_ms']} ms; with gc.freeze() before a normal exit "
          f"{t['gc_freeze_exit_median_ms']} ms (teardown {t['teardown_with_gc_freeze_ms']} ms)")
    print("\n### Compiling podium's own modules (what a process without their bytecode "
          "pays)\n")
    for key, cc in res["compile_podium_modules"].items():
        print(f"- {key}: {cc['modules']} podium modules, compile() total {cc['total_ms']} ms "
              "(largest: " + ", ".join(f"{n} {v}" for n, v in cc["top_ms"][:4]) + ")")
    print(f"\n### Experiment: the console script's start-up settings (podium validate "
          f"article, {args.runs} interleaved runs of each)\n")
    print(md_table(["variant", "median ms", "min ms", "cost vs as shipped (median) ms"],
                   [[k, v["median_ms"], v["min_ms"], v["cost_vs_shipped_ms"]]
                    for k, v in res["startup_experiment"].items()]))
    print(f"\nJSON: {out.relative_to(REPO)} · elapsed {res['elapsed_s']} s")


if __name__ == "__main__":
    main()
