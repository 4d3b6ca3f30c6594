"""The fleet TUI's run detail shows what the running step's model streams, live (Textual's
pilot against a real `podium run` whose local model server holds its stream open): the text so
far with its context gauge, as plain text (never console markup), gone once the step ends."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fakes.held_openai import HeldOpenAI
from helpers_engine import cli_env, podium_argv, write

pytest.importorskip("textual")

from textual.widgets import Static

from podium.tui.app import DetailScreen, FleetApp
from test_fleet import _drive, _select, _until

FLOW = """
workflow:
  name: storyteller
  entry_point: tell
  runtime: {provider: openai, default_model: gpt-4o-mini}
agents:
  - {name: tell, prompt: "tell a story"}
"""

# the first third (more than the 2 KB a delta waits for) streams, then the server holds
STORY = ("Once upon a [bold]streamed[/bold] time " + "lorem ipsum " * 600 + "middle " +
         "dolor sit " * 220 + "THE END")


def test_the_run_detail_shows_the_running_steps_text_live(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = write(tmp_path, FLOW, "story.yaml")
    with HeldOpenAI(STORY) as srv:
        env = cli_env(home, {"OPENAI_BASE_URL": srv.url + "/v1", "OPENAI_API_KEY": "sk-test"})
        proc = subprocess.Popen(podium_argv("run", flow), env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                encoding="utf-8")
        try:
            assert srv.held.wait(60)

            async def body(app: FleetApp, pilot: object) -> None:
                await _until(pilot, lambda: any(r.status == "running" for r in app.rows))
                _select(app, app.rows[0].id)
                await pilot.press("enter")  # type: ignore[attr-defined]
                screen = app.screen
                assert isinstance(screen, DetailScreen)
                live = screen.query_one("#detail-live", Static)

                def shown() -> str:
                    return str(live.content)

                await _until(pilot, lambda: "lorem ipsum" in shown())
                assert live.display
                assert shown().startswith("streaming tell #1 · ≈ ")
                assert "of 128,000 tokens (" in shown()
                assert "THE END" not in shown()
                tail = STORY[: len(STORY) // 3 + 1][-200:]
                assert tail in shown()  # the end of what streamed so far
                srv.release.set()
                await _until(pilot, lambda: not live.display)
                assert screen.data is not None
                assert [p.step for p in screen.data.path][:1] == ["tell"]

            _drive(home, body)
            assert proc.wait(60) == 0
        finally:
            srv.release.set()
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)


def test_model_text_in_the_detail_is_never_markup() -> None:
    from podium.tui.app import live_text

    text = live_text({"a#2": {"text": "[bold]x[/bold] [link=http://e]y[/link]",
                              "reasoning": "[red]why[/red]", "tools": ["[b]t[/b]"],
                              "tokens_used": 10, "context_window": 1000}})
    assert "[bold]x[/bold] [link=http://e]y[/link]" in text.plain
    assert "[red]why[/red]" in text.plain
    assert "tool calls: [b]t[/b]" in text.plain
    assert text.plain.startswith("streaming a #2 · 10 of 1,000 tokens (1%)")
