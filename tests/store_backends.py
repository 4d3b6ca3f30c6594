"""The two run store backends for CLI-level tests: a `store` fixture giving the environment a
podium subprocess needs for each (nothing for SQLite in PODIUM_HOME, PODIUM_STORE=URL of a
fresh database on the session's real PostgreSQL), and reads of a PostgreSQL store for checks
that look under the CLI (its rows, and what corresponds there to SQLite's integrity check)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from pg_server import PgServer

BACKENDS = ("sqlite", "postgresql")


class Store:
    """One backend for one test: `env` goes into every podium subprocess's environment."""

    def __init__(self, backend: str, url: str | None = None) -> None:
        self.backend = backend
        self.url = url
        self.env: dict[str, str] = {"PODIUM_STORE": url} if url else {}

    @property
    def is_pg(self) -> bool:
        return self.url is not None

    def __repr__(self) -> str:
        return f"Store({self.backend})"


def make_store(request: pytest.FixtureRequest, backend: str) -> Store:
    """The `backend` store for one test (for tests that pick their backends themselves)."""
    if backend == "sqlite":
        return Store("sqlite")
    assert backend == "postgresql", backend
    server: PgServer = request.getfixturevalue("pg_server")
    return Store("postgresql", server.create_database())


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Store:
    """A SQLite store in the test's PODIUM_HOME, or a fresh database on the real PostgreSQL."""
    return make_store(request, request.param)


def pg_query(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows of one query on a PostgreSQL store (`?` markers, as in the SQLite tests); no rows
    while podium has not yet created its tables."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as con:
        try:
            return con.execute(sql.replace("?", "%s").encode(), list(params)).fetchall()
        except psycopg.errors.UndefinedTable:
            return []


# What corresponds on PostgreSQL to SQLite's `PRAGMA integrity_check` for a run store: each
# query lists what breaks one rule of the store (an empty result is a sound store). Plain SQL:
# the stress test asks it of a SQLite store too, beside its integrity check.
PG_SOUNDNESS: dict[str, str] = {
    "events of an unknown run":
        "SELECT DISTINCT run_id FROM events e WHERE NOT EXISTS "
        "(SELECT 1 FROM runs r WHERE r.id = e.run_id)",
    "runs whose events are not numbered 1..n (gap or duplicate)":
        "SELECT run_id, count(*), count(DISTINCT seq), min(seq), max(seq) FROM events "
        "GROUP BY run_id HAVING count(*) <> count(DISTINCT seq) OR min(seq) <> 1 "
        "OR max(seq) <> count(*)",
    "runs whose last_seq is not their last event":
        "SELECT r.id, r.last_seq, (SELECT max(seq) FROM events e WHERE e.run_id = r.id) "
        "FROM runs r WHERE r.last_seq <> COALESCE((SELECT max(seq) FROM events e "
        "WHERE e.run_id = r.id), 0)",
    "checkpoints pointing at no checkpoint event":
        "SELECT c.run_id, c.seq FROM checkpoints c WHERE NOT EXISTS (SELECT 1 FROM events e "
        "WHERE e.run_id = c.run_id AND e.seq = c.seq AND e.type = 'checkpoint')",
    "gates of an unknown run":
        "SELECT g.id, g.run_id FROM gates g WHERE NOT EXISTS "
        "(SELECT 1 FROM runs r WHERE r.id = g.run_id)",
    "leases of runs that are not running":
        "SELECT l.run_id, r.status FROM leases l LEFT JOIN runs r ON r.id = l.run_id "
        "WHERE r.status IS NULL OR r.status <> 'running'",
}


def pg_soundness(url: str) -> list[str]:
    """Every broken rule of the PostgreSQL store at `url`, with (up to ten of) its rows."""
    return soundness(lambda sql: pg_query(url, sql))


def soundness(query: Callable[[str], list[tuple[Any, ...]]]) -> list[str]:
    """Every broken rule of the store that `query` reads (either backend)."""
    found = []
    for rule, sql in PG_SOUNDNESS.items():
        rows = query(sql)
        if rows:
            found.append(f"{rule}: {rows[:10]}")
    return found
