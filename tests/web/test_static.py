"""The page ships inside the package, complete: no build step, no Node.js. Every file the page
loads is on the served list and every listed file exists; the scripts never use innerHTML, eval
or inline handlers (so model text can never become markup)."""

from __future__ import annotations

import re
from importlib import resources

from podium.web.app import STATIC_FILES

STATIC = resources.files("podium.web") / "static"


def _text(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def test_the_listed_files_are_exactly_the_files_in_the_package() -> None:
    shipped = {p.name for p in STATIC.iterdir() if p.is_file()}
    assert shipped == set(STATIC_FILES)


def test_everything_the_page_loads_is_served() -> None:
    html = _text("index.html")
    refs = set(re.findall(r'(?:src|href)="/static/([^"]+)"', html))
    assert refs <= set(STATIC_FILES)
    for name in (n for n in STATIC_FILES if n.endswith(".js")):
        for spec in re.findall(r"""from\s+['"]\./([^'"]+)['"]""", _text(name)):
            assert spec in STATIC_FILES, f"{name} imports {spec}, which is not served"


def test_no_script_builds_markup_from_strings() -> None:
    for name in (n for n in STATIC_FILES if n.endswith(".js")):
        code = _text(name)
        for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                       "eval(", "new Function", "setAttribute('on", 'setAttribute("on'):
            assert banned not in code, f"{name} uses {banned}"


def test_the_page_has_no_inline_script_or_style() -> None:
    html = _text("index.html")
    assert re.search(r"<script(?![^>]*\bsrc=)", html) is None
    assert "<style" not in html
    assert " style=" not in html
    assert re.search(r"\son[a-z]+=", html) is None


def test_the_token_travels_only_in_the_authorization_header() -> None:
    """EventSource cannot send headers (it would need the token in its URL or in a cookie),
    so the page reads its streams with fetch; no script sets a cookie or puts the token in a
    query string."""
    for name in (n for n in STATIC_FILES if n.endswith(".js")):
        code = _text(name)
        for banned in ("EventSource", "document.cookie", "?token=", "&token="):
            assert banned not in code, f"{name} uses {banned}"
    assert "Authorization = `Bearer ${token()}`" in _text("net.js")


def test_only_the_markdown_module_parses_html_and_it_rebuilds_from_an_allowlist() -> None:
    """Gate prompts come as HTML rendered by markdown-it-py on the server; markdown.js parses it
    into an inert document and rebuilds it from allowed tags. No other script parses HTML."""
    for name in (n for n in STATIC_FILES if n.endswith(".js")):
        if name != "markdown.js":
            assert "DOMParser" not in _text(name), f"{name} parses HTML"
    code = _text("markdown.js")
    assert "const TAGS = new Set(" in code
    assert "SAFE_URL.test(href)" in code
