"""PostgreSQL connections for the run store and the console: psycopg loaded only when a
`postgresql://` store is used, URLs shown without their password, errors as one line."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from podium.errors import UsageError
from podium.store.base import StoreError

if TYPE_CHECKING:
    import psycopg

SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(text: str) -> bool:
    return text.strip().lower().startswith(SCHEMES)


def display_url(url: str) -> str:
    """The URL as messages show it: no password, in the user part nor in the query."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, host = netloc.rsplit("@", 1)
            netloc = f"{user.split(':', 1)[0]}@{host}"
        query = "&".join(f"{k}={'***' if k.lower() == 'password' else v}"
                         for k, v in parse_qsl(parts.query, keep_blank_values=True))
        return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
    except ValueError:
        return url.split("://", 1)[0] + "://(unreadable URL)"


def _password(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        found = parts.password or dict(parse_qsl(parts.query)).get("password")
    except ValueError:
        return None
    return found or None


def one_line(exc: BaseException, url: str) -> str:
    """An error of psycopg as one line of text that never holds the URL's password."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    secret = _password(url)
    if secret:
        text = text.replace(secret, "***")
    return re.sub(r"(password=)\S+", r"\1***", text)


def require_psycopg() -> None:
    """Import psycopg and its pool, or say which extra to install (exit 2)."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise UsageError("a PostgreSQL run store needs psycopg 3 and its pool, which are not "
                         "installed: pip install 'podium[postgres]'") from None


# How often (ms) the server checks, while a statement runs or waits, that its client is alive.
CLIENT_CHECK_MS = 1000


def watch_client(con: psycopg.Connection[Any]) -> None:
    """Have the server cancel this connection's statement when its process is gone (killed
    while the statement waited for a lock). Servers before 14 lack the setting: nothing."""
    import psycopg

    try:
        con.execute(f"SET client_connection_check_interval = {CLIENT_CHECK_MS}".encode())
    except psycopg.Error:
        if not con.autocommit:
            con.rollback()


def connect(url: str, *, read_only: bool = False) -> psycopg.Connection[Any]:
    """One autocommit connection (the console's reader, the change feed, migrations)."""
    require_psycopg()
    import psycopg

    try:
        con = psycopg.connect(url, autocommit=True, connect_timeout=10)
        if read_only:
            con.execute("SET default_transaction_read_only = on")
        return con
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to the run store {display_url(url)}: "
                         f"{one_line(exc, url)}") from None


class PgReader:
    """A read-only connection for the console that takes the SQLite dialect's `?` markers
    (and matches LIKE in any case, as SQLite does), so one SQL text serves both stores. It
    connects again once when the server dropped it (a restart)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._con: psycopg.Connection[Any] | None = connect(url, read_only=True)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        import psycopg

        text = re.sub(r"\bLIKE\b", "ILIKE", sql.replace("%", "%%").replace("?", "%s"))
        for attempt in (1, 2):
            if self._con is None or self._con.closed:
                self._con = connect(self.url, read_only=True)
            try:
                return self._con.execute(text.encode(), list(params))
            except psycopg.OperationalError as exc:
                self.close()
                if attempt == 2:
                    raise StoreError(f"cannot read the run store {display_url(self.url)}: "
                                     f"{one_line(exc, self.url)}") from None
            except psycopg.Error as exc:
                raise StoreError(f"cannot read the run store {display_url(self.url)}: "
                                 f"{one_line(exc, self.url)}") from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(Exception):
                self._con.close()
            self._con = None
