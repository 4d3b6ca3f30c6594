"""The console's page of an eval (/evals/ID) in a real headless Chromium: the loading state,
the variants' table with the known figures, the cost-against-pass-rate plot, the outcome
bars, the differences with their tests, and links to every run."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from console_helpers import Serve
from test_browser import ARGS, CHROMIUM, SHOTS

from eval_project import eval_project
from helpers_engine import run_cli

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, str]]:
    tmp = tmp_path_factory.mktemp("eval-page")
    root = eval_project(tmp)
    home = tmp / "home"
    done = run_cli(home, "eval", root / "triage.eval.yaml", "--format", "json", timeout=300)
    eval_id = json.loads(done.stdout)["eval_id"]
    serve = Serve(home).start()
    try:
        yield serve, eval_id
    finally:
        serve.stop()


def test_the_eval_page_shows_the_variants_plots_and_differences(served: tuple[Serve, str]
                                                                ) -> None:
    from playwright.sync_api import expect, sync_playwright

    serve, eval_id = served
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            # a slow store: the eval's data is held until the page has said it is loading
            # (instead of showing zeros), then let through
            held: list[Any] = []

            def hold(route: Any) -> None:
                if held and held[0] is None:  # released
                    route.continue_()
                else:
                    held.append(route)

            page.route(re.compile(r".*/api/evals/.*"), hold)
            page.goto(f"{serve.base}/evals/{eval_id}#token={serve.token}")
            expect(page.locator("#eval-loading")).to_contain_text("Loading eval")
            assert held, "the page showed its loading state before asking for the eval"
            waiting, held[:] = list(held), [None]
            for route in waiting:
                route.continue_()
            expect(page.locator("#eval-page h1")).to_have_text(f"eval {eval_id}")
            good = page.locator('#eval-variants tr[data-variant="good"]')
            bad = page.locator('#eval-variants tr[data-variant="bad"]')
            expect(good.locator(".pass-rate")).to_have_text("100% of 4")
            expect(bad.locator(".pass-rate")).to_have_text("0% of 4")
            expect(good.locator(".cost")).to_have_text("$0.00045")
            expect(bad.locator(".cost")).to_have_text("$0.00800")
            expect(page.locator("#eval-scatter g.point")).to_have_count(2)
            expect(page.locator('#eval-outcomes rect.bar[data-variant="bad"]')).to_have_count(2)
            diff = page.locator("#eval-differences")
            expect(diff).to_contain_text("row r1: good → bug, bad → feature")
            expect(diff.locator("tr.significant")).to_have_count(2)
            expect(diff).to_contain_text("Fisher's exact test, p = 0.0286")
            expect(page.locator("#eval-runs tbody tr")).to_have_count(8)
            expect(page.locator("#conn")).to_have_text("connected")
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "eval.png"), full_page=True)
            page.locator("#eval-runs tbody tr a").first.click()
            expect(page).to_have_url(re.compile(r"/runs/[0-9a-f]+"))
            assert not errors
        finally:
            browser.close()

