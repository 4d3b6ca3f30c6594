"""Does the run store's size show in a run? A 2-step `podium run` on an empty store against the
same run on a ~300 MB store made of ordinary runs (some with multi-megabyte outputs), and the
cost of each step that writes a large output, on both stores.

    .venv/bin/python bench/bench_store_growth.py [--work DIR] [--size-mb 300] [--runs 15]
                                                 [--big-runs 9] [--rebuild] [--quick]

The big store is built once and kept in --work (default: $TMPDIR/podium-bench-store-growth),
then reused while the current podium writes the same schema:
  1. seeds: real `podium run` processes of small offline workflows (set steps, loops, script
     steps printing small JSON, a failed run, and script steps printing 1, 2 and 4 MB of JSON)
     on an empty PODIUM_HOME, so the schema and the rows are the current podium's own;
  2. growth: the seeds' rows copied inside SQLite under new random run ids (INSERT ... SELECT,
     columns read from the live schema with PRAGMA table_info, every table keyed by `run_id`,
     or the runs table's `id`), in a shuffled order, until the file reaches the size asked.
The copies have no `runs/<id>/events.jsonl` of their own (only the seeds do); nothing reads
another run's log during a run.

Each invocation works on its own copy of that store (the cached one stays as built), and
measures, interleaved run by run:
  (a) a 2-step `podium run` (a set step, then a terminate step; the cold CLI, a new process per
      sample) on a near-empty store (the schema and the runs of this series) and on the big
      one: median, min, and the difference (target: within 20 ms);
  (b) a run of three script steps printing 1, 2 and 4 MB of JSON, then a set step: per step,
      from the run's own event log, the interval from its step_started to the next step's (the
      step, then the commit of its events and checkpoint), the step's own `elapsed` (the child,
      and the script_output event written as it arrives), and their difference (the commit).
      Each sample's run is deleted again (generic SQL, as the copies are made) so neither store
      grows over the series;
  (c) diagnostics in-process with plain sqlite3 (no podium API): one large event row of the
      live `events` table inserted and committed (as podium's store writes it: WAL,
      synchronous=NORMAL, a transaction per write), per row size, on both stores; and
      `PRAGMA quick_check` of each store (what `open_store(verify=True)` runs before a run);
  (d) the large-output run in a child process with a timer on each SQL statement the store
      writes (a private method, SQLiteStore._write: skipped, and said so, when it is gone).

Writes bench/results/store_growth.json (store_growth_quick.json with --quick). While the working
tree is being edited, measure a fixed revision as bench/README.md says (`git archive HEAD src`,
PYTHONPATH): every child, the store build's included, imports podium from there.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    PODIUM,
    PYTHON,
    REPO,
    eprint,
    machine_info,
    md_table,
    measure_interleaved,
    run_child,
    wait_for_quiet,
    write_json,
)

TARGET_MS = 20.0
BUILD_FORMAT = 1  # bump when the seeds or the copy method change: cached stores are rebuilt
MB = 1_000_000

# --------------------------------------------------------------------------- workflows

EMIT_PY = """\
import json, sys
# stdout: one JSON object; its "blob" makes it about SIZE bytes (ordinary text, not one char)
size, kind = int(sys.argv[1]), sys.argv[2]
line = "%s: the quick brown fox jumps over the lazy dog; 0123456789 abcdefghij\\n" % kind
blob = (line * (size // len(line) + 1))[:size]
files = ["src/mod_%03d.py" % i for i in range(12)]
print(json.dumps({"kind": kind, "size": size, "ok": kind != "fail", "files": files,
                  "blob": blob}))
"""

TWO_STEP_YAML = """\
workflow:
  name: two-step
  description: A set step, then a terminate step
  entry_point: greet
  input:
    who:
      type: string
      required: true
agents:
  - name: greet
    type: set
    value: "hello {{ workflow.input.who }}"
    routes:
      - to: finish
  - name: finish
    type: terminate
    status: success
    reason: "done: {{ greet.output }}"
output:
  greeting: "{{ greet.output }}"
"""


def _script(name: str, size: int, kind: str, to: str, emit: Path) -> str:
    return f"""\
  - name: {name}
    type: script
    command: {PYTHON}
    args: ["{emit}", "{size}", "{kind}"]
    routes:
      - to: {to}
"""


def seed_workflows(emit: Path) -> dict[str, tuple[str, list[str], int]]:
    """name -> (yaml, extra argv, expected exit code): the ordinary runs the store is made of."""
    count = """\
workflow:
  name: count-20
  description: A set step counting to 20
  entry_point: count
  limits: {max_iterations: 50}
agents:
  - name: count
    type: set
    value: "{{ (count.output if count is defined else 0) + 1 }}"
    output_type: integer
    routes:
      - {to: $end, when: "{{ count.output >= 20 }}"}
      - {to: count}
output:
  count: "{{ count.output }}"
"""
    checks = ("workflow:\n  name: checks\n  description: Three checks printing JSON\n"
              "  entry_point: lint\nagents:\n"
              + _script("lint", 1500, "lint", "tests", emit)
              + _script("tests", 3000, "tests", "summary", emit)
              + _script("summary", 800, "summary", "decide", emit)
              + """\
  - name: decide
    type: set
    value: "{{ lint.output.ok and tests.output.ok }}"
    output_type: boolean
    routes:
      - {to: $end, when: "{{ decide.output }}"}
      - {to: rejected}
  - name: rejected
    type: terminate
    status: failed
    reason: checks failed
output:
  ok: "{{ decide.output }}"
""")
    failing = ("workflow:\n  name: checks-fail\n  description: A check that fails\n"
               "  entry_point: lint\nagents:\n"
               + _script("lint", 2000, "fail", "decide", emit)
               + """\
  - name: decide
    type: set
    value: "{{ lint.output.ok }}"
    output_type: boolean
    routes:
      - {to: $end, when: "{{ decide.output }}"}
      - {to: rejected}
  - name: rejected
    type: terminate
    status: failed
    reason: "lint failed"
output:
  ok: "{{ decide.output }}"
""")
    report2 = ("workflow:\n  name: report-2mb\n  description: A script printing 2 MB of JSON\n"
               "  entry_point: collect\nagents:\n"
               + _script("collect", 2 * MB, "report", "size", emit)
               + """\
  - name: size
    type: set
    value: "{{ collect.output.size }}"
    output_type: integer
    routes:
      - to: $end
output:
  size: "{{ size.output }}"
""")
    report41 = ("workflow:\n  name: report-4mb\n  description: Scripts printing 4 and 1 MB\n"
                "  entry_point: collect\nagents:\n"
                + _script("collect", 4 * MB, "report", "digest", emit)
                + _script("digest", 1 * MB, "digest", "$end", emit)
                + 'output:\n  size: "{{ digest.output.size }}"\n')
    return {
        "two-step": (TWO_STEP_YAML, ["--input", "who=seed"], 0),
        "count-20": (count, [], 0),
        "checks": (checks, [], 0),
        "checks-fail": (failing, [], 1),
        "report-2mb": (report2, [], 0),
        "report-4mb": (report41, [], 0),
    }


BIG_STEPS = (("out1", 1 * MB), ("out2", 2 * MB), ("out4", 4 * MB))


def big_output_yaml(emit: Path) -> str:
    """Three script steps printing 1, 2 and 4 MB of JSON, then a set step (so that the last big
    step's commit, too, lies between two step_started events)."""
    names = [n for n, _ in BIG_STEPS] + ["done"]
    body = "".join(_script(n, size, "out", names[i + 1], emit)
                   for i, (n, size) in enumerate(BIG_STEPS))
    return ("workflow:\n  name: big-outputs\n  description: Steps printing 1-4 MB of JSON\n"
            "  entry_point: out1\nagents:\n" + body + """\
  - name: done
    type: set
    value: "{{ out4.output.size }}"
    output_type: integer
    routes:
      - to: $end
output:
  size: "{{ done.output }}"
""")


# --------------------------------------------------------------------------- store helpers


def connect(db: Path) -> sqlite3.Connection:
    con = sqlite3.connect(str(db), isolation_level=None)
    con.execute("PRAGMA busy_timeout=10000")
    con.execute("PRAGMA synchronous=NORMAL")  # as podium's store
    return con


def schema_of(db: Path) -> dict[str, Any]:
    """The store's schema as podium made it: user_version and every object's SQL."""
    con = connect(db)
    try:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        objects = sorted((t, n, " ".join((s or "").split())) for t, n, s in con.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))
    finally:
        con.close()
    return {"user_version": version, "objects": [list(o) for o in objects]}


def keyed_tables(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], list[str]]:
    """Every table holding rows of a run, read from the live schema: (table, key column, the
    columns to copy (all but an INTEGER PRIMARY KEY of its own), its TEXT columns); and the
    tables that are not keyed by a run (not copied)."""
    tables, skipped = [], []
    for name, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                                 "AND name NOT LIKE 'sqlite_%' ORDER BY name").fetchall():
        if (sql or "").upper().startswith("CREATE VIRTUAL"):
            skipped.append(name)
            continue
        info = con.execute(f'PRAGMA table_info("{name}")').fetchall()
        cols = {r[1]: (str(r[2] or "").upper(), r[5]) for r in info}
        if "run_id" in cols:
            key = "run_id"
        elif "id" in cols and (name == "runs" or "INT" not in cols["id"][0]):
            key = "id"
        else:
            skipped.append(name)
            continue
        pks = [c for c, (_, pk) in cols.items() if pk]
        own_rowid = [c for c in pks if len(pks) == 1 and cols[c][0] == "INTEGER" and c != key]
        copy = [c for c in cols if c not in own_rowid]
        text = [c for c in copy if c != key and "TEXT" in cols[c][0]]
        tables.append({"table": name, "key": key, "columns": copy, "text_columns": text})
    if not any(t["table"] == "runs" and t["key"] == "id" for t in tables):
        raise SystemExit("the store has no `runs` table with an `id` column: this benchmark "
                         "does not know how to find its runs; update keyed_tables()")
    return tables, skipped


def copy_sql(t: dict[str, Any]) -> str:
    """INSERT ... SELECT of one run's rows under a new id (:new), the old id (:old) replaced in
    its TEXT columns too (the events' bodies name their run)."""
    exprs = []
    for c in t["columns"]:
        if c == t["key"]:
            exprs.append(":new")
        elif c in t["text_columns"]:
            exprs.append(f'replace("{c}", :old, :new)')
        else:
            exprs.append(f'"{c}"')
    cols = ", ".join(f'"{c}"' for c in t["columns"])
    return (f'INSERT INTO "{t["table"]}" ({cols}) SELECT {", ".join(exprs)} '
            f'FROM "{t["table"]}" WHERE "{t["key"]}" = :old')


def run_bytes(con: sqlite3.Connection, tables: list[dict[str, Any]], run_id: str) -> int:
    total = 0
    for t in tables:
        expr = " + ".join(f'coalesce(length(CAST("{c}" AS BLOB)), 0)' for c in t["columns"])
        total += con.execute(f'SELECT coalesce(sum({expr}), 0) FROM "{t["table"]}" '
                             f'WHERE "{t["key"]}" = ?', (run_id,)).fetchone()[0]
    return int(total)


def delete_runs(db: Path, run_ids: list[str]) -> None:
    """Delete these runs' rows from every table keyed by a run (the generic inverse of a copy)."""
    if not run_ids:
        return
    con = connect(db)
    try:
        tables, _ = keyed_tables(con)
        marks = ", ".join("?" * len(run_ids))
        con.execute("BEGIN IMMEDIATE")
        for t in tables:
            con.execute(f'DELETE FROM "{t["table"]}" WHERE "{t["key"]}" IN ({marks})', run_ids)
        con.execute("COMMIT")
    finally:
        con.close()


def file_size(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.exists())


# --------------------------------------------------------------------------- building


def run_podium(argv: list[str], home: Path, expect: int, what: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PODIUM_HOME=str(home))
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False)
    if proc.returncode != expect:
        raise SystemExit(f"{what}: `{' '.join(argv)}` exited {proc.returncode}, expected "
                         f"{expect}\n--- stdout\n{proc.stdout[-2000:]}\n--- stderr\n"
                         f"{proc.stderr[-3000:]}")
    return proc


def write_flows(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    emit = folder / "emit.py"
    emit.write_text(EMIT_PY, encoding="utf-8")
    files = {}
    for name, (text, _, _) in seed_workflows(emit).items():
        files[name] = folder / f"seed-{name}.yaml"
        files[name].write_text(text, encoding="utf-8")
    files["two"] = folder / "two-step.yaml"
    files["two"].write_text(TWO_STEP_YAML, encoding="utf-8")
    files["big"] = folder / "big-outputs.yaml"
    files["big"].write_text(big_output_yaml(emit), encoding="utf-8")
    return files


def build_store(dest: Path, size_mb: int, schema: dict[str, Any],
                seeds_per_flow: int) -> dict[str, Any]:
    """Seeds by real `podium run`, then copies inside SQLite up to size_mb; the finished store
    is renamed into `dest` (a failed build leaves no cached store behind)."""
    t0 = time.perf_counter()
    tmp = dest.with_name(dest.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    home = tmp / "home"
    home.mkdir(parents=True)
    flows = write_flows(tmp / "flows")
    seeds = seed_workflows(flows["two"].parent / "emit.py")
    eprint(f"building a {size_mb} MB store in {dest} (seeds: {len(seeds)} workflows × "
           f"{seeds_per_flow} runs)")
    for _ in range(seeds_per_flow):
        for name, (_, extra, rc) in seeds.items():
            run_podium([PODIUM, "run", str(flows[name]), "-q", *extra], home, rc,
                       f"store build, seed {name}")
    t_seeds = time.perf_counter() - t0
    db = home / "podium.db"
    if not db.exists():
        raise SystemExit(f"store build: the seed runs left no store at {db}")
    built_schema = schema_of(db)
    if built_schema != schema:
        raise SystemExit("store build: the seeds' store has another schema than a fresh "
                         "podium run's (is podium being edited right now?)")

    con = connect(db)
    try:
        con.execute("PRAGMA synchronous=OFF")  # the build only; not persistent
        con.execute("PRAGMA cache_size=-131072")
        tables, skipped = keyed_tables(con)
        if skipped:
            eprint(f"  warning: tables with no run_id/id column are not copied: {skipped}")
        seed_rows = con.execute("SELECT id, workflow_name FROM runs").fetchall()
        if len(seed_rows) != len(seeds) * seeds_per_flow:
            raise SystemExit(f"store build: {len(seed_rows)} seed runs in the store, "
                             f"expected {len(seeds) * seeds_per_flow}")
        seed_size = {rid: run_bytes(con, tables, rid) for rid, _ in seed_rows}
        big = [rid for rid, _ in seed_rows if seed_size[rid] >= MB]
        small = [rid for rid, _ in seed_rows if seed_size[rid] < MB]
        if not big or not small:
            raise SystemExit(f"store build: expected seeds with and without large outputs, "
                             f"got sizes {sorted(seed_size.values())}")
        target = size_mb * MB
        # ~35 % of the bytes in many small runs, the rest in runs with large outputs (the
        # seeds included); each seed of a group copied to an equal share of its group's bytes
        plan: list[str] = []
        for group, share in ((small, 0.35), (big, 0.65)):
            room = target * share - sum(seed_size[rid] for rid in group)
            for rid in group:
                plan += [rid] * max(0, round(room / len(group) / seed_size[rid]))
        rng = random.Random(20240601)
        rng.shuffle(plan)
        known = {rid for rid, _ in seed_rows}
        copies = 0

        def copy_batch(batch: list[str]) -> None:
            nonlocal copies
            statements = [copy_sql(t) for t in tables]
            con.execute("BEGIN")
            for old in batch:
                new = secrets.token_hex(6)
                while new in known:
                    new = secrets.token_hex(6)
                known.add(new)
                for sql in statements:
                    con.execute(sql, {"old": old, "new": new})
                copies += 1
            con.execute("COMMIT")

        batch: list[str] = []
        pending = 0
        for rid in plan:
            batch.append(rid)
            pending += seed_size[rid]
            if pending >= 40 * MB:
                copy_batch(batch)
                eprint(f"  {copies}/{len(plan)} copies, {file_size(db) / MB:.0f} MB")
                batch, pending = [], 0
        if batch:
            copy_batch(batch)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        while file_size(db) < 0.98 * target:  # top up with runs of large outputs
            copy_batch([rng.choice(big)])
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        stats = {
            "runs": con.execute("SELECT count(*) FROM runs").fetchone()[0],
            "rows": {t["table"]: con.execute(f'SELECT count(*) FROM "{t["table"]}"').fetchone()[0]
                     for t in tables},
            "page_size": con.execute("PRAGMA page_size").fetchone()[0],
            "page_count": con.execute("PRAGMA page_count").fetchone()[0],
            "freelist_count": con.execute("PRAGMA freelist_count").fetchone()[0],
        }
    finally:
        con.close()
    if file_size(db) < 0.9 * target:
        raise SystemExit(f"store build: only {file_size(db) / MB:.0f} MB after copying")
    if file_size(db) > 1.25 * target:
        eprint(f"  note: the seeds alone make {file_size(db) / MB:.0f} MB, more than the "
               f"{size_mb} MB asked")
    manifest = {
        "format": BUILD_FORMAT, "size_mb_asked": size_mb, "seeds_per_flow": seeds_per_flow,
        "bytes": file_size(db),
        "schema": schema, "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git_head": machine_info()["git"]["head"],
        "seconds": {"seeds": round(t_seeds, 1), "total": round(time.perf_counter() - t0, 1)},
        "seed_runs": len(seed_rows), "copies": copies,
        "seed_bytes": {f"{wf} {rid}": seed_size[rid] for rid, wf in seed_rows},
        "seed_ids": [rid for rid, _ in seed_rows],
        "tables_copied": {t["table"]: t["key"] for t in tables}, "tables_not_copied": skipped,
        **stats,
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    eprint(f"  built: {manifest['bytes'] / MB:.0f} MB, {stats['runs']} runs, in "
           f"{manifest['seconds']['total']} s (seeds {manifest['seconds']['seeds']} s)")
    return manifest


def cached_store(dest: Path, size_mb: int, schema: dict[str, Any], rebuild: bool,
                 seeds_per_flow: int) -> tuple[dict[str, Any], bool]:
    manifest_path = dest / "manifest.json"
    why = "--rebuild" if rebuild else None
    if why is None:
        if not manifest_path.exists() or not (dest / "home" / "podium.db").exists():
            why = "no cached store"
        else:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            if manifest.get("format") != BUILD_FORMAT:
                why = "the cached store was built by another version of this benchmark"
            elif manifest.get("schema") != schema:
                why = "the current podium writes another schema than the cached store's"
            elif (manifest.get("size_mb_asked"), manifest.get("seeds_per_flow")) != \
                    (size_mb, seeds_per_flow):
                why = "another size or number of seeds"
            elif file_size(dest / "home" / "podium.db") != manifest.get("bytes"):
                why = "the cached store was modified"
            else:
                eprint(f"reusing the cached {size_mb} MB store in {dest}")
                return manifest, False
    eprint(f"building the store ({why})")
    return build_store(dest, size_mb, schema, seeds_per_flow), True


# --------------------------------------------------------------------------- measuring


def new_run_dir(home: Path, before: set[str]) -> str:
    now = {p.name for p in (home / "runs").iterdir()} if (home / "runs").exists() else set()
    fresh = sorted(now - before)
    if len(fresh) != 1:
        raise SystemExit(f"expected one new run folder in {home / 'runs'}, found {fresh}")
    return fresh[0]


def step_times(log: Path) -> dict[str, Any]:
    """From a run's JSONL log: per step, step_started -> next step_started (ms), the step's own
    elapsed (ms), and the run's elapsed."""
    starts: list[tuple[str, float]] = []
    elapsed: dict[str, float] = {}
    run_elapsed = None
    with log.open(encoding="utf-8") as fh:
        for line in fh:
            head = line[:200]
            if '"step_started"' not in head and '"step_finished"' not in head and \
                    '"run_finished"' not in head:
                continue
            ev = json.loads(line)
            if ev["type"] == "step_started":
                starts.append((ev["step"], ev["ts"]))
            elif ev["type"] == "step_finished":
                elapsed[ev["step"]] = ev["elapsed"]
            else:
                run_elapsed = ev.get("elapsed")
    out: dict[str, Any] = {"run_elapsed_ms": run_elapsed * 1000 if run_elapsed else None,
                           "steps": {}}
    for (step, ts), (_, nxt) in pairwise(starts):
        interval = (nxt - ts) * 1000
        own = elapsed.get(step, 0.0) * 1000
        out["steps"][step] = {"interval_ms": interval, "elapsed_ms": own,
                              "commit_ms": interval - own}
    return out


def measure_big_outputs(flow: Path, homes: dict[str, Path], runs: int,
                        warmups: int) -> dict[str, Any]:
    """The large-output run on each store, interleaved; each sample's run deleted afterwards."""
    samples: dict[str, list[dict[str, Any]]] = {k: [] for k in homes}
    busy = wait_for_quiet()
    for i in range(warmups + runs):
        for name, home in homes.items():
            runs_dir = home / "runs"
            before = {p.name for p in runs_dir.iterdir()} if runs_dir.exists() else set()
            env = dict(os.environ, PODIUM_HOME=str(home))
            child = run_child([PODIUM, "run", str(flow), "-q"], env=env)
            if child.returncode != 0:
                run_podium([PODIUM, "run", str(flow), "-q"], home, 0, f"large outputs [{name}]")
                raise SystemExit(f"large outputs [{name}]: exit code {child.returncode}")
            rid = new_run_dir(home, before)
            times = step_times(runs_dir / rid / "events.jsonl")
            delete_runs(home / "podium.db", [rid])
            shutil.rmtree(runs_dir / rid, ignore_errors=True)
            if i >= warmups:
                times["wall_ms"] = child.wall_s * 1000
                samples[name].append(times)
    out: dict[str, Any] = {"runs": runs, "cpu_busy_before": busy, "stores": {}}
    for name, rows in samples.items():
        per_step = {}
        for step, _ in BIG_STEPS:
            per_step[step] = {
                k: {"median": round(statistics.median(r["steps"][step][k] for r in rows), 2),
                    "min": round(min(r["steps"][step][k] for r in rows), 2)}
                for k in ("interval_ms", "elapsed_ms", "commit_ms")}
        out["stores"][name] = {
            "wall_ms": {"median": round(statistics.median(r["wall_ms"] for r in rows), 1),
                        "min": round(min(r["wall_ms"] for r in rows), 1)},
            "run_elapsed_ms": {"median": round(statistics.median(
                r["run_elapsed_ms"] for r in rows), 1)},
            "steps": per_step, "samples": rows,
        }
    return out


def insert_probe(dbs: dict[str, Path], seed_ids: list[str], repeats: int) -> dict[str, Any]:
    """One large row of the live `events` table (taken from the seed runs, which the big store
    keeps under their own ids) inserted under a new run id and committed, per row size, on each
    store, interleaved; the rows deleted after."""
    rows_by_size: dict[int, dict[str, Any]] = {}
    con = connect(dbs["empty"])
    try:
        tables, _ = keyed_tables(con)
    finally:
        con.close()
    ev = next((t for t in tables if t["table"] == "events"), None)
    if ev is None:
        return {"skipped": "no `events` table keyed by run_id in this schema"}
    con = connect(dbs["big"])
    try:
        size_expr = " + ".join(f'coalesce(length(CAST("{c}" AS BLOB)), 0)'
                               for c in ev["columns"])
        cols = ", ".join(f'"{c}"' for c in ev["columns"])
        marks = ", ".join("?" * len(seed_ids))
        for want in (1, 2, 4, 8):  # the seeds' script_output / step_finished rows
            row = con.execute(f"SELECT {cols}, {size_expr} AS n FROM events "
                              f"WHERE run_id IN ({marks}) ORDER BY abs({size_expr} - ?) "
                              "LIMIT 1", (*seed_ids, want * MB)).fetchone()
            if row is None:
                return {"skipped": "no event rows of the seed runs in the big store"}
            rows_by_size.setdefault(int(row[-1]), dict(zip(ev["columns"], row[:-1],
                                                          strict=True)))
    finally:
        con.close()
    sql = (f'INSERT INTO events ({", ".join(chr(34) + c + chr(34) for c in ev["columns"])}) '
           f'VALUES ({", ".join("?" * len(ev["columns"]))})')
    times: dict[str, dict[int, list[float]]] = {k: {n: [] for n in rows_by_size} for k in dbs}
    added: dict[str, list[str]] = {k: [] for k in dbs}
    cons = {k: connect(p) for k, p in dbs.items()}
    busy = wait_for_quiet()
    try:
        for i in range(repeats + 1):
            for n, row in sorted(rows_by_size.items()):
                for k, c in cons.items():
                    rid = secrets.token_hex(6)
                    values = [rid if col == "run_id" else row[col] for col in ev["columns"]]
                    t = time.perf_counter()
                    c.execute("BEGIN")
                    c.execute(sql, values)
                    c.execute("COMMIT")
                    dt = (time.perf_counter() - t) * 1000
                    added[k].append(rid)
                    if i:  # the first round warms the caches
                        times[k][n].append(dt)
    finally:
        for c in cons.values():
            c.close()
    for k, p in dbs.items():
        delete_runs(p, added[k])
    return {"repeats": repeats, "cpu_busy_before": busy,
            "row_types": {n: r.get("type") for n, r in rows_by_size.items()},
            "ms": {k: {n: {"median": round(statistics.median(v), 3),
                           "mean": round(statistics.mean(v), 3), "min": round(min(v), 3)}
                       for n, v in per.items()} for k, per in times.items()}}


STATEMENT_TIMERS_PY = """\
# One `podium run` in this process, with a timer on each SQL statement the run store writes
# (podium.store.sqlite.SQLiteStore._write, a private method: when it is gone, say so).
import collections, json, sys, time
out, flow = sys.argv[1], sys.argv[2]
try:
    from podium.store.sqlite import SQLiteStore
    orig = SQLiteStore._write
except (ImportError, AttributeError) as exc:
    json.dump({"skipped": f"no SQLiteStore._write to time ({exc})"}, open(out, "w"))
    sys.exit(0)
stats = collections.defaultdict(lambda: [0, 0.0, 0])
def _write(self, sql, params):
    t = time.perf_counter()
    try:
        return orig(self, sql, params)
    finally:
        s = stats[" ".join(sql.split()[:3])]
        s[0] += 1
        s[1] += time.perf_counter() - t
        s[2] += sum(len(v) for v in params if isinstance(v, (str, bytes)))
SQLiteStore._write = _write
from podium.cli.entry import main
sys.argv = ["podium", "run", flow, "-q"]
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
json.dump({"exit_code": code, "statements": {k: {"count": n, "ms": t * 1000, "bytes": b}
                                             for k, (n, t, b) in stats.items()}}, open(out, "w"))
"""


def statement_timers(flow: Path, homes: dict[str, Path], repeats: int) -> dict[str, Any]:
    """The large-output run in a child that times each SQL statement the store writes, on each
    store, interleaved (each run deleted after): medians per statement kind, ms per run."""
    script = flow.parent / "statement_timers.py"
    script.write_text(STATEMENT_TIMERS_PY, encoding="utf-8")
    per: dict[str, dict[str, list[dict[str, float]]]] = {k: {} for k in homes}
    for _ in range(repeats):
        for name, home in homes.items():
            runs_dir = home / "runs"
            before = {p.name for p in runs_dir.iterdir()} if runs_dir.exists() else set()
            out = flow.parent / f"timers-{name}.json"
            run_podium([PYTHON, str(script), str(out), str(flow)], home, 0,
                       f"statement timers [{name}]")
            got: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
            if "skipped" in got:
                return got
            if got["exit_code"] not in (0, None):
                raise SystemExit(f"statement timers [{name}]: exit code {got['exit_code']}")
            rid = new_run_dir(home, before)
            delete_runs(home / "podium.db", [rid])
            shutil.rmtree(runs_dir / rid, ignore_errors=True)
            for kind, v in got["statements"].items():
                per[name].setdefault(kind, []).append(v)
    return {"repeats": repeats, "stores": {
        name: {kind: {"count": v[0]["count"], "mb": round(v[0]["bytes"] / MB, 1),
                      "ms_median": round(statistics.median(x["ms"] for x in v), 1)}
               for kind, v in sorted(kinds.items(), key=lambda kv: -kv[1][0]["ms"])}
        for name, kinds in per.items()}}


def quick_check_probe(dbs: dict[str, Path], repeats: int) -> dict[str, Any]:
    out: dict[str, list[float]] = {k: [] for k in dbs}
    for _ in range(repeats):
        for k, p in dbs.items():
            con = connect(p)
            t = time.perf_counter()
            con.execute("PRAGMA quick_check(3)").fetchall()
            out[k].append((time.perf_counter() - t) * 1000)
            con.close()
    return {k: {"median": round(statistics.median(v), 1), "min": round(min(v), 1)}
            for k, v in out.items()}


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path,
                        default=Path(tempfile.gettempdir()) / "podium-bench-store-growth",
                        help="folder of the cached big store and this run's copies")
    parser.add_argument("--size-mb", type=int, default=None, help="big store size (300)")
    parser.add_argument("--runs", type=int, default=None, help="2-step samples per store (15)")
    parser.add_argument("--big-runs", type=int, default=None,
                        help="large-output samples per store (9)")
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached store")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: a 60 MB store (one seed run per workflow), 3 "
                             "samples of each, no waiting for a quiet machine")
    args = parser.parse_args()
    size_mb = args.size_mb or (60 if args.quick else 300)
    runs = args.runs or (3 if args.quick else 15)
    big_runs = args.big_runs or (3 if args.quick else 9)
    warmups = 1 if args.quick else args.warmups
    if args.quick:  # a smoke run does not wait for a quiet machine
        os.environ["PODIUM_BENCH_NO_WAIT"] = "1"
    started = time.perf_counter()

    work = args.work.resolve()
    session = work / "session"
    shutil.rmtree(session, ignore_errors=True)
    flows = write_flows(session / "flows")
    homes = {"empty": session / "empty", "big": session / "big"}

    # the current podium's schema: a run on an empty home (it also starts the "empty" store)
    run_podium([PODIUM, "run", str(flows["two"]), "--input", "who=bench", "-q"],
               homes["empty"], 0, "2-step run on an empty store")
    schema = schema_of(homes["empty"] / "podium.db")
    manifest, built = cached_store(work / f"store-{size_mb}mb", size_mb, schema, args.rebuild,
                                   seeds_per_flow=1 if args.quick else 2)
    t = time.perf_counter()
    homes["big"].mkdir(parents=True)
    shutil.copyfile(work / f"store-{size_mb}mb" / "home" / "podium.db",
                    homes["big"] / "podium.db")
    copy_s = time.perf_counter() - t
    dbs = {k: h / "podium.db" for k, h in homes.items()}
    size_before = {k: file_size(p) for k, p in dbs.items()}
    labels = {"empty": "empty store", "big": f"{size_before['big'] / MB:.0f} MB store"}

    eprint(f"(a) 2-step `podium run`, {runs} runs per store, interleaved")
    argv = [PODIUM, "run", str(flows["two"]), "--input", "who=bench"]
    series = measure_interleaved("2-step podium run", {
        k: (argv, dict(os.environ, PODIUM_HOME=str(h))) for k, h in homes.items()},
        runs=runs, warmups=warmups)
    two = {k: s.summary() for k, s in series.items()}
    diff_median = two["big"]["median_ms"] - two["empty"]["median_ms"]
    diff_min = two["big"]["min_ms"] - two["empty"]["min_ms"]

    eprint(f"(b) large outputs (1, 2, 4 MB), {big_runs} runs per store, interleaved")
    big = measure_big_outputs(flows["big"], homes, big_runs, warmups)

    eprint("(c) diagnostics: event row inserts, quick_check")
    probe = insert_probe(dbs, manifest["seed_ids"], 5 if args.quick else 9)
    qc = quick_check_probe(dbs, 3)
    timers = statement_timers(flows["big"], homes, 3)
    size_after = {k: file_size(p) for k, p in dbs.items()}

    results: dict[str, Any] = {
        "machine": machine_info(), "quick": args.quick,
        "store": {"size_mb": size_mb, "built_now": built, "copy_to_session_s": round(copy_s, 2),
                  "bytes_before": size_before, "bytes_after": size_after,
                  "manifest": manifest},
        "two_step": {"argv": argv, "stores": two,
                     "diff_median_ms": round(diff_median, 2), "diff_min_ms": round(diff_min, 2)},
        "large_outputs": big, "event_insert": probe, "quick_check_ms": qc,
        "statement_timers": timers,
        "workflows": {"two_step": TWO_STEP_YAML, "large_outputs": flows["big"].read_text()},
        "targets": [{"target": f"2-step `podium run` on the {size_mb} MB store within "
                               f"{TARGET_MS:.0f} ms of the empty store (median)",
                     "measured": f"{diff_median:+.1f} ms (min {diff_min:+.1f} ms)",
                     "pass": diff_median <= TARGET_MS}],
    }
    results["elapsed_s"] = round(time.perf_counter() - started, 1)
    out = write_json("store_growth_quick.json" if args.quick else "store_growth.json", results)

    m = results["machine"]
    print(f"## Run store growth\n\nMachine: {m['nproc']} CPUs, {m['cpu_model']}, Python "
          f"{m['python']}, git {m['git']['head']}"
          f"{' (dirty: ' + ', '.join(m['git']['dirty']) + ')' if m['git']['dirty'] else ''}\n")
    print(f"Big store: {manifest['bytes'] / MB:.0f} MB, {manifest['runs']} runs "
          f"({manifest['seed_runs']} seeds by `podium run`, {manifest['copies']} copies), "
          f"built in {manifest['seconds']['total']} s"
          f"{' (now)' if built else ' (cached)'}.\n")
    print(f"### (a) 2-step `podium run`, {runs} runs per store, interleaved\n")
    print(md_table(["store", "median ms", "min ms", "max ms", "size MB"],
                   [[labels[k], two[k]["median_ms"], two[k]["min_ms"], two[k]["max_ms"],
                     f"{size_before[k] / MB:.2f}"] for k in homes]))
    verdict = "PASS" if diff_median <= TARGET_MS else "FAIL"
    print(f"\nDifference: {diff_median:+.1f} ms median, {diff_min:+.1f} ms min "
          f"(target ≤ {TARGET_MS:.0f} ms: **{verdict}**)\n")
    print(f"### (b) Steps printing 1, 2, 4 MB of JSON, {big_runs} runs per store, medians\n")
    rows = []
    for step, size in BIG_STEPS:
        e, b = (big["stores"][k]["steps"][step] for k in ("empty", "big"))
        rows.append([f"{step} ({size // MB} MB)", e["interval_ms"]["median"],
                     b["interval_ms"]["median"], e["commit_ms"]["median"],
                     b["commit_ms"]["median"],
                     round(b["interval_ms"]["median"] - e["interval_ms"]["median"], 1)])
    e, b = big["stores"]["empty"], big["stores"]["big"]
    rows.append(["whole process", e["wall_ms"]["median"], b["wall_ms"]["median"], "", "",
                 round(b["wall_ms"]["median"] - e["wall_ms"]["median"], 1)])
    print(md_table(["step", "empty: step ms", "big: step ms", "empty: commit ms",
                    "big: commit ms", "big - empty ms"], rows))
    print("\n(step = its step_started to the next step_started; commit = that minus the step's "
          "own elapsed: writing its step_finished, route and checkpoint, store and JSONL log. "
          "Each sample's run is deleted after it: the stores end with the same rows, and "
          f"{size_after['empty'] / MB:.0f} / {size_after['big'] / MB:.0f} MB files, the "
          "difference free pages.)\n")
    if "ms" in probe:
        print(f"### (c) One event row inserted and committed (sqlite3, median of "
              f"{probe['repeats']})\n")
        print(md_table(["row", "empty: median ms", "big: median ms", "empty: mean ms",
                        "big: mean ms"],
                       [[f"{n / MB:.1f} MB ({probe['row_types'][n]})",
                         probe["ms"]["empty"][n]["median"], probe["ms"]["big"][n]["median"],
                         probe["ms"]["empty"][n]["mean"], probe["ms"]["big"][n]["mean"]]
                        for n in sorted(probe["row_types"])]))
        print("\n(the mean includes the WAL checkpoints that some commits pay: SQLite copies "
              "the log into the file once it passes 1,000 pages)")
    if "stores" in timers:
        print(f"\n### (d) The store's SQL statements in one large-output run (in-process "
              f"timers, median of {timers['repeats']})\n")
        kinds = list(timers["stores"]["empty"])
        print(md_table(["statement", "count", "MB", "empty ms", "big ms"],
                       [[k, timers["stores"]["empty"][k]["count"],
                         timers["stores"]["empty"][k]["mb"],
                         timers["stores"]["empty"][k]["ms_median"],
                         timers["stores"]["big"].get(k, {}).get("ms_median", "")]
                        for k in kinds]))
    else:
        print(f"\n(d) statement timers skipped: {timers.get('skipped')}")
    print(f"\n`PRAGMA quick_check` (what `open_store(verify=True)` runs): empty "
          f"{qc['empty']['median']} ms, big {qc['big']['median']} ms.\n")
    print(f"Results: {out.relative_to(REPO)}; {results['elapsed_s']} s in all.")


if __name__ == "__main__":
    main()
