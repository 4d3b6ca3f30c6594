"""The console on every screen and in every run state, in a real headless Chromium against a
live `podium serve`:

- at 390 px (a phone) neither the runs page nor a run page scrolls sideways;
- search matches any part of a workflow name (underscores included) or of a run id;
- a failed run opens on its failing step, with its error and its traceback;
- a running parallel group shows its members done of all and what they cost so far;
- a killed run says it was interrupted and offers Resume, which resumes it to its end;
- the dev-review graph fits its panel and its route labels do not overlap;
- a terminate step never shows a raw `{{ }}` template;
- axe-core finds no serious or critical violation on the runs page, a run page and a gate.

Screenshots go to PODIUM_SCREENSHOTS, else a temporary folder (test_browser.py `_shot`).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from console_helpers import (
    Serve,
    gate_flow,
    latest_run,
    run_id_of,
    run_podium,
    start_podium,
    stop_process,
    wait_status,
    write_flow,
)
from test_browser import CHROMIUM, _shot, browser, page  # the same Chromium fixtures

from helpers_engine import EXAMPLES, wait_until

__all__ = ["browser", "page"]  # fixtures, used by name

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium")

FAIL_FLOW = """
workflow:
  name: nightly_sync_job
  entry_point: prepare
agents:
  - name: prepare
    type: set
    value: "ready"
    routes: [{to: crash}]
  - name: crash
    type: script
    command: python
    args: ["-c", "def load():\\n    raise ValueError('disk on fire')\\nload()"]
    output: {verdict: {type: string}}
    routes: [{to: done}]
  - name: done
    type: terminate
    status: success
    reason: "synced {{ crash.output.verdict }}"
"""

GROUP_FLOW = """
workflow:
  name: fan-out
  entry_point: fan
  runtime: {provider: copilot, default_model: gpt-4o-mini}
agents:
  - {name: a, prompt: "a?", output: {done: {type: string}}}
  - {name: b, prompt: "b?", output: {done: {type: string}}}
  - {name: c, prompt: "c?", output: {done: {type: string}}}
  - {name: done, type: terminate, status: success, reason: all}
parallel:
  - {name: fan, agents: [a, b, c], routes: [{to: done}]}
"""


def _group_responses(path: Path, slow: float) -> Path:
    def answer(name: str, delay: float = 0.0) -> list[dict[str, Any]]:
        return [{"output": {"done": name}, "delay": delay, "model": "gpt-4o-mini",
                 "usage": {"input_tokens": 100_000, "output_tokens": 10_000}}]

    path.write_text(json.dumps({"agents": {"a": answer("a"), "b": answer("b", slow),
                                           "c": answer("c")}}), encoding="utf-8")
    return path


@dataclass
class World:
    home: Path
    flows: Path
    serve: Serve
    runs: dict[str, str]


def _dev_review(root: Path, home: Path) -> str:
    """The dev-review example's happy scenario, as examples/dev-review/demo.sh runs it."""
    here = EXAMPLES / "dev-review"
    work = root / "repo"
    shutil.copytree(here / "sample-repo", work)
    git = ["git", "-C", str(work), "-c", "user.name=podium", "-c", "user.email=t@podium.invalid"]
    subprocess.run([*git, "init", "--quiet"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "sample"], check=True)
    done = run_podium(home, "run", here / "workflow.yaml", "--input",
                      f"ticket={here / 'tickets' / 'add-slugify.md'}", "--input",
                      f"repo_dir={work}", "--responses", here / "responses" / "happy.yaml",
                      timeout=120)
    return run_id_of(done)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("screens")
    home, flows = root / "home", root / "flows"
    runs: dict[str, str] = {}
    flow, responses = gate_flow(flows, hostile=False)
    runs["gate"] = run_id_of(run_podium(home, "run", flow, "--responses", responses))
    runs["failed"] = run_id_of(run_podium(home, "run", write_flow(flows, "fail.yaml", FAIL_FLOW)))
    runs["dev"] = _dev_review(root, home)
    serve = Serve(home).start()
    try:
        yield World(home, flows, serve, runs)
    finally:
        serve.stop()


def _url(world: World, path: str) -> str:
    return f"{world.serve.base}{path}#token={world.serve.token}"


def _no_sideways_scroll(page: Any) -> None:
    widths = page.evaluate("[document.scrollingElement.scrollWidth, innerWidth]")
    assert widths[0] <= widths[1], f"the page scrolls sideways: {widths}"


def _phone(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2,
                                  is_mobile=True, has_touch=True)
    return context, context.new_page()


def test_nothing_scrolls_sideways_on_a_phone(browser: Any, world: World) -> None:
    from playwright.sync_api import expect

    context, pg = _phone(browser)
    try:
        pg.goto(_url(world, "/"))
        expect(pg.locator("tr.run-row")).to_have_count(3)
        expect(pg.locator("#attention li")).to_have_count(1)
        _no_sideways_scroll(pg)
        _shot(pg, "console-runs-390.png", full=True)
        for rid in (world.runs["gate"], world.runs["failed"], world.runs["dev"]):
            pg.goto(_url(world, f"/runs/{rid}"))
            expect(pg.locator("#graph svg.graph")).to_be_visible()
            expect(pg.locator("#panel .panel-inner")).to_be_visible()
            _no_sideways_scroll(pg)
        pg.goto(_url(world, f"/runs/{world.runs['gate']}"))
        expect(pg.locator(".gate-card")).to_be_visible()
        _no_sideways_scroll(pg)
        _shot(pg, "console-run-390.png", full=True)
    finally:
        context.close()


def test_search_matches_any_part_of_a_name_or_an_id(page: Any, world: World) -> None:
    from playwright.sync_api import expect

    page.goto(_url(world, "/"))
    rows = page.locator("tr.run-row")
    expect(rows).to_have_count(3)
    search = page.locator("#filter-search")
    search.fill("sync_j")  # the underscore is a character, not a wildcard, and not dropped
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run", world.runs["failed"])
    search.fill("syn_")  # as a LIKE wildcard it would match "sync"; stripped, "syn"
    expect(page.locator("#runs-table")).to_be_hidden()
    search.fill(world.runs["gate"][3:9])  # the middle of a run id
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run", world.runs["gate"])


def test_a_failed_run_opens_on_its_failing_step(page: Any, world: World) -> None:
    from playwright.sync_api import expect

    page.goto(_url(world, f"/runs/{world.runs['failed']}"))
    expect(page.locator("#run-state")).to_have_text("error")
    expect(page.locator("#panel .panel-inner")).to_have_attribute("data-step", "crash")
    error = page.locator("#panel details.exec[open] section.sec").first
    expect(error.locator("h4")).to_have_text("Error")
    expect(error).to_contain_text("OutputContractError")
    expect(error.locator("pre.traceback")).to_contain_text("ValueError: disk on fire")
    expect(error.locator("pre.traceback")).to_contain_text("Traceback (most recent call last)")
    expect(page.locator('[data-node="crash"]')).to_have_class(re.compile(r"\bfailed\b.*\bselected\b"))
    _shot(page, "console-run-failed.png")
    # a terminate step that never ran shows no raw template
    page.locator('[data-node="done"]').click()
    expect(page.locator("#panel .panel-inner")).to_have_attribute("data-step", "done")
    assert "{{" not in page.locator("#panel").inner_text()
    assert "{{" not in page.locator("#graph").inner_text()


def test_the_dev_review_graph_fits_and_its_labels_do_not_overlap(page: Any,
                                                                world: World) -> None:
    from playwright.sync_api import expect

    page.goto(_url(world, f"/runs/{world.runs['dev']}"))
    expect(page.locator("#run-state")).to_have_text("succeeded")
    graph = page.locator("#graph svg.graph")
    expect(graph).to_be_visible()
    page.locator("#graph").evaluate("el => el.scrollTo(0, 0)")
    fit = page.evaluate("""() => {
        const pane = document.querySelector('#graph');
        const svg = pane.querySelector('svg.graph');
        return [svg.getBoundingClientRect().width, pane.clientWidth, pane.scrollWidth];
    }""")
    assert fit[0] <= fit[1], f"the graph is wider than its panel: {fit}"
    assert fit[2] <= fit[1], f"the graph panel scrolls sideways: {fit}"
    boxes = page.evaluate("""() => [...document.querySelectorAll('#graph .elabel')].map((g) => {
        const r = g.querySelector('rect').getBoundingClientRect();
        const t = g.querySelector('text').getBoundingClientRect();
        return {text: g.querySelector('text').textContent, r: [r.left, r.top, r.right, r.bottom],
                t: [t.left, t.top, t.right, t.bottom]};
    })""")
    assert len(boxes) >= 3
    for b in boxes:  # each label's text sits inside its box
        assert b["t"][0] >= b["r"][0] - 0.5, b
        assert b["t"][2] <= b["r"][2] + 0.5, b
    overlaps = [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
                if a["r"][0] < b["r"][2] - 0.5 and b["r"][0] < a["r"][2] - 0.5
                and a["r"][1] < b["r"][3] - 0.5 and b["r"][1] < a["r"][3] - 0.5]
    assert not overlaps, overlaps
    _shot(page, "console-dev-review.png")


def test_a_running_group_shows_its_progress_then_a_killed_run_resumes(
        page: Any, world: World, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    flow = write_flow(tmp_path, "fan.yaml", GROUP_FLOW)
    responses = _group_responses(tmp_path / "fan.responses.json", 60.0)
    before = latest_run(world.home).get("id")
    proc = start_podium(world.home, "run", flow, "--responses", responses)
    try:
        assert wait_until(lambda: latest_run(world.home).get("id") != before, 30)
        rid = latest_run(world.home)["id"]
        page.goto(_url(world, f"/runs/{rid}"))
        progress = page.locator('#run-facts .group-progress[data-group="fan"]')
        expect(progress).to_contain_text("2/3 done")
        expect(progress).to_contain_text(re.compile(r"\$0\.0[1-9]"))  # two members' cost
        expect(page.locator("#resume-run")).to_be_hidden()
        page.locator('[data-node="fan"]').click()
        expect(page.locator("#panel")).to_contain_text("Members (2/3 done")
        _shot(page, "console-group-running.png")
        proc.send_signal(signal.SIGKILL)  # a crash: its lease dies with it
        proc.wait(30)
        expect(page.locator("#run-state")).to_have_text("interrupted")
        expect(page.locator("#interrupted-note")).to_contain_text("Interrupted")
        expect(page.locator("#run-facts .group-progress")).to_have_count(0)
        expect(page.locator("#panel")).not_to_contain_text("running…")
        page.goto(_url(world, "/"))
        expect(page.locator(f'#attention button[data-resume="{rid}"]')).to_be_visible()
        page.goto(_url(world, f"/runs/{rid}"))
        _group_responses(tmp_path / "fan.responses.json", 0.0)  # b answers at once now
        page.locator("#resume-run").click()
        expect(page.locator("#run-state")).to_have_text("succeeded")
        wait_status(world.home, rid, ("success",))
    finally:
        stop_process(proc)


EACH_FLOW = """
workflow:
  name: each-item
  entry_point: fan
  input:
    items: {type: array}
  runtime: {provider: copilot, default_model: gpt-4o-mini}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    max_concurrent: 2
    agent: {name: worker, prompt: "Handle {{ item }}", output: {done: {type: string}}}
agents: []
"""


def test_a_for_each_item_shows_its_own_prompt_and_answer(
        page: Any, world: World, tmp_path: Path) -> None:
    # an item's step events name it `worker[<key>]`, its agent's prompt and answer `worker`:
    # the panel shows each item with its own prompt and answer (it showed neither)
    from playwright.sync_api import expect

    flow = write_flow(tmp_path, "each.yaml", EACH_FLOW)
    responses = tmp_path / "each.responses.json"
    responses.write_text(json.dumps({"agents": {"worker": [
        {"output": {"done": "first"}}, {"output": {"done": "second"}}]}}), encoding="utf-8")
    done = run_podium(world.home, "run", flow, "--input-json", 'items=["alpha", "beta"]',
                      "--responses", responses)
    assert done.returncode == 0, done.stderr
    page.goto(_url(world, f"/runs/{run_id_of(done)}"))
    page.locator('[data-node="fan"]').click()
    members = page.locator("#panel .members > details")
    expect(members).to_have_count(2)
    for i, item in enumerate(("alpha", "beta")):
        member = members.nth(i)
        expect(member.locator("summary")).to_contain_text(f"worker[{i}]")
        expect(member.locator("pre.prompt")).to_have_text(f"Handle {item}")
        expect(member.locator("pre.answer")).to_contain_text('"done"')
    answers = [members.nth(i).locator("pre.answer").text_content() for i in range(2)]
    assert sorted("first" in (a or "") for a in answers) == [False, True]  # one answer each


# ----------------------------------------------------------------------------- axe


def _axe_source() -> str | None:
    try:
        import axe_playwright_python  # ships axe-core's axe.min.js
    except ImportError:
        return None
    path = Path(axe_playwright_python.__file__).parent / "axe.min.js"
    return path.read_text(encoding="utf-8") if path.exists() else None


AXE = _axe_source()


def test_no_serious_accessibility_violations(page: Any, world: World) -> None:
    from playwright.sync_api import expect

    assert AXE is not None, "axe-core is missing: the dev group installs axe-playwright-python"
    def serious() -> list[str]:
        page.evaluate(f"() => {{ {AXE}\n }}")  # not a <script>: the page's CSP forbids inline ones
        page.evaluate("() => { if (!window.axe) throw new Error('axe did not load'); }")
        result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
        return [f"{v['id']} ({v['impact']}): {v['help']}: "
                f"{[n['target'] for n in v['nodes']][:5]}"
                for v in result["violations"] if v["impact"] in ("serious", "critical")]

    page.goto(_url(world, "/"))
    expect(page.locator("tr.run-row").first).to_be_visible()
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    found = {"runs page": serious()}
    page.goto(_url(world, f"/runs/{world.runs['gate']}"))
    expect(page.locator(".gate-card")).to_be_visible()
    found["gate"] = serious()
    page.goto(_url(world, f"/runs/{world.runs['failed']}"))
    expect(page.locator("#panel .panel-inner")).to_have_attribute("data-step", "crash")
    found["run page"] = serious()
    assert not any(found.values()), found


def test_run_web_says_the_run_ended_when_its_console_stops(page: Any, tmp_path: Path) -> None:
    """`podium run --web` stops its console when the run ends: the page says the run ended,
    not that the console is offline."""
    from playwright.sync_api import expect

    home = tmp_path / "home"
    flow, responses = gate_flow(tmp_path / "flows", hostile=False)
    proc = start_podium(home, "run", "--web", flow, "--responses", responses)
    try:
        assert proc.stderr is not None
        url = ""
        for _ in range(200):
            line = proc.stderr.readline()
            if not line or line.startswith("podium console: "):
                url = line.split(": ", 1)[1].strip() if line else ""
                break
        assert url, "no console address on stderr"
        page.goto(url)
        card = page.locator(".gate-card")
        expect(card).to_be_visible()
        card.get_by_role("button", name="Approve").click()
        proc.communicate(timeout=60)
        assert proc.returncode == 0
        expect(page.locator("#run-state")).to_have_text("succeeded")
        expect(page.locator("#conn")).to_have_attribute("data-state", "ended")
        expect(page.locator("#banner")).to_contain_text("The run ended")
        expect(page.locator("#banner")).not_to_contain_text("not reachable")
        expect(page.locator("#conn")).not_to_have_text("offline")
    finally:
        stop_process(proc)
