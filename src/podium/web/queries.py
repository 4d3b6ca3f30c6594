"""What the console reads, as it sends it: the app layer's views of the runs (app/catalog.py,
over the store's read-only catalog), with the markdown of gate prompts rendered for the page.
No SQL and no rule about runs here."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.app import catalog as views
from podium.app.catalog import source_of as store_source
from podium.web.markdown import render as render_markdown
from podium.web.markdown import with_prompt_html

if TYPE_CHECKING:
    from podium.events.model import Event

STATUS_FILTERS = views.STATUS_FILTERS
__all__ = ["STATUS_FILTERS", "Reader", "store_source"]


class Reader:
    """The console's reads of one store (a SQLite file or a PostgreSQL URL); safe to share
    between threads."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.catalog = views.open_catalog(path)

    def close(self) -> None:
        self.catalog.close()

    def runs(self, *, status: str | None = None, workflow: str | None = None,
             search: str | None = None, limit: int = 200,
             include_children: bool = False) -> dict[str, Any]:
        """The runs page: newest first, with the open gates and liveness folded in."""
        return views.runs_page(self.catalog, status=status, workflow=workflow, search=search,
                               limit=limit, include_children=include_children)

    def run_row(self, run_id: str) -> dict[str, Any] | None:
        run = self.catalog.run(run_id)
        return None if run is None else run.to_json()

    def find(self, prefix: str) -> dict[str, Any] | None:
        run = self.catalog.find(prefix)
        return None if run is None else run.to_json()

    def root_of(self, row: dict[str, Any]) -> dict[str, Any]:
        run = self.catalog.run(str(row["id"]))
        return row if run is None else views.root_of(self.catalog, run).to_json()

    def family(self, run_id: str) -> list[str]:
        return views.family(self.catalog, run_id)

    def detail(self, run_id: str) -> dict[str, Any] | None:
        """One run for its page (app/catalog.py), its open gates' prompts rendered."""
        data = views.detail(self.catalog, run_id)
        if data is not None:
            data["gates"] = [_with_html(g) for g in data["gates"]]
        return data

    def gate(self, gate_id: int) -> dict[str, Any] | None:
        g = self.catalog.gate(gate_id)
        return None if g is None else _with_html(views.gate_json(g))

    def streaming(self, run_id: str) -> dict[str, dict[str, Any]]:
        return views.streaming(self.catalog, run_id)

    def history(self, run_id: str, after: int = 0) -> list[Event]:
        """The run's committed events after `after`, typed (app/history.py's union)."""
        return self.catalog.history(run_id, after)

    def events_text(self, run_id: str, after: int = 0,
                    limit: int = 100_000) -> list[tuple[int, str]]:
        """(seq, JSON text) of the events after `after`: what the stream sends as is, but for
        a gate_opened event, which gains `prompt_html` (web/markdown.py)."""
        return [(s, with_prompt_html(b))
                for s, b in self.catalog.event_texts(run_id, after, limit)]


def _with_html(gate: dict[str, Any]) -> dict[str, Any]:
    return {**gate, "prompt_html": render_markdown(str(gate.get("prompt") or ""))}

