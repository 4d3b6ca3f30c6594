"""The console shows a running step's model output live, in a real headless Chromium against a
live `podium serve`, while a `podium run` in another process streams from a local Chat
Completions server that holds the stream open until the test lets it go:

- the step panel shows the partial text before the step finishes, with the context gauge,
  and model text that looks like HTML stays text;
- once the stream ends, the panel shows the step's output as for any finished step, and the
  live text is gone.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from console_helpers import XSS_IMG, Serve, latest_run, stop_process, wait_status, write_flow
from test_browser import (  # the same Chromium fixtures, and the same skip without it
    CHROMIUM,
    _shot,
    browser,
    page,
    pytestmark,
)

from fakes.held_openai import HeldOpenAI
from helpers_engine import cli_env, podium_argv, wait_until

__all__ = ["CHROMIUM", "browser", "page", "pytestmark"]

FLOW = """
workflow:
  name: release-notes
  entry_point: draft
  runtime: {provider: openai, default_model: gpt-4o-mini}
agents:
  - {name: draft, prompt: "Write the release notes of v1.2"}
"""

# the first third (more than the 2 KB a delta waits for) streams, then the server holds
PROSE = ("The release notes begin with the parser: it now reads nested anchors without "
         "copying them, and a workflow with a thousand steps loads in a tenth of the time. ")
STORY = ("Release notes, v1.2 " + XSS_IMG + "\n\n" + PROSE * 40 + "\n\nmiddle " +
         PROSE * 20 + "THE END")


def test_the_step_panel_shows_the_model_text_while_it_streams(page: Any,
                                                              tmp_path: Path) -> None:
    from playwright.sync_api import expect

    home = tmp_path / "home"
    flow = write_flow(tmp_path, "notes.yaml", FLOW)
    with HeldOpenAI(STORY) as srv:
        env = cli_env(home, {"OPENAI_BASE_URL": srv.url + "/v1", "OPENAI_API_KEY": "sk-test"})
        proc = subprocess.Popen(podium_argv("run", flow), env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                encoding="utf-8", start_new_session=True)
        serve = None
        try:
            assert srv.held.wait(60)
            assert wait_until(lambda: latest_run(home).get("current_step") == "draft", 30)
            run_id = latest_run(home)["id"]
            serve = Serve(home).start()
            page.goto(f"{serve.base}/runs/{run_id}#token={serve.token}")
            page.locator('[data-node="draft"]').click()  # it stays selected after its end
            live = page.locator("#panel pre.live-text")
            expect(live).to_contain_text("Release notes, v1.2")
            expect(live).to_contain_text(XSS_IMG)  # model text is text, never markup
            assert page.evaluate("window.__xss") is None
            expect(live).not_to_contain_text("THE END")  # the stream is still held
            expect(page.locator("#panel .live-gauge")).to_contain_text("of 128k tokens")
            expect(page.locator("#run-state")).to_have_text("running")
            _shot(page, "console-run-streaming.png")
            srv.release.set()
            expect(page.locator("#run-state")).to_have_text("succeeded")
            expect(page.locator("#panel pre.output")).to_contain_text("THE END")
            expect(live).to_have_count(0)
            assert proc.wait(60) == 0
            wait_status(home, run_id, ("success",))
        finally:
            srv.release.set()
            stop_process(proc)
            if serve is not None:
                serve.stop()


EACH = """
workflow:
  name: notes-each
  entry_point: fan
  input:
    items: {type: array}
  runtime: {provider: openai, default_model: gpt-4o-mini}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    agent: {name: worker, prompt: "Write the release notes of {{ item }}"}
agents: []
"""


def test_a_for_each_item_shows_its_text_while_it_streams(page: Any, tmp_path: Path) -> None:
    # the item runs as `worker[0]`, its agent streams as `worker` (live row `worker#1`)
    from playwright.sync_api import expect

    home = tmp_path / "home"
    flow = write_flow(tmp_path, "each.yaml", EACH)
    with HeldOpenAI(STORY) as srv:
        env = cli_env(home, {"OPENAI_BASE_URL": srv.url + "/v1", "OPENAI_API_KEY": "sk-test"})
        proc = subprocess.Popen(podium_argv("run", flow, "--input-json", 'items=["v1.2"]'),
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                start_new_session=True)
        serve = None
        try:
            assert srv.held.wait(60)
            assert wait_until(lambda: latest_run(home).get("id") is not None, 30)
            run_id = latest_run(home)["id"]
            serve = Serve(home).start()
            page.goto(f"{serve.base}/runs/{run_id}#token={serve.token}")
            page.locator('[data-node="fan"]').click()
            member = page.locator("#panel .members > details")
            expect(member).to_have_count(1)
            expect(member.locator("summary")).to_contain_text("worker[0]")
            member.locator("summary").click()
            live = member.locator("pre.live-text")
            expect(live).to_contain_text("Release notes, v1.2")
            expect(live).not_to_contain_text("THE END")  # the stream is still held
            srv.release.set()
            expect(page.locator("#run-state")).to_have_text("succeeded")
            expect(live).to_have_count(0)
            assert proc.wait(60) == 0
        finally:
            srv.release.set()
            stop_process(proc)
            if serve is not None:
                serve.stop()
