"""A followed run survives its LISTEN connection dropping (``docs/design.md``, section 7): the
follower reconnects, reads the journal again, and ``await run`` returns once the worker completed the
run; nothing is left as "Task exception was never retrieved". Real PostgreSQL, the follower's
connection ended with ``pg_terminate_backend``."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import psycopg
import pytest

import loom_nb as loom
from loom_nb.messages import ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime
from loom_nb.worker import Worker
from tests import stores

ONE_STORE = True  # PostgreSQL only: a follower needs a shared journal


async def listener_pids(channel: str) -> list[int]:
    with psycopg.connect(stores.POSTGRES, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE query = %s", (f'LISTEN "{channel}"',)).fetchall()
    return [int(r[0]) for r in rows]


async def wait_for_listeners(channel: str, count: int) -> list[int]:
    for _ in range(200):
        pids = await listener_pids(channel)
        if len(pids) >= count:
            return pids
        await asyncio.sleep(0.05)
    raise AssertionError(f"no LISTEN connection on {channel}")


def terminate(pids: list[int]) -> None:
    with psycopg.connect(stores.POSTGRES, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


@pytest.mark.usefixtures("_postgres_server")
async def test_a_follower_whose_connection_drops_reconnects_and_its_await_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = stores.new_schema("follow-drop")
    notebook, worker_rt = Runtime.open(url), Runtime.open(url)
    agent = loom.Agent(ScriptedModel([ModelResponse.text("done")]), name="followed")
    unretrieved: list[Any] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    try:
        run: Any = agent.submit("go", "job-1", runtime=notebook, view=False)
        waiting = asyncio.ensure_future(run.wait(timeout=30))
        channel = notebook.journal.channel  # type: ignore[attr-defined]
        terminate(await wait_for_listeners(channel, 1))  # the follower's LISTEN connection
        with caplog.at_level(logging.WARNING, logger="loom_nb"):
            await Worker(worker_rt).run(until_idle=True)
            assert worker_rt.result("job-1").status == "completed"
            await asyncio.wait_for(waiting, 20)
        assert run.status == "completed" and run.result.output == "done"
        assert "reconnect" in caplog.text
        follower = run.follow() or run._follower
        await asyncio.wait_for(asyncio.shield(follower), 5)
        gc.collect()
        assert unretrieved == []
    finally:
        loop.set_exception_handler(None)
        notebook.close()
        worker_rt.close()
