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
