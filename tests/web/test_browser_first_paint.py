"""The console's first paint in a real browser (Debian's Chromium through Playwright) against a
live `podium serve`: until the first data arrives, the runs page and a run page say they are
loading; they never show "0 runs" or zero counts for a store that has runs.

The first data is held back by intercepting the page's own request (Playwright's route) and
let through once the loading state was checked: no sleeps, no timing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from console_helpers import LOOP_FLOW, Serve, run_id_of, run_podium, write_flow
from test_browser import ARGS, CHROMIUM

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="the browser tests need Debian's chromium at /usr/bin/chromium")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, str]]:
    root = tmp_path_factory.mktemp("first-paint")
    home = root / "home"
    flow = write_flow(root, "loop.yaml", LOOP_FLOW.replace("max_iterations: 3",
                                                          "max_iterations: 30"))
    rid = run_id_of(run_podium(home, "run", flow))
    serve = Serve(home).start()
    try:
        yield serve, rid
    finally:
        serve.stop()


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


def _held(page: Any, pattern: Any) -> list[Any]:
    """Hold back every request that matches `pattern` until the test lets it through."""
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)

    page.route(pattern, hold)
    return held


def _release(page: Any, held: list[Any], pattern: Any) -> None:
    for route in held:
        route.continue_()
    page.unroute(pattern)


def test_the_runs_page_says_it_is_loading_before_its_first_data(
        browser: Any, served: tuple[Serve, str]) -> None:
    from playwright.sync_api import expect

    serve, rid = served
    page = browser.new_page()
    try:
        stream = re.compile(r"/api/stream")
        held = _held(page, stream)
        page.goto(serve.url)
        expect(page.locator("#runs-loading")).to_be_visible()
        expect(page.locator("#runs-loading")).to_have_text("Loading runs…")
        expect(page.locator("#runs-summary")).not_to_contain_text("0 runs")
        expect(page.locator('[data-filter="all"] .count')).to_have_text("…")
        assert held, "the page asked for no data"
        _release(page, held, stream)
        expect(page.locator(f'tr[data-run="{rid}"]')).to_be_visible()
        expect(page.locator("#runs-loading")).to_have_count(0)
        expect(page.locator("#runs-summary")).to_have_text("1 runs")
        expect(page.locator('[data-filter="all"] .count')).to_have_text("1")
    finally:
        page.close()


def test_a_run_page_says_it_is_loading_before_its_first_data(
        browser: Any, served: tuple[Serve, str]) -> None:
    from playwright.sync_api import expect

    serve, rid = served
    page = browser.new_page()
    try:
        detail = re.compile(rf"/api/runs/{rid}(/graph)?$")
        held = _held(page, detail)
        page.goto(serve.url.replace("/#", f"/runs/{rid}#"))
        expect(page.locator("#run-loading")).to_be_visible()
        expect(page.locator("#run-loading")).to_contain_text(f"Loading run {rid}")
        expect(page.locator("h1.run-title")).to_have_text("Loading run…")
        _release(page, held, detail)
        expect(page.locator("h1.run-title")).to_have_text("looper")
        expect(page.locator("#run-loading")).to_have_count(0)
        expect(page.locator("#run-state .pill")).to_have_text("succeeded")
    finally:
        page.close()
