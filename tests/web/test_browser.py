"""The console in a real browser: headless Chromium (Debian's, driven by Playwright) against a
live `podium serve` subprocess.

- the runs page lists the runs, the ones waiting for a person stand out, filters work;
- a running workflow's graph follows it live (the current step moves, the path lights up);
- a parked gate answered by a click resumes the run to its terminal, and the page shows it;
- every read carries the token from the address's #fragment; without it the page asks for
  the token and shows nothing, and a read from the page without it is refused;
- the page reconnects by itself when the console is stopped and started again on its port;
- script tags and image handlers in a model answer and in a gate prompt stay visible text.

Screenshots of the runs page and of a run page are taken on every run, into the folder
PODIUM_SCREENSHOTS names (`make screenshots` sets it to docs/img/), else a temporary one: the
test suite changes no tracked file.
Every wait is Playwright's auto-waiting `expect` on a condition: no sleeps.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from console_helpers import (
    LOOP_FLOW,
    Serve,
    block_flow,
    free_port,
    gate_flow,
    latest_run,
    run_id_of,
    run_podium,
    start_podium,
    stop_process,
    wait_status,
    write_flow,
)

from helpers_engine import EXAMPLES, wait_until

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="the browser tests need Debian's chromium at /usr/bin/chromium "
           "(apt-get install -y chromium); CI installs it")

SHOTS = Path(os.environ.get("PODIUM_SCREENSHOTS") or
             Path(tempfile.gettempdir()) / "podium-screenshots")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=20_000)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class World:
    home: Path
    flows: Path
    serve: Serve
    runs: dict[str, str]
    blocker: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A store with finished, failed, parked and running runs, served by `podium serve`. The
    running one waits in a script step until its `go` file appears."""
    root = tmp_path_factory.mktemp("browser")
    home, flows = root / "home", root / "flows"
    runs: dict[str, str] = {}
    counter = EXAMPLES / "review-counter" / "workflow.yaml"
    runs["counter"] = run_id_of(run_podium(home, "run", counter))
    flow, responses = gate_flow(flows)
    aborted = write_flow(flows, "aborted.responses.yaml",
                         responses.read_text() + "gates:\n  approval: [aborted]\n")
    runs["failed"] = run_id_of(run_podium(home, "run", flow, "--responses", aborted))
    loop = write_flow(flows, "loop.yaml", LOOP_FLOW)
    runs["limit"] = run_id_of(run_podium(home, "run", loop, "--no-interactive"))  # parks
    runs["gate"] = run_id_of(run_podium(home, "run", flow, "--responses", responses))
    blocker = block_flow(flows / "block")
    proc = start_podium(home, "run", blocker)
    serve = None
    try:
        assert wait_until(lambda: latest_run(home).get("current_step") == "hold", 30)
        runs["running"] = latest_run(home)["id"]
        serve = Serve(home).start()
        yield World(home, flows, serve, runs, blocker)
    finally:
        (blocker.parent / "go").write_text("go")
        try:
            proc.wait(30)
        finally:
            stop_process(proc)
            if serve is not None:
                serve.stop()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 860})
    pg = context.new_page()
    pg.console_messages = []  # type: ignore[attr-defined]
    pg.on("console", lambda m: pg.console_messages.append(m.text))  # type: ignore[attr-defined]
    pg.on("pageerror", lambda e: pg.console_messages.append(f"pageerror: {e}"))  # type: ignore[attr-defined]
    try:
        yield pg
    finally:
        context.close()


def _shot(page: Any, name: str, *, full: bool = False) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=full)


def test_the_runs_page_lists_the_runs(page: Any, world: World) -> None:
    from playwright.sync_api import expect

    page.goto(world.serve.url)
    rows = page.locator("tr.run-row")
    expect(rows).to_have_count(5)
    for rid in world.runs.values():
        expect(page.locator(f'tr[data-run="{rid}"]')).to_be_visible()
    waiting = page.locator('tr.run-row[data-state="waiting"]')
    expect(waiting).to_have_count(2)
    expect(page.locator(f'tr[data-run="{world.runs["gate"]}"]')).to_contain_text("gate approval")
    expect(page.locator(f'tr[data-run="{world.runs["running"]}"] .pill')).to_have_text("running")
    expect(page.locator(f'tr[data-run="{world.runs["running"]}"] td.step')).to_have_text("hold")
    expect(page.locator("#attention li")).to_have_count(2)
    expect(page.locator(f'tr[data-run="{world.runs["failed"]}"] .pill')).to_have_text("failed")
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    expect(page).to_have_title(re.compile(r"^\(2▲\)"))
    assert "token=" not in page.url  # the token left the address bar
    _shot(page, "console-runs.png")
    page.locator('[data-filter="waiting"]').click()
    expect(rows).to_have_count(2)
    expect(page).to_have_url(re.compile(r"status=waiting"))
    page.locator('[data-filter="all"]').click()
    expect(rows).to_have_count(5)
    page.locator("#filter-search").fill("review-co")
    expect(rows).to_have_count(1)
    page.locator(f'tr[data-run="{world.runs["counter"]}"] td.step').click()
    expect(page).to_have_url(re.compile(f"/runs/{world.runs['counter']}"))
    badge = page.locator('[data-node="count"] .badge')
    expect(badge.locator("text")).to_have_text("×3")
    # The timeline scrubs back through the finished run, then returns to its end.
    page.locator("#timeline").fill("6")
    expect(page.locator("#timeline-label")).to_contain_text("6/")
    expect(badge).to_have_attribute("visibility", "hidden")
    expect(page.locator('[data-node="success"]')).not_to_have_class(re.compile(r"\bvisited\b"))
    page.locator("#timeline-live").click()
    expect(badge).to_have_attribute("visibility", "visible")
    expect(page.locator('[data-node="success"]')).to_have_class(re.compile(r"\bended\b"))


def test_a_running_workflow_graph_follows_the_run(page: Any, world: World) -> None:
    from playwright.sync_api import expect

    page.goto(f"{world.serve.base}/runs/{world.runs['running']}#token={world.serve.token}")
    hold = page.locator('[data-node="hold"]')
    expect(hold).to_have_class(re.compile(r"\bcurrent\b"))
    expect(hold).to_have_class(re.compile(r"\brunning\b"))
    expect(page.locator('[data-node="prepare"]')).to_have_class(re.compile(r"\bvisited\b"))
    expect(page.locator('[data-node="done"]')).not_to_have_class(re.compile(r"\bvisited\b"))
    expect(page.locator("#run-state")).to_have_text("running")
    (world.blocker.parent / "go").write_text("go")
    done = page.locator('[data-node="done"]')
    expect(done).to_have_class(re.compile(r"\bended\b"))
    expect(hold).not_to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator('[data-node="finish"]')).to_have_class(re.compile(r"\bvisited\b"))
    expect(page.locator("#run-state")).to_have_text("succeeded")
    hold.click()
    expect(page.locator("#panel pre.stdout")).to_contain_text('{"held": true}')
    wait_status(world.home, world.runs["running"], ("success",))


def test_the_graph_greys_the_routes_no_value_can_take(page: Any, world: World) -> None:
    from playwright.sync_api import expect

    page.goto(f"{world.serve.base}/runs/{world.runs['counter']}#token={world.serve.token}")
    expect(page.locator('[data-node="success"]')).to_have_class(re.compile(r"\bvisited\b"))
    greyed = page.locator("svg.graph path.edge.unreachable")
    expect(greyed).to_have_count(1)  # count -> counter_reset: its guard can never hold
    expect(greyed.locator("title")).to_contain_text("podium explore")
    expect(page.locator('[data-node="success"] text.sub')).to_contain_text("7 steps")
    expect(page.locator('[data-node="counter_reset"] text.sub')).to_contain_text("unreachable")
    stroke = greyed.evaluate("e => getComputedStyle(e).strokeDasharray")
    assert stroke not in ("", "none")


def test_a_gate_answered_by_a_click_resumes_the_run(page: Any, world: World) -> None:
    from playwright.sync_api import expect

    flow, responses = gate_flow(world.flows, hostile=False)
    rid = run_id_of(run_podium(world.home, "run", flow, "--responses", responses))
    page.goto(f"{world.serve.base}/runs/{rid}#token={world.serve.token}")
    card = page.locator(".gate-card")
    expect(card).to_contain_text("Decision needed")
    expect(page.locator('[data-node="approval"]')).to_have_class(re.compile(r"\bwaiting\b"))
    expect(page.locator("#run-state")).to_have_text("▲ waiting")
    page.locator('[data-node="draft"]').click()
    expect(page.locator("#panel pre.answer")).to_contain_text("CSV parser")
    _shot(page, "console-run.png", full=True)
    card.get_by_role("button", name="Approve").click()
    # the resumed run may consume the gate (removing its card) before the reply arrives:
    # the confirmation is kept outside the card
    expect(page.locator("#gate-news")).to_contain_text("Gate 'approval': Answered approved; "
                                                      "resuming the run")
    expect(page.locator("#run-state")).to_have_text("succeeded")
    expect(page.locator(".gate-card")).to_have_count(0)
    expect(page.locator('[data-node="released"]')).to_have_class(re.compile(r"\bended\b"))
    expect(page.locator("#outcome")).to_contain_text("released")
    wait_status(world.home, rid, ("success",))


def test_more_iterations_are_granted_from_the_page(page: Any, world: World) -> None:
    from playwright.sync_api import expect

    page.goto(f"{world.serve.base}/runs/{world.runs['limit']}")  # no token in this tab
    expect(page.locator("#main h1")).to_have_text("Token needed")  # and nothing of the run
    expect(page.locator("#conn")).to_have_attribute("data-state", "locked")
    expect(page.locator(".gate-card")).to_have_count(0)
    assert "More iterations" not in page.locator("#main").inner_text()
    expect(page.locator("#token-input")).to_be_focused()  # the page asks for the token
    page.locator("#token-input").fill("not-the-token-" + "x" * 30)
    page.locator("#token-input").press("Enter")
    expect(page.locator("#token-input")).to_be_visible()  # refused: asked again
    page.locator("#token-input").fill(world.serve.token)
    page.locator("#token-input").press("Enter")
    expect(page.locator("#token-button")).to_be_hidden()
    card = page.locator(".gate-card")
    card.locator("input.grant").fill("4")
    card.get_by_role("button", name="Grant and continue").click()
    expect(page.locator("#run-state")).to_have_text("succeeded")
    expect(page.locator('[data-node="count"] .badge text')).to_have_text("×5")


def test_a_run_is_stopped_from_its_page(page: Any, world: World, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    flow = block_flow(tmp_path / "stop")
    before = latest_run(world.home).get("id")
    proc = start_podium(world.home, "run", flow)
    try:
        assert wait_until(lambda: latest_run(world.home).get("id") != before
                          and latest_run(world.home).get("current_step") == "hold", 30)
        rid = latest_run(world.home)["id"]
        page.goto(f"{world.serve.base}/runs/{rid}#token={world.serve.token}")
        stop = page.locator("#stop-run")
        expect(stop).to_have_text("Stop run")
        stop.click()
        expect(stop).to_have_text("Click again to stop")
        stop.click()
        expect(page.locator("#run-state")).to_have_text("interrupted")
        expect(stop).to_be_hidden()
        proc.wait(30)
        assert proc.returncode == 130
    finally:
        stop_process(proc)


def test_model_text_and_gate_prompts_never_run_as_markup(page: Any, world: World) -> None:
    from playwright.sync_api import expect

    page.goto(f"{world.serve.base}/runs/{world.runs['gate']}#token={world.serve.token}")
    prompt = page.locator(".gate-prompt")
    expect(prompt).to_contain_text("<script>window.__xss=1</script>")
    expect(prompt).to_contain_text('<img src=x onerror="window.__xss=2">')
    expect(prompt.locator("strong")).to_have_text("v1.2")  # the Markdown itself is rendered
    page.locator('[data-node="draft"]').click()
    answer = page.locator("#panel pre.answer")
    expect(answer).to_contain_text("<script>window.__xss=1</script>")
    expect(answer).to_contain_text('onerror="window.__xss=3"')
    assert page.locator("#main script, #main img").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
    blocked = [m for m in page.console_messages if "Content Security Policy" in m]
    assert not blocked, blocked  # nothing even tried to run
    errors = [m for m in page.console_messages if m.startswith("pageerror")]
    assert not errors, errors


def test_a_read_from_the_page_without_the_token_is_refused(page: Any, world: World) -> None:
    """The page's own origin gets nothing without the token: no cookie or session stands in
    for it; the page's reads carry it in their Authorization header."""
    from playwright.sync_api import expect

    page.goto(world.serve.url)
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    expect(page.locator("tr.run-row").first).to_be_visible()
    paths = ["/api/runs", f"/api/runs/{world.runs['gate']}",
             f"/api/runs/{world.runs['gate']}/events", f"/api/runs/{world.runs['gate']}/graph",
             "/api/stream"]
    statuses = page.evaluate(
        """async (paths) => {
             const out = [];
             for (const p of paths) out.push((await fetch(p, {cache: 'no-store'})).status);
             for (const p of paths) out.push((await fetch(p + '?token=' +
               sessionStorage.getItem('podium.console.token'))).status);
             return out;
           }""", paths)
    assert statuses == [401] * (2 * len(paths))
    assert page.evaluate("document.cookie") == ""
    assert page.context.cookies() == []
    with_token = page.evaluate(
        """async () => (await fetch('/api/runs', {headers: {Authorization:
             'Bearer ' + sessionStorage.getItem('podium.console.token')}})).status""")
    assert with_token == 200


def test_the_page_reconnects_after_the_console_restarts(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    home = tmp_path / "home"
    counter = EXAMPLES / "review-counter" / "workflow.yaml"
    run_podium(home, "run", counter)
    port = free_port()
    serve = Serve(home, port).start()
    try:
        page.goto(serve.url)
        expect(page.locator("tr.run-row")).to_have_count(1)
        expect(page.locator("#conn")).to_have_attribute("data-state", "live")
        assert serve.stop() == 0
        expect(page.locator("#conn")).not_to_have_attribute("data-state", "live")
        run_podium(home, "run", counter)  # a run that starts while the console is down
        serve = Serve(home, port).start()
        expect(page.locator("#conn")).to_have_attribute("data-state", "live")
        expect(page.locator("tr.run-row")).to_have_count(2)
        expect(page.locator("#banner")).to_be_hidden()
        run_podium(home, "run", counter)  # and live updates flow again
        expect(page.locator("tr.run-row")).to_have_count(3)
    finally:
        serve.stop()


def test_the_page_rebuilds_prompt_html_from_an_allowlist(page: Any, world: World) -> None:
    """Even HTML the server should never send (markdown-it-py escapes raw HTML) cannot become
    markup: markdown.js keeps allowed tags, text, and http(s)/mailto hrefs, nothing else."""
    page.goto(f"{world.serve.base}/runs/{world.runs['gate']}#token={world.serve.token}")
    page.locator(".gate-prompt").wait_for()
    hostile = ('<h2>T</h2><p>a <strong>b</strong><script>window.__xss=1</script>'
               '<img src=x onerror="window.__xss=2"><a href="javascript:window.__xss=3">j</a> '
               '<a href="https://example.org" onclick="window.__xss=4" style="x">ok</a>'
               '<iframe src="https://example.org"></iframe><em onmouseover="x">e</em></p>')
    html = page.evaluate("""async (hostile) => {
        const {renderHtml} = await import('/static/markdown.js');
        return renderHtml(hostile).outerHTML;
    }""", hostile)
    assert html == ('<div class="md"><h4>T</h4><p>a <strong>b</strong>window.__xss=1j '
                    '<a href="https://example.org" target="_blank" rel="noopener noreferrer">'
                    'ok</a><em>e</em></p></div>')
    assert page.evaluate("typeof window.__xss") == "undefined"
