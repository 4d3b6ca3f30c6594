"""Plugins by name, `name@marketplace`: `runtime.plugin_sources` says where each marketplace
comes from, and the marketplace's catalog (Conductor's and the runtimes' formats,
`.claude-plugin/marketplace.json` or `.github/plugin/marketplace.json`) says where each plugin
is inside it; a source without a catalog is one plugin itself.

A source is a folder (`./vendor/plugins`, relative to the workflow) or a git repository
(`owner/repo`, an http/https/ssh URL, `git@host:path`, `file://`; `#ref` after it, a full
40-character commit pins it). This module reads folders only; git sources are fetched by
`podium run` before the run starts (app/plugin_fetch.py) into PODIUM_HOME's cache, where a
`locate` callable given by the caller finds their checkout. No network here.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from podium.providers.skills import SkillProblem
from podium.records import record

CATALOGS = (".claude-plugin/marketplace.json", ".github/plugin/marketplace.json")
MANIFESTS = (".claude-plugin/plugin.json", ".github/plugin/plugin.json", "plugin.json")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_GITHUB = re.compile(r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$")


@record(frozen=True)
class Source:
    """One `plugin_sources` entry: a folder, or a git repository at a ref."""

    market: str
    kind: str  # "local" | "git"
    location: str  # the folder as written, or the git URL
    ref: str | None = None
    path: str | None = None  # where the catalog or plugin is inside the source

    @property
    def pinned(self) -> bool:
        return self.kind == "local" or bool(self.ref and SHA_RE.match(self.ref))


# where a git source was fetched to (None: not fetched yet)
Locate = Callable[[Source], Path | None]


class NotFetched(SkillProblem):
    """A git source not in the cache yet: `validate` warns (it never fetches), a run fails."""


def source_key(source: Source) -> str:
    return f"{source.location}#{source.ref or ''}"


def fetched_index(environ: Mapping[str, str] | None = None) -> Path:
    """The file where `podium run` records each fetched git source's checkout (its folder in
    the registry cache, by location and ref)."""
    from podium.providers.runtime_common import podium_home

    return podium_home(os.environ if environ is None else environ) / "registry-cache" / \
        "plugin-sources.json"


def read_index(index: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)} \
        if isinstance(data, dict) else {}


def fetched_locator(environ: Mapping[str, str] | None = None) -> Locate:
    """Finds a git source's checkout from the last fetch, without the network."""
    index = fetched_index(environ)

    def locate(source: Source) -> Path | None:
        entry = read_index(index).get(source_key(source))
        folder = Path(entry["folder"]) if entry and entry.get("folder") else None
        return folder if folder is not None and folder.is_dir() else None

    return locate


def parse_source(market: str, value: Any) -> Source:
    """A `plugin_sources` value: a string, or `{source: ..., path: ...}`. Raises SkillProblem."""
    path = None
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"source", "path"})
        if unknown:
            raise SkillProblem(f"plugin source '{market}': unknown key '{unknown[0]}' (a source "
                               "takes source and path)")
        path = value.get("path")
        value = value.get("source")
        if path is not None and not isinstance(path, str):
            raise SkillProblem(f"plugin source '{market}': path must be a string")
    if not isinstance(value, str) or not value.strip():
        raise SkillProblem(f"plugin source '{market}' must be a folder or a git repository "
                           "(a string)")
    text = value.strip()
    if text.startswith((".", "/", "~")) and not text.startswith("./.git"):
        return Source(market, "local", text, None, path)
    location, _, ref = text.partition("#")
    if _GITHUB.match(location):
        location = f"https://github.com/{location}.git"
    elif not (location.startswith(("https://", "http://", "ssh://", "file://", "git@"))):
        raise SkillProblem(f"plugin source '{market}': '{text}' is neither a folder (./...) "
                           "nor a git repository (owner/repo, a URL or git@host:path)")
    return Source(market, "git", location, ref or None, path)


def sources_of(raw: Any) -> dict[str, Source]:
    """Every `runtime.plugin_sources` entry, parsed. Raises SkillProblem."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SkillProblem("plugin_sources maps each marketplace name to its source")
    return {str(k): parse_source(str(k), v) for k, v in raw.items()}


def source_root(source: Source, base: Path, locate: Locate | None) -> Path:
    """The folder a source stands for. Raises SkillProblem."""
    if source.kind == "local":
        root = Path(os.path.normpath(base / os.path.expanduser(source.location)))
        if not root.is_dir():
            raise SkillProblem(f"plugin source '{source.market}': folder not found: "
                               f"'{source.location}' (looked for {root})")
    else:
        found = locate(source) if locate is not None else None
        if found is None:
            raise NotFetched(f"plugin source '{source.market}' ({source.location}"
                               f"{'#' + source.ref if source.ref else ''}) is not fetched yet: "
                               "`podium run` fetches it before the run starts")
        root = found
    if source.path:
        root = root / source.path
        if not root.is_dir():
            raise SkillProblem(f"plugin source '{source.market}': it has no folder "
                               f"'{source.path}'")
    return root


def _json(file: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SkillProblem(f"{what}: {file.name} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise SkillProblem(f"{what}: {file.name} is not a JSON object")
    return data


def _manifest_name(folder: Path) -> str | None:
    for rel in MANIFESTS:
        if (folder / rel).is_file():
            name = _json(folder / rel, f"plugin {folder}").get("name")
            return name if isinstance(name, str) else None
    return None


def _inside(root: Path, rel: str, what: str) -> Path:
    target = Path(os.path.normpath(root / rel))
    if target != root and root not in target.parents:
        raise SkillProblem(f"{what}: '{rel}' points outside the marketplace")
    if not target.is_dir():
        raise SkillProblem(f"{what}: folder '{rel}' not found in the marketplace")
    return target


def find_in_catalog(name: str, market: str, root: Path) -> Path:
    """The folder of plugin `name` in the marketplace at `root`. Raises SkillProblem."""
    what = f"plugin '{name}@{market}'"
    for rel in CATALOGS:
        if not (root / rel).is_file():
            continue
        catalog = _json(root / rel, f"marketplace '{market}'")
        meta = catalog.get("metadata")
        prefix = meta.get("pluginRoot") if isinstance(meta, dict) else None
        entries = catalog.get("plugins")
        listed = [p for p in entries if isinstance(p, dict)] if isinstance(entries, list) else []
        for entry in listed:
            if entry.get("name") != name:
                continue
            src = entry.get("source")
            if not isinstance(src, str):
                kind = src.get("source") if isinstance(src, dict) else type(src).__name__
                raise SkillProblem(f"{what}: its catalog entry's source is of kind '{kind}'; "
                                   "podium takes catalog sources that are folders inside the "
                                   "marketplace")
            if prefix and isinstance(prefix, str) and not src.startswith(("./", "../")):
                src = f"{prefix.rstrip('/')}/{src}"
            return _inside(root, src, what)
        names = ", ".join(str(p.get("name")) for p in listed) or "none"
        raise SkillProblem(f"{what}: marketplace '{market}' ({rel}) has no plugin '{name}' "
                           f"(it lists: {names})")
    declared = _manifest_name(root)
    if declared is not None and declared != name:
        raise SkillProblem(f"{what}: marketplace '{market}' has no catalog and is the plugin "
                           f"'{declared}'")
    return root


def resolve_named(entry: str, base: Path, raw_sources: Any, locate: Locate | None) -> Path:
    """The folder of `name@marketplace`, with `runtime.plugin_sources` as written (only the
    marketplace named is read, so one bad source is reported once, where it is).
    Raises SkillProblem."""
    name, _, market = entry.partition("@")
    if not name or not market:
        raise SkillProblem(f"plugin '{entry}': a plugin by name is name@marketplace")
    declared = raw_sources if isinstance(raw_sources, Mapping) else {}
    if market not in declared:
        names = ", ".join(sorted(str(k) for k in declared)) or "none"
        raise SkillProblem(f"plugin '{entry}': marketplace '{market}' is not in "
                           f"runtime.plugin_sources (it declares: {names})")
    try:
        source = parse_source(market, declared[market])
    except SkillProblem:
        raise SkillProblem(f"plugin '{entry}': its marketplace's source is not valid (see "
                           f"runtime.plugin_sources.{market})") from None
    return find_in_catalog(name, market, source_root(source, base, locate))
