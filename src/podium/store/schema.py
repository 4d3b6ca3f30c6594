"""The SQLite store's schema, as numbered migrations (PRAGMA user_version counts the applied).

Each migration runs in one transaction. Version 2 makes `events` a rowid table (a step's
multi-megabyte output then lives in overflow pages instead of splitting a WITHOUT ROWID b-tree
at every insert), drops the run state that checkpoints carried and nothing read (resume folds
the events), and adds the leases that say which process advances a run. Version 3 adds the live rows: what a
running step streams, overwritten in place and cleared when the step ends (store/sqlcore.py).
"""

from __future__ import annotations

SCHEMA_VERSION = 3

MIGRATIONS: list[str] = [
    # 1: runs, events, checkpoints, gates
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        workflow_name TEXT NOT NULL,
        workflow_path TEXT NOT NULL,
        workflow_hash TEXT NOT NULL,
        inputs TEXT NOT NULL,
        status TEXT NOT NULL,
        current_step TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        finished_at REAL,
        iterations INTEGER NOT NULL DEFAULT 0,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        cost_partial INTEGER NOT NULL DEFAULT 0,
        exit_code INTEGER,
        output TEXT,
        error TEXT,
        terminal TEXT,
        reason TEXT,
        parent_run_id TEXT,
        forked_from TEXT,
        pid INTEGER,
        pid_start TEXT,
        last_seq INTEGER NOT NULL DEFAULT 0,
        options TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX runs_by_created ON runs(created_at);
    CREATE INDEX runs_by_parent ON runs(parent_run_id);
    CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        ts REAL NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE checkpoints (
        run_id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        step TEXT,
        next_step TEXT,
        state TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE gates (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        step TEXT NOT NULL,
        kind TEXT NOT NULL,
        prompt TEXT NOT NULL,
        options TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at REAL NOT NULL,
        answer TEXT,
        additional_input TEXT NOT NULL DEFAULT '{}',
        answered_by TEXT,
        answered_at REAL
    );
    CREATE INDEX gates_by_status ON gates(status, run_id);
    """,
    # 2: events by rowid, checkpoints without state, leases
    """
    CREATE TABLE events_v2 (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        ts REAL NOT NULL,
        body TEXT NOT NULL
    );
    INSERT INTO events_v2 (run_id, seq, type, ts, body)
        SELECT run_id, seq, type, ts, body FROM events ORDER BY run_id, seq;
    DROP TABLE events;
    ALTER TABLE events_v2 RENAME TO events;
    CREATE UNIQUE INDEX events_by_run ON events(run_id, seq);
    CREATE TABLE checkpoints_v2 (
        run_id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        step TEXT,
        next_step TEXT,
        created_at REAL NOT NULL
    );
    INSERT INTO checkpoints_v2 (run_id, seq, step, next_step, created_at)
        SELECT run_id, seq, step, next_step, created_at FROM checkpoints;
    DROP TABLE checkpoints;
    ALTER TABLE checkpoints_v2 RENAME TO checkpoints;
    CREATE TABLE leases (
        run_id TEXT PRIMARY KEY,
        pid INTEGER NOT NULL,
        pid_start REAL NOT NULL,
        host TEXT NOT NULL,
        command TEXT NOT NULL,
        acquired_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL
    );
    """,
    # 3: live rows (a running step's streamed text; never history)
    """
    CREATE TABLE live (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        body TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, key)
    );
    """,
]
