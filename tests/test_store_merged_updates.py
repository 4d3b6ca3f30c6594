"""The SQLite store joins a transaction's run-row UPDATEs into one per run (a fan-out's batch
carries four per member). Joined or not, the row must end the same, to the last bit of a
float: generated sequences of the store's own UPDATE statements run one by one against a
real SQLite table and, joined by `_merged`, against a copy of it."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from podium.store.sqlite import CHAIN, _merged

COLUMNS = ("current_step, status, input_tokens, output_tokens, cost_usd, cost_partial, "
           "iterations, last_seq, updated_at")
STEP = "UPDATE runs SET current_step = ?, status = 'running' WHERE id = ?"
SPENT = ("UPDATE runs SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
         "cost_usd = cost_usd + ?, cost_partial = cost_partial OR ? WHERE id = ?")
ITERATIONS = "UPDATE runs SET iterations = ? WHERE id = ?"
LAST_SEQ = "UPDATE runs SET last_seq = ?, updated_at = ? WHERE id = ?"
ENDED = "UPDATE runs SET status = ?, cost_usd = ?, current_step = ? WHERE id = ?"
floats = st.floats(min_value=0, max_value=10, allow_nan=False)
runs = st.sampled_from(["r1", "r2"])

writes = st.lists(st.one_of(
    st.tuples(st.just(STEP), st.tuples(st.sampled_from("abc"), runs)),
    st.tuples(st.just(SPENT), st.tuples(st.integers(0, 10**6), st.integers(0, 10**4), floats,
                                        st.booleans(), runs)),
    st.tuples(st.just(ITERATIONS), st.tuples(st.integers(0, 500), runs)),
    st.tuples(st.just(LAST_SEQ), st.tuples(st.integers(0, 10**5), floats, runs)),
    st.tuples(st.just(ENDED), st.tuples(st.sampled_from(["success", "error"]), floats,
                                        st.sampled_from("xy"), runs)),
    st.tuples(st.just("INSERT INTO events (run_id) VALUES (?)"), st.tuples(runs)),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(writes)
def test_joined_run_row_updates_leave_the_row_as_the_statements_one_by_one(
        batch: list[tuple[str, tuple[object, ...]]]) -> None:
    con = sqlite3.connect(":memory:")
    con.execute(f"CREATE TABLE runs (id TEXT PRIMARY KEY, {COLUMNS})")
    con.execute("CREATE TABLE events (n INTEGER PRIMARY KEY, run_id TEXT)")
    for rid in ("r1", "r2"):
        for copy in ("one-by-one", "joined"):
            con.execute("INSERT INTO runs VALUES (?, 's', 'q', 5, 5, 0.1, 0, 0, 0, 0)",
                        (f"{rid}/{copy}",))

    def run(statements: list[tuple[str, tuple[object, ...]]], copy: str) -> None:
        for sql, params in statements:
            con.execute(sql, (*params[:-1], f"{params[-1]}/{copy}"))

    joined = _merged(list(batch))
    run(batch, "one-by-one")
    run(joined, "joined")  # type: ignore[arg-type]
    for rid in ("r1", "r2"):
        rows = [con.execute(f"SELECT {COLUMNS} FROM runs WHERE id = ?",
                            (f"{rid}/{copy}",)).fetchone() for copy in ("one-by-one", "joined")]
        assert rows[0] == rows[1]
    updates = [w for w in joined if w[0].startswith("UPDATE")]  # type: ignore[index]
    assert len(updates) <= sum(1 for sql, _ in batch if sql == ENDED) + 2


def test_a_batch_of_members_is_one_update_of_its_run() -> None:
    member = [(STEP, ("fan", "r1")), (SPENT, (120, 8, 0.0001, False, "r1")),
              (LAST_SEQ, (1, 2.0, "r1"))]
    joined = _merged(member * 50)
    assert len(joined) == 1
    sql, params = joined[0]  # type: ignore[misc]
    assert sql.count(" + ?") == 2 + 50  # the token counts summed, the costs chained in order
    assert params[-1] == "r1"
    assert len(params) == 1 + 2 + 50 + 1 + 2 + 1


def test_a_wide_batch_stays_within_sqlite_s_expression_depth() -> None:
    """A batch of thousands of members (a fast, wide fan-out) chains at most CHAIN costs per
    statement: SQLite refuses an expression deeper than 1,000, and the run would stop."""
    member = [(SPENT, (120, 8, 0.0001, i % 7 == 0, "r1")) for i in range(3000)]
    joined = _merged(member)
    assert 3000 // CHAIN <= len(joined) <= 3000 // CHAIN + 1
    con = sqlite3.connect(":memory:")
    con.execute(f"CREATE TABLE runs (id TEXT PRIMARY KEY, {COLUMNS})")
    con.execute("INSERT INTO runs VALUES ('r1', 's', 'q', 0, 0, 0.0, 0, 0, 0, 0)")
    for sql, params in joined:  # type: ignore[misc]
        con.execute(sql, params)
    one_by_one = 0.0
    for _ in range(3000):
        one_by_one += 0.0001
    assert con.execute("SELECT input_tokens, output_tokens, cost_usd, cost_partial FROM runs"
                       ).fetchone() == (360_000, 24_000, one_by_one, 1)
