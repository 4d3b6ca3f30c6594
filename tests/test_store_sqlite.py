"""The SQLite run store: the RunStore conformance suite, plus what only SQLite has."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from helpers_engine import run_cli, write
from podium.store.base import StoreError
from podium.store.sqlite import MIGRATIONS, SCHEMA_VERSION, SQLiteStore
from store_conformance import Opener, RunStoreConformance


class TestSQLiteConformance(RunStoreConformance):
    @pytest.fixture
    def opener(self) -> Opener:
        return lambda folder: SQLiteStore(folder / "podium.db")


# ---------------------------------------------------------------------- SQLite only


def _store_with_runs(folder: Path, runs: int = 3) -> Path:
    """A real store file with a few runs and events, closed (its WAL merged into the file)."""
    from store_conformance import _history, _record

    path = folder / "podium.db"
    store = SQLiteStore(path)
    for i in range(runs):
        rid = f"run{i}"
        store.create_run(_record(rid))
        for event in _history(rid):
            store.append_event(event)
    store.close()
    assert not path.with_name("podium.db-wal").exists()
    return path


def _refused(path: Path, *, match: str, verify: bool = False) -> str:
    """Opening (and using) the store fails with a StoreError; the file is left as it was."""
    before = path.read_bytes()

    def use() -> None:
        store = SQLiteStore(path, verify=verify)
        try:  # opened: the damage shows when the rows are read
            store.list_runs()
            for run in ("run0", "run1", "run2"):
                store.events(run)
                store.latest_checkpoint(run)
            store.gates()
        finally:
            store.close()

    with pytest.raises(StoreError, match=match) as info:
        use()
    message = str(info.value)
    assert str(path) in message
    assert "left untouched" in message or "newer podium" in message
    assert "\n" not in message
    assert path.read_bytes() == before
    return message


def test_the_journal_is_wal(tmp_path: Path) -> None:
    path = _store_with_runs(tmp_path, 1)
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert con.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    finally:
        con.close()


def test_a_fresh_file_is_migrated_from_user_version_0(tmp_path: Path) -> None:
    path = tmp_path / "podium.db"
    con = sqlite3.connect(path)  # a valid, empty database: user_version 0, no tables
    con.execute("PRAGMA user_version = 0")
    con.close()
    store = SQLiteStore(path)
    try:
        assert store.db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        tables = {r[0] for r in store.db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"runs", "events", "checkpoints", "gates"} <= tables
        assert store.list_runs() == []
    finally:
        store.close()
    again = SQLiteStore(path)  # reopening a current store migrates nothing
    again.close()


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "podium.db"
    path.write_bytes(b"")  # holds nothing: SQLite starts a database in it
    store = SQLiteStore(path, verify=True)
    store.close()
    assert path.stat().st_size > 0


def test_every_migration_is_in_one_transaction(tmp_path: Path) -> None:
    assert len(MIGRATIONS) == SCHEMA_VERSION
    path = tmp_path / "podium.db"
    SQLiteStore(path).close()
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master ORDER BY name")]
    finally:
        con.close()
    for name in ("runs", "events", "checkpoints", "gates"):
        assert name in tables


def test_a_schema_2_store_is_migrated_to_live_rows(tmp_path: Path) -> None:
    """A store of the podium before live rows (schema 2: today's less the live table) opens
    with its runs and events as they were, and gains the live table."""
    path = _store_with_runs(tmp_path, 2)
    con = sqlite3.connect(path)
    con.execute("DROP TABLE live")
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.close()
    store = SQLiteStore(path)
    try:
        assert store.db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,) == (3,)
        assert [r.id for r in store.list_runs()] == ["run1", "run0"]
        assert [e["seq"] for e in store.events("run0")] == list(range(1, 12))
        store.put_live("run0", "a#1", {"text": "after the migration"})
        assert store.live("run0") == {"a#1": {"text": "after the migration"}}
        assert store.delete_runs(["run0"]) == 1  # its live rows go with it
        assert store.live("run0") == {}
    finally:
        store.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = _store_with_runs(tmp_path)
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    message = _refused(path, match="newer podium")
    assert f"schema {SCHEMA_VERSION + 1}" in message


def test_another_programs_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "podium.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (text TEXT)")
    con.execute("INSERT INTO notes VALUES ('mine')")
    con.commit()
    con.close()
    _refused(path, match="another program")
    con = sqlite3.connect(path)
    try:
        assert con.execute("SELECT text FROM notes").fetchall() == [("mine",)]
        assert con.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    finally:
        con.close()


def _cut(path: Path, size: int) -> None:
    data = path.read_bytes()
    assert size < len(data)
    path.write_bytes(data[:size])


@pytest.mark.parametrize("keep", [
    pytest.param(lambda n: 10, id="inside-the-magic"),
    pytest.param(lambda n: 60, id="inside-the-header"),
    pytest.param(lambda n: 4096, id="first-page-only"),
    pytest.param(lambda n: n // 2, id="half"),
    pytest.param(lambda n: n - 4096, id="last-page-missing"),
    pytest.param(lambda n: n - 100, id="last-page-cut"),
    pytest.param(lambda n: n - 1, id="last-byte-missing"),
])
def test_a_truncated_store_is_refused_and_left_alone(tmp_path: Path, keep: Any) -> None:
    path = _store_with_runs(tmp_path)
    _cut(path, keep(path.stat().st_size))
    message = _refused(path, match="truncated|corrupt|malformed|not a SQLite")
    assert "truncated" in message or "malformed" in message


@pytest.mark.parametrize("damage", [
    pytest.param(lambda d: b"PK\x03\x04" + bytes(range(256)) * 8, id="not-sqlite-at-all"),
    pytest.param(lambda d: b"\x00" * len(d), id="zeroed"),
    pytest.param(lambda d: d[:16] + b"\xff" * 84 + d[100:], id="bad-header-fields"),
    pytest.param(lambda d: d[:4096 + 8] + b"\xa5" * 4088 + d[8192:], id="runs-page-garbage"),
    pytest.param(lambda d: d[:5 * 4096] + b"\x00" * 4096 + d[6 * 4096:], id="events-page-zeroed"),
])
def test_a_corrupted_store_is_refused_and_left_alone(tmp_path: Path, damage: Any) -> None:
    path = _store_with_runs(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    _refused(path, match="corrupt|malformed|not a SQLite|not a database|truncated",
             verify=True)


def test_unreadable_rows_are_a_store_error(tmp_path: Path) -> None:
    path = _store_with_runs(tmp_path, 1)
    con = sqlite3.connect(path)
    con.execute("UPDATE events SET body = '{\"type\": \"run_sta' WHERE seq = 2")
    con.execute("UPDATE runs SET inputs = 'not json'")
    con.commit()
    con.close()
    store = SQLiteStore(path, verify=True)  # SQLite itself is fine: the damage is in the rows
    try:
        with pytest.raises(StoreError, match="event 2 of run run0 is not readable JSON"):
            store.events("run0")
        with pytest.raises(StoreError, match="run run0 inputs is not readable JSON"):
            store.get_run("run0")
    finally:
        store.close()


WF = """
workflow: {name: tiny, entry_point: a}
agents:
  - {name: a, type: set, value: 1}
"""

ALL_COMMANDS = [["runs"], ["runs", "--format", "json"], ["show", "run0"], ["events", "run0"],
                ["stop", "run0"], ["gate", "list"], ["gate", "answer", "run0", "yes"],
                ["resume", "run0"], ["run", "{wf}"]]


@pytest.mark.parametrize(("damage", "commands"), [
    pytest.param(lambda d: d[:-100], ALL_COMMANDS, id="truncated"),
    pytest.param(lambda d: d[:4096 + 8] + b"\xa5" * 4088 + d[8192:],
                 [["run", "{wf}"], ["resume", "run0"], ["runs"], ["events", "run0"]],
                 id="garbage-page"),
    pytest.param(lambda d: b"not a database\n" * 100, [["run", "{wf}"], ["runs"]],
                 id="not-a-database"),
])
def test_every_command_reports_a_damaged_store_in_one_line(
        tmp_path: Path, damage: Any, commands: list[list[str]]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    path = _store_with_runs(home)
    path.write_bytes(damage(path.read_bytes()))
    before = path.read_bytes()
    wf = write(tmp_path, WF)
    for command in commands:
        proc = run_cli(home, *[c.format(wf=wf) for c in command])
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 3, (command, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert len(lines) == 1, (command, proc.stderr)
        assert str(path) in lines[0]
        assert "left untouched" in lines[0]
        assert path.read_bytes() == before, command
