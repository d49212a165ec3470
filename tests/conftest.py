"""Suite-wide fixtures: no test may reach the network (loopback and Unix sockets only)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _allowed(sock: socket.socket, address: Any) -> bool:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _allowed(self, address):
        raise RuntimeError(f"a test tried to reach the network ({address!r}); tests use local servers only")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if not _allowed(self, address):
        raise RuntimeError(f"a test tried to reach the network ({address!r}); tests use local servers only")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True, scope="session")
def _no_network() -> Iterator[None]:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    yield
    socket.socket.connect = _real_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _real_connect_ex  # type: ignore[method-assign]


# -- the journal store: DuckDB and PostgreSQL (tests/stores.py) ---------------------------------------
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test of the ``stores.BOTH_STORES`` folders once per store (unless its module sets
    ``ONE_STORE = "why"``)."""
    from tests import stores

    module = metafunc.module
    parts = module.__name__.split(".")
    if (
        len(parts) > 2
        and parts[1] in stores.BOTH_STORES
        and not hasattr(module, "ONE_STORE")
        and "_journal_store" in metafunc.fixturenames
    ):
        metafunc.parametrize("_journal_store", stores.STORES, indirect=True)


@pytest.fixture(scope="session")
def _postgres_server() -> str:
    """The PostgreSQL server the tests use; fails the session when it cannot be reached (never a skip)."""
    from tests import stores

    why = stores.postgres_reachable()
    if why is not None:
        pytest.exit(
            f"PostgreSQL is not reachable at {stores.POSTGRES} ({why}). The journal, kernel, agent, "
            "analysis and crash suites run on it too: start PostgreSQL 15 there (trust auth, database "
            "'test'), or point LOOM_TEST_POSTGRES at another server.",
            returncode=3,
        )
    return stores.POSTGRES


@pytest.fixture(autouse=True)
def _journal_store(request: pytest.FixtureRequest) -> Iterator[str]:
    """The store this test runs on (``duckdb`` unless parametrized); on PostgreSQL, every journal the
    test opened is closed and its schemas are dropped after it."""
    from tests import stores

    store = getattr(request, "param", "duckdb")
    if store != "postgres":
        stores.current = store
        yield store
        return
    request.getfixturevalue("_postgres_server")
    from loom_nb.journal.postgres_store import PostgresJournal

    opened: list[PostgresJournal] = []
    real_init = PostgresJournal.__init__

    def tracking_init(self: PostgresJournal, *args: Any, **kwargs: Any) -> None:
        opened.append(self)
        real_init(self, *args, **kwargs)

    PostgresJournal.__init__ = tracking_init  # type: ignore[method-assign]
    stores.current = store
    try:
        yield store
    finally:
        PostgresJournal.__init__ = real_init  # type: ignore[method-assign]
        stores.current = "duckdb"
        for journal in opened:
            journal.close()
        stores.drop_schemas()
