"""`podium run` fetches a workflow's git `plugin_sources` before its first step: each into
the registry cache (app/registries.py, pinned by commit, verified by sha256 on reuse), and
records the checkout where `plugins: [name@marketplace]` finds it (providers/plugin_sources.py).
`validate` never fetches; a run that cannot fetch a source stops before anything is recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from podium.engine.run import Engine


def fetch_plugin_sources(engine: Engine) -> None:
    """Fetch the workflow's git plugin sources (nothing when it declares none)."""
    raw = engine.workflow.workflow.runtime.plugin_sources
    if not raw:
        return
    from podium.app.registries import RegistryError, fetch_git
    from podium.events.model import Warning_
    from podium.providers.plugin_sources import (
        fetched_index,
        read_index,
        source_key,
        sources_of,
    )
    from podium.providers.skills import SkillProblem

    try:
        sources = sources_of(raw)
    except SkillProblem as exc:
        raise RegistryError(f"{engine.path}: runtime.plugin_sources: {exc}") from None
    index = fetched_index()
    for source in sources.values():
        if source.kind != "git":
            continue
        name = "plugin-" + hashlib.sha256(source.location.encode()).hexdigest()[:16]
        try:
            folder, commit, warning = fetch_git(name, source.location, source.ref)
        except RegistryError as exc:
            raise RegistryError(f"plugin source '{source.market}': {exc}") from None
        if warning:
            engine.bus.emit(Warning_(message=f"plugin source '{source.market}': {warning}"))
        entries = read_index(index)
        entries[source_key(source)] = {"folder": str(folder), "commit": commit}
        index.parent.mkdir(parents=True, exist_ok=True)
        tmp = index.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entries, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, index)
