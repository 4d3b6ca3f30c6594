"""Template rendering on the normal path: what the render bounds cost (src/podium/templating).

Renders, in one process, with a realistic context of a dev-review run in its third iteration
(a 200 KB diff, 20 review findings, test output):
  article   - every template of examples/dev-review/workflow.yaml once (21 templates);
  loop20    - a loop over the 20 findings with two filters per item;
  loop10k   - a 10,000-iteration loop printing a number;
  condition - a `{{ }}` route condition;
and, for the bounds themselves, the whole hostile corpus (tests/corpus/hostile_templates.yaml):
the slowest case and the process's peak RSS.

`--baseline FILE` also times a templating module loaded from FILE (e.g. the one before the
bounds: `git show 597b2ba:src/podium/templating.py > /tmp/old_templating.py`), interleaved
with the current one; each figure is the best of --repeats batches of --number renders.

Usage:
    .venv/bin/python bench/bench_templates.py [--baseline FILE] [--repeats 15] [--number 300]

Prints a Markdown report on stdout; writes bench/results/templates.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, machine_info, md_table, write_json
from podium.templating import RenderFailure, TemplateEngine


def article_templates() -> list[str]:
    wf = YAML(typ="safe").load((REPO / "examples/dev-review/workflow.yaml").read_text())
    found: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str) and ("{{" in v or "{%" in v):
            found.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(wf)
    return found


def context() -> dict[str, Any]:
    diff = "".join(f"+ line {i} of the change, some code here\n" for i in range(5000))
    findings = [{"file": f"src/m{i}.py", "line": i, "severity": "major",
                 "text": "fix this " * 5} for i in range(20)]
    return {
        "workflow": {"input": {"ticket": "T-42.md", "repo_dir": "/repo"}, "dir": "/wf",
                     "name": "dev-review", "file": "/wf/workflow.yaml", "description": ""},
        "context": {"iteration": 3, "history": ["validate_ticket", "developer", "run_tests"]},
        "validate_ticket": {"output": {"valid": True, "reason": "ok", "complexity": "small",
                                       "acceptance_criteria": "It works. " * 50}},
        "developer": {"output": {"summary": "Did it. " * 40, "files_changed": ["a", "b"]}},
        "run_tests": {"output": {"exit_code": 1, "stdout": "F" * 2000, "stderr": ""}},
        "collect_diff": {"output": {"diff": diff, "truncated": False}},
        "review_count": {"output": 2},
        "handoff_summary": {"output": {"result": "All good. " * 30}},
        "reviewer": {"output": {"verdict": "changes", "findings": findings}},
    }


LOOP20 = ("{% for f in reviewer.output.findings %}- {{ f.file }}:{{ f.line }} "
          "[{{ f.severity | upper }}] {{ f.text | trim }}\n{% endfor %}")
LOOP10K = "{% for i in range(10000) %}{{ i }},{% endfor %}"
CONDITION = "{{ validate_ticket.output.valid and run_tests.output.exit_code == 1 }}"


def best(fn: Callable[[], Any], number: int) -> float:
    started = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - started) / number


def cases(engine: Any, ctx: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    texts = article_templates()
    return {
        "article (21 templates)": lambda: [engine.render(t, ctx) for t in texts],
        "loop20": lambda: engine.render(LOOP20, ctx),
        "loop10k": lambda: engine.render(LOOP10K, ctx),
        "condition": lambda: engine.render(CONDITION, ctx),
    }


def load_baseline(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("baseline_templating", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.TemplateEngine()


def corpus() -> dict[str, Any]:
    entries = YAML(typ="safe").load((REPO / "tests/corpus/hostile_templates.yaml").read_text())
    slowest, kinds = (0.0, ""), {}
    for e in entries:
        head, body, times, tail = e.get("unroll") or ("", e["template"], 1, "")
        source = head + body * times + tail
        engine = TemplateEngine()
        engine.compile(source)
        started = time.monotonic()
        try:
            engine.render(source, {"big": "x" * 1_000_000, "items": list(range(1000)),
                                   "x": {"a": 1}, "workflow": {"input": {"title": "t"}}})
            kind = "rendered"
        except RenderFailure as exc:
            kind = f"{exc.kind}/{exc.limit}" if exc.limit else exc.kind
        elapsed = time.monotonic() - started
        kinds[kind] = kinds.get(kind, 0) + 1
        slowest = max(slowest, (elapsed, e["attack"]))
    return {"cases": len(entries), "outcomes": kinds, "slowest_s": round(slowest[0], 3),
            "slowest": slowest[1],
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--number", type=int, default=300)
    args = parser.parse_args()
    ctx = context()
    engines = {"bounded": TemplateEngine()}
    if args.baseline:
        engines = {"before": load_baseline(args.baseline), **engines}
    table = {name: cases(engine, ctx) for name, engine in engines.items()}
    results: dict[str, dict[str, float]] = {name: {} for name in engines}
    for case in table["bounded"]:
        number = max(1, args.number // (100 if case == "loop10k" else 1))
        for name in engines:
            table[name][case]()  # compile and warm
        for _ in range(args.repeats):  # interleaved: load changes hit both alike
            for name in engines:
                t = best(table[name][case], number)
                results[name][case] = min(results[name].get(case, t), t)
    rows = []
    for case in table["bounded"]:
        row = [case] + [f"{results[n][case] * 1e6:.1f} µs" for n in engines]
        if "before" in engines:
            row.append(f"{(results['bounded'][case] / results['before'][case] - 1) * 100:+.0f}%")
        rows.append(row)
    headers = ["render", *engines] + (["change"] if "before" in engines else [])
    print(md_table(headers, rows))
    hostile = corpus()
    print(f"\nhostile corpus: {hostile['cases']} templates, outcomes {hostile['outcomes']}, "
          f"slowest {hostile['slowest_s']} s ({hostile['slowest']}), "
          f"peak RSS {hostile['peak_rss_mib']} MiB")
    write_json("templates.json", {"machine": machine_info(), "normal_path_s": results,
                             "hostile": hostile})


if __name__ == "__main__":
    main()
