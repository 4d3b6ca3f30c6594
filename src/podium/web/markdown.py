"""Gate prompts as HTML for the console, rendered here by markdown-it-py (CommonMark) rather than
by regular expressions in the page.

Safe by construction: raw HTML in the source is escaped (`html=False`), links are kept only for
http, https and mailto (anything else stays text), images show as their alt text (the page
loads nothing from elsewhere), and every link opens in a new tab without an
opener. The page still rebuilds the HTML from an allowlist of tags (static/markdown.js), so a
mistake here cannot become script.
"""

from __future__ import annotations

import json
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

SAFE_SCHEMES = ("http://", "https://", "mailto:")


def _safe_link(url: str) -> bool:
    return url.strip().lower().startswith(SAFE_SCHEMES)


def _link_open(renderer: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict,
               env: EnvType) -> str:
    tokens[idx].attrSet("target", "_blank")
    tokens[idx].attrSet("rel", "noopener noreferrer")
    return renderer.renderToken(tokens, idx, options, env)


def _image(renderer: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict,
           env: EnvType) -> str:
    return escapeHtml(renderer.renderInlineAsText(tokens[idx].children or [], options, env))


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.add_render_rule("image", _image)
    md.add_render_rule("link_open", _link_open)
    return md


_MD = _parser()


def render(source: str) -> str:
    """The HTML of a Markdown text, its raw HTML escaped and its links limited to safe schemes."""
    return str(_MD.render(source))


def with_prompt_html(body: str) -> str:
    """An event's JSON text, a `gate_opened` event gaining `prompt_html`; others as they are."""
    if '"gate_opened"' not in body:
        return body
    event: Any = json.loads(body)
    if not isinstance(event, dict) or event.get("type") != "gate_opened":
        return body
    event["prompt_html"] = render(str(event.get("prompt") or ""))
    return json.dumps(event, separators=(",", ":"))
