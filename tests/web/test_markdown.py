"""Gate prompts rendered on the server by markdown-it-py (web/markdown.py): CommonMark, raw HTML
escaped, links only http(s)/mailto, images as their alt text; served as `prompt_html` in a
run's gates and in its gate_opened events."""

from __future__ import annotations

import json
import re

import pytest

from conftest import Live, Store
from podium.web.markdown import render, with_prompt_html


def test_markdown_is_rendered() -> None:
    html = render("## Release approval\nApprove **v1.2**? It *is* `ready`.\n\n"
                  "- one\n- two\n\n1. first\n2. second\n\n> quoted\n\n```\nx < y\n```\n\n---\n")
    assert "<h2>Release approval</h2>" in html
    assert "<strong>v1.2</strong>" in html
    assert "<em>is</em>" in html
    assert "<code>ready</code>" in html
    assert "<ul>\n<li>one</li>\n<li>two</li>\n</ul>" in html
    assert "<ol>\n<li>first</li>" in html
    assert "<blockquote>\n<p>quoted</p>\n</blockquote>" in html
    assert "<pre><code>x &lt; y\n</code></pre>" in html
    assert "<hr />" in html


@pytest.mark.parametrize("source", [
    "<script>window.__xss=1</script>",
    '<img src=x onerror="window.__xss=2">',
    "<div onclick=alert(1)>hi</div>",
    "<!-- c --><iframe src=https://e.org></iframe>",
    "text <a href=\"javascript:alert(1)\">x</a>",
])
def test_raw_html_is_escaped(source: str) -> None:
    html = render(source)
    assert "<script" not in html
    assert "<img" not in html
    assert "<div" not in html
    assert "<iframe" not in html
    assert "<!--" not in html
    assert "<a " not in html
    assert "&lt;" in html


@pytest.mark.parametrize(("source", "href"), [
    ("[site](https://example.org/a?b=1&c=2)", "https://example.org/a?b=1&amp;c=2"),
    ("[plain](http://example.org)", "http://example.org"),
    ("[mail](mailto:ops@example.org)", "mailto:ops@example.org"),
    ("<https://example.org/auto>", "https://example.org/auto"),
])
def test_safe_links_are_links(source: str, href: str) -> None:
    html = render(source)
    assert f'<a href="{href}" target="_blank" rel="noopener noreferrer">' in html


@pytest.mark.parametrize("source", [
    "[x](javascript:alert(1))", "[x](JAVASCRIPT:alert(1))", "[x](data:text/html,hi)",
    "[x](vbscript:msgbox)", "[x](file:///etc/passwd)", "[x](/relative)", "[x](ftp://e.org)",
])
def test_other_links_stay_text(source: str) -> None:
    html = render(source)
    assert "<a" not in html
    assert "[x](" in html


def test_images_show_their_alt_text_and_load_nothing() -> None:
    html = render('![diagram <b>](https://example.org/i.png "t")')
    assert "<img" not in html
    assert "example.org" not in html
    assert html == "<p>diagram &lt;b&gt;</p>\n"


def test_gate_opened_events_gain_prompt_html_and_others_are_untouched() -> None:
    gate = json.dumps({"type": "gate_opened", "seq": 4, "prompt": "Approve **it**? <b>x</b>"})
    out = json.loads(with_prompt_html(gate))
    assert out["prompt"] == "Approve **it**? <b>x</b>"
    assert out["prompt_html"] == "<p>Approve <strong>it</strong>? &lt;b&gt;x&lt;/b&gt;</p>\n"
    other = json.dumps({"type": "model_exchange", "text": "mentions gate_opened"})
    assert with_prompt_html(other) is other


def test_the_api_serves_prompt_html(console: Live, store: Store) -> None:
    c = console.client()
    gate = c.get(f"/api/runs/{store.parked}").json()["gates"][0]
    html = gate["prompt_html"]
    assert "<strong>v1.2</strong>" in html
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html
    assert re.search(r"<(script|img)\b", html) is None
    events = c.get(f"/api/runs/{store.parked}/events").json()
    opened = next(e for e in events if e["type"] == "gate_opened")
    assert opened["prompt_html"] == html
