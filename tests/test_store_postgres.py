"""The PostgreSQL run store: the RunStore conformance suite on a real server, plus what only
PostgreSQL has (its schema table, concurrent first opens, URLs without their password)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from pg_server import PgServer
from podium.app.home import open_store
from podium.cli.process import take_store
from podium.errors import UsageError
from podium.store import schema as sqlite_schema
from podium.store.base import Lease, Owner, RunOwned, StoreError
from podium.store.pg_schema import SCHEMA_VERSION
from podium.store.pgconn import display_url
from podium.store.postgres import PostgresStore
from store_backends import PG_SOUNDNESS, pg_soundness
from store_conformance import Opener, RunStoreConformance, _history, _record


class TestPostgresConformance(RunStoreConformance):
    @pytest.fixture
    def opener(self, pg_server: PgServer) -> Opener:
        databases: dict[Path, str] = {}

        def open_folder(folder: Path) -> PostgresStore:
            if folder not in databases:
                databases[folder] = pg_server.create_database()
            return PostgresStore(databases[folder], folder=folder)

        return open_folder


# ---------------------------------------------------------------------- PostgreSQL only


def test_the_schema_versions_match_sqlite() -> None:
    assert SCHEMA_VERSION == sqlite_schema.SCHEMA_VERSION


def test_a_new_database_gets_the_schema_and_its_version(pg_url: str) -> None:
    PostgresStore(pg_url).close()
    PostgresStore(pg_url).close()  # reopening a current store migrates nothing
    with psycopg.connect(pg_url) as con:
        assert con.execute("SELECT version FROM podium_schema").fetchall() == \
            [(SCHEMA_VERSION,)]
        tables = {r[0] for r in con.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"runs", "events", "checkpoints", "gates", "leases", "podium_schema"} <= tables


def test_first_opens_at_once_migrate_once(pg_url: str) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_one() -> None:
        try:
            start.wait()
            PostgresStore(pg_url).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(pg_url) as con:
        assert con.execute("SELECT version FROM podium_schema").fetchall() == \
            [(SCHEMA_VERSION,)]


def test_a_newer_schema_is_refused(pg_url: str) -> None:
    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url) as con:
        con.execute("UPDATE podium_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match=f"newer podium \\(schema {SCHEMA_VERSION + 1}") as info:
        PostgresStore(pg_url)
    assert "\n" not in str(info.value)


def test_another_programs_database_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url) as con:
        con.execute("CREATE TABLE runs (text TEXT)")
    with pytest.raises(StoreError, match="no podium schema version"):
        PostgresStore(pg_url)


def test_an_unreachable_server_is_one_line_without_the_password(pg_server: PgServer) -> None:
    url = pg_server.url().replace(f":{pg_server.port}/", ":1/")
    with pytest.raises(StoreError, match="cannot connect to the run store") as info:
        PostgresStore(url)
    message = str(info.value)
    assert pg_server.password not in message
    assert "postgresql://podium@127.0.0.1:1/postgres" in message
    assert "\n" not in message


def test_a_wrong_password_is_named_without_it(pg_server: PgServer) -> None:
    url = pg_server.url().replace(pg_server.password, "wrong-secret-pw")
    with pytest.raises(StoreError, match="password authentication failed") as info:
        PostgresStore(url)
    assert "wrong-secret-pw" not in str(info.value)


def test_a_failed_write_stops_every_later_write(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        store.create_run(_record("r1"))
        with psycopg.connect(pg_url) as con:
            con.execute("REVOKE ALL ON events FROM PUBLIC")
            con.execute("ALTER TABLE events ADD CONSTRAINT small CHECK (seq < 3)")
        history = _history("r1")
        store.append_event(history[0])
        store.append_event(history[1])
        with pytest.raises(StoreError, match="cannot write to the run store") as info:
            store.append_event(history[2])
        assert "\n" not in str(info.value)
        with pytest.raises(StoreError, match="cannot write"):
            store.update_run("r1", status="failed")
        assert store.get_run("r1").status == "running"  # reads still work
    finally:
        store.close()


def test_unreadable_rows_are_a_store_error(pg_url: str) -> None:
    """As on SQLite (test_store_sqlite.py): rows the server holds fine but podium cannot read
    are a StoreError naming the row, not a traceback."""
    store = PostgresStore(pg_url)
    try:
        store.create_run(_record("run0"))
        for event in _history("run0"):
            store.append_event(event)
        with psycopg.connect(pg_url) as con:
            con.execute("UPDATE events SET body = '{\"type\": \"run_sta' WHERE seq = 2")
            con.execute("UPDATE runs SET inputs = 'not json'")
        with pytest.raises(StoreError, match="event 2 of run run0 is not readable JSON"):
            store.events("run0")
        with pytest.raises(StoreError, match="run run0 inputs is not readable JSON"):
            store.get_run("run0")
    finally:
        store.close()


def test_the_soundness_rules_find_what_they_name(pg_url: str) -> None:
    """The checks the store stress test makes on PostgreSQL (store_backends.PG_SOUNDNESS)
    pass on a sound store and name each kind of damage."""
    store = PostgresStore(pg_url)
    try:
        store.create_run(_record("r1"))
        for event in _history("r1"):
            store.append_event(event)
    finally:
        store.close()
    assert pg_soundness(pg_url) == []
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("DELETE FROM events WHERE seq = 3")
        con.execute("DELETE FROM events WHERE seq = 10")  # the last checkpoint's event
        con.execute("INSERT INTO gates (run_id, step, kind, prompt, options, status, "
                    "created_at) VALUES ('gone', 's', 'human', 'p', '[]', 'open', 0)")
        con.execute("INSERT INTO leases VALUES ('r1', 1, 1.0, 'h', 'run', 0, 0)")
        con.execute("INSERT INTO events (run_id, seq, type, ts, body) "
                    "VALUES ('gone', 1, 't', 0, '{}')")
    found = " ".join(pg_soundness(pg_url))
    for rule in PG_SOUNDNESS:
        if rule != "runs whose last_seq is not their last event":
            assert rule in found, (rule, found)


def test_text_with_nul_characters_is_stored(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        store.create_run(_record("r1", error="bad\x00byte"))
        assert store.get_run("r1").error == "bad\ufffdbyte"
    finally:
        store.close()


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://u:s3cret@db.example:5433/runs", "postgresql://u@db.example:5433/runs"),
    ("postgres://u@h/db?sslmode=require&password=s3cret",
     "postgres://u@h/db?sslmode=require&password=***"),
    ("postgresql:///runs?host=/var/run/postgresql", "postgresql:///runs?host=/var/run/postgresql"),
])
def test_urls_are_shown_without_their_password(url: str, shown: str) -> None:
    assert display_url(url) == shown


def test_store_is_taken_out_of_argv_anywhere_before_a_bare_double_dash(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # set, then removed: monkeypatch puts back what was (delenv of an unset variable records
    # nothing, and take_store's PODIUM_STORE leaked into every later test of the session)
    monkeypatch.setenv("PODIUM_STORE", "")
    monkeypatch.delenv("PODIUM_STORE")
    assert take_store(["run", "f.yaml", "--store", "a.db", "-i", "x=1"]) == \
        ["run", "f.yaml", "-i", "x=1"]
    assert os.environ["PODIUM_STORE"] == "a.db"
    assert take_store(["--store=postgresql://h/db", "runs", "--", "--store", "kept"]) == \
        ["runs", "--", "--store", "kept"]
    assert os.environ["PODIUM_STORE"] == "postgresql://h/db"
    with pytest.raises(UsageError, match="--store needs a value"):
        take_store(["runs", "--store"])


def test_an_unknown_scheme_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PODIUM_STORE", "mysql://u:pw@h/db")
    with pytest.raises(UsageError, match="'mysql'") as info:
        open_store()
    assert "pw" not in str(info.value)


def _at_once(count: int, work: Callable[[int], object]) -> list[object]:
    """Run `work(i)` in `count` threads released together; their results (or exceptions)."""
    results: list[object] = [None] * count
    start = threading.Barrier(count)

    def one(i: int) -> None:
        start.wait()
        try:
            results[i] = work(i)
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_handles_racing_for_a_lease_leave_one_owner(pg_url: str) -> None:
    handles = [PostgresStore(pg_url) for _ in range(6)]
    try:
        handles[0].create_run(_record("r1"))
        results = _at_once(6, lambda i: handles[i].acquire_lease(
            "r1", Owner(1000 + i, 1.0, "host", "resume"), lambda held: True))
        won = [r for r in results if isinstance(r, Lease)]
        assert len(won) == 1
        assert all(isinstance(r, RunOwned) for r in results if r not in won)
        assert handles[0].lease("r1") == won[0]
    finally:
        for h in handles:
            h.close()


def test_handles_numbering_at_once_keep_seqs_one_to_n(pg_url: str) -> None:
    """Workers committing events of one run at the same moment: the run row's lock orders
    them, so the seqs are 1..n with none lost or repeated."""
    handles = [PostgresStore(pg_url) for _ in range(4)]
    try:
        handles[0].create_run(_record("r1"))
        for h in handles:
            h.number_at_commit()
        history = _history("r1")

        def append(i: int) -> None:
            for _ in range(15):
                handles[i].append_event(history[2])  # script_output: committed at once

        assert _at_once(4, append) == [None] * 4
        seqs = [e["seq"] for e in handles[0].events("r1")]
        assert seqs == list(range(1, 61))
        assert handles[0].get_run("r1").last_seq == 60
    finally:
        for h in handles:
            h.close()


def test_dropped_connections_are_replaced(pg_url: str, pg_server: PgServer) -> None:
    """The server ends every connection (a restart, a failover): the store's pool and the
    console's reader connect again instead of failing the run."""
    from podium.store.pgconn import PgReader

    store = PostgresStore(pg_url)
    reader = PgReader(pg_url)
    try:
        store.create_run(_record("r1"))
        assert reader.execute("SELECT count(*) FROM runs").fetchone() == (1,)
        database = pg_url.rsplit("/", 1)[1]
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            ended = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM "
                                  "pg_stat_activity WHERE datname = %s", (database,)).fetchone()
        assert ended is not None
        assert ended[0] >= 2
        store.update_run("r1", status="failed")
        assert store.get_run("r1").status == "failed"
        assert reader.execute("SELECT status FROM runs").fetchone() == ("failed",)
    finally:
        reader.close()
        store.close()


def test_an_older_schema_is_migrated_in_place(pg_url: str) -> None:
    """A database an older podium left at version 2 gains what came later, its runs kept."""
    from podium.store.pg_schema import MIGRATIONS

    with psycopg.connect(pg_url) as con:
        con.execute("CREATE TABLE podium_schema (version INTEGER NOT NULL)")
        con.execute("INSERT INTO podium_schema (version) VALUES (2)")
        for migration in MIGRATIONS[:2]:
            for statement in migration.split(";"):
                if statement.strip():
                    con.execute(statement.encode())
        con.execute("INSERT INTO runs (id, workflow_name, workflow_path, workflow_hash, inputs, "
                    "status, created_at, updated_at) VALUES ('old', 'w', '/w.yaml', 'h', '{}', "
                    "'success', 1, 1)")
    store = PostgresStore(pg_url)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.get_run("old").status == "success"
        store.put_live("old", "k", {"text": "x"})
        assert store.live("old") == {"k": {"text": "x"}}
    finally:
        store.close()
