"""A run's options (its guidance queue, metadata, trace id, skip-gates choice) are changed by
several processes: `podium guide` while the run's own process records its trace id, two
people guiding at once. Each change is one compare-and-swap in the store, so none is lost.
Real processes at once, on SQLite and on the real PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers_engine import cli_env, podium_argv, write
from store_backends import Store

PARKED = """
workflow: {name: parked, entry_point: draft}
agents:
  - {name: draft, type: set, value: "v1", routes: [{to: review}]}
  - name: review
    type: human_gate
    prompt: "Accept {{ draft.output }}?"
    options:
      - {label: Accept, value: accept, route: $end}
"""

# each process queues its texts one at a time, as that many `podium guide` commands would,
# and sets a key of its own in the same options
GUIDE = textwrap.dedent("""
    import sys
    from podium.app.guidance import add_guidance
    from podium.app.home import open_store

    run_id, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = open_store(verify=False)
    try:
        for i in range(count):
            add_guidance(store, run_id, [f"{who}-{i}"])
            store.change_run_options(run_id, lambda o: {**o, who: i})
    finally:
        store.close()
""")


def test_guidance_from_six_processes_at_once_loses_no_text(tmp_path: Path,
                                                           store: Store) -> None:
    env = cli_env(tmp_path / "home", store.env)
    wf = write(tmp_path, PARKED)
    parked = subprocess.run([*podium_argv("run", wf, "--no-interactive", "--json")], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert parked.returncode == 5, parked.stderr
    run_id = json.loads(parked.stdout)["run_id"]
    writers, count = 6, 15
    procs = [subprocess.Popen([sys.executable, "-c", GUIDE, run_id, f"w{k}", str(count)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for k in range(writers)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    options = _options(tmp_path / "home", store, run_id)
    queue = options["guidance"]
    expected = {f"w{k}-{i}" for k in range(writers) for i in range(count)}
    assert sorted(queue) == sorted(expected), f"lost: {expected - set(queue)}"
    for k in range(writers):  # each process's texts in the order it gave them
        assert [t for t in queue if t.startswith(f"w{k}-")] == \
            [f"w{k}-{i}" for i in range(count)]
        assert options[f"w{k}"] == count - 1


def _options(home: Path, store: Store, run_id: str) -> dict[str, object]:
    code = ("import json, sys; from podium.app.home import open_store; s = open_store("
            "verify=False); print(json.dumps(s.get_run(sys.argv[1]).options)); s.close()")
    got = subprocess.run([sys.executable, "-c", code, run_id], env=cli_env(home, store.env),
                         capture_output=True, text=True, timeout=60, check=True)
    options: dict[str, object] = json.loads(got.stdout)
    return options


def test_a_run_reads_options_another_process_changed_since_its_last_read(
        tmp_path: Path) -> None:
    """The SQLite store reads a run's options again only when the file changed (a fan-out's
    members read them before every prompt): guidance a real `podium guide` process queues, a
    change this handle makes itself and a change of another handle in this process are each
    seen by the next read, and a read between them is served whole and unshared."""
    from podium.store.base import RunRecord
    from podium.store.sqlite import SQLiteStore

    env = cli_env(tmp_path)
    db = tmp_path / "podium.db"
    mine, other = SQLiteStore(db), SQLiteStore(db)
    try:
        mine.create_run(RunRecord("r1", "parked", "wf.yaml", "h", {}, options={"a": 1}))
        first = mine.run_options("r1")
        assert first == {"a": 1}
        first["a"] = 99  # the caller's copy: the next read does not see it
        assert mine.run_options("r1") == {"a": 1}
        guide = subprocess.run(
            [*podium_argv(), "guide", "r1", "--text", "Keep it short."], env=env,
            capture_output=True, text=True, timeout=60, check=False)
        assert guide.returncode == 0, guide.stderr
        assert mine.run_options("r1")["guidance"] == ["Keep it short."]
        other.change_run_options("r1", lambda o: {**o, "b": 2})
        assert mine.run_options("r1")["b"] == 2
        mine.change_run_options("r1", lambda o: {**o, "c": 3})
        assert mine.run_options("r1") == {"a": 1, "guidance": ["Keep it short."], "b": 2,
                                          "c": 3}
    finally:
        mine.close()
        other.close()


def test_an_owner_reads_the_guidance_queue_at_most_every_recheck(tmp_path: Path) -> None:
    """The prompts a fan-out renders together share one read of the queue; a text queued
    meanwhile reaches the prompts rendered RECHECK later."""
    import time

    from podium.app.guidance import RECHECK, add_guidance, store_source
    from podium.store.base import RunRecord
    from podium.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "podium.db")
    reads: list[str] = []
    original = store.run_options

    def counted(run_id: str) -> dict[str, object]:
        reads.append(run_id)
        return original(run_id)

    store.run_options = counted  # type: ignore[method-assign]
    try:
        store.create_run(RunRecord("r1", "parked", "wf.yaml", "h", {}))
        read = store_source(store, "r1")
        assert [read("a", i) for i in range(50)] == [[]] * 50
        assert len(reads) <= 2  # fifty prompts at once: one read (two if the clock ticked)
        add_guidance(store, "r1", ["Keep it short."])
        time.sleep(RECHECK * 1.5)
        assert read("a", 50) == ["Keep it short."]
    finally:
        store.close()
