"""Many processes on one PostgreSQL journal: the script the lease test runs in several processes.

    python tests/crash/lease_flow.py <postgres_url> <side_effects_log> seed <n>
    python tests/crash/lease_flow.py <postgres_url> <side_effects_log> recover

``seed`` starts ``n`` executions of ``leased`` at once; each calls its ``prep`` step, then waits on an
event nobody sets, and when all have called it the process kills itself (``os._exit``): ``n`` crashed
executions, each still leased to a dead process (``prep``'s outcome may not be journaled yet: it is
idempotent, so recovery may call it again; ``charge`` is not, and must run once). ``recover``
runs ``runtime.recover()`` and prints which executions this process completed. Every effect call
appends ``<effect> <execution> <pid>``
to the side-effects log (``O_APPEND``, one ``write`` per line), so the test counts real calls.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from loom_nb.kernel import EffectContext, Engine, ExecutionContext, FlowRegistry

FLOWS = FlowRegistry()
CRASH_EXIT_CODE = 9
#: Set in a ``seed`` process: the flow parks after ``prep`` until the process dies.
SEEDING: dict[str, asyncio.Event] = {}
#: The side-effects log of this process.
LOG: list[str] = []


async def leased(ctx: ExecutionContext, inp: Any) -> Any:
    """prep (idempotent) -> [the seed process dies here] -> charge (NOT idempotent)."""
    await ctx.execute("prep", inp)
    if SEEDING:
        await asyncio.Event().wait()  # the seed process dies while every execution waits here
    receipt = await ctx.execute("charge", inp)
    return {"receipt": receipt}


FLOWS.register(leased)


def build(url: str, log_path: str) -> Engine:
    """An engine over the PostgreSQL journal with both effects logging each real call."""
    from loom_nb.journal.postgres_store import PostgresJournal

    rt = Engine(PostgresJournal(url), flows=FLOWS)
    LOG[:] = [log_path]

    def register(effect_id: str, idempotent: bool, pause: float) -> None:
        def effect(value: Any, ctx: EffectContext) -> Any:
            fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{effect_id} {ctx.execution_id} {os.getpid()}\n".encode())
            finally:
                os.close(fd)
            time.sleep(pause)  # a call that takes a while, so the recovering processes overlap
            return {"effect": effect_id, "n": value}

        rt.effects.register(effect_id, effect, idempotent=idempotent)

    register("prep", True, 0.0)
    register("charge", False, 0.01)
    return rt


async def seed(rt: Engine, n: int) -> None:
    """Start ``n`` executions, let each run ``prep``, then die holding every lease."""
    SEEDING["parked"] = asyncio.Event()
    tasks = [asyncio.create_task(rt.start(leased, i, execution_id=f"job-{i:03d}")) for i in range(n)]
    log = Path(LOG[0])
    while not log.exists() or log.read_text().count("prep ") < n:
        await asyncio.sleep(0.01)
    sys.stdout.flush()
    os._exit(CRASH_EXIT_CODE)
    await asyncio.gather(*tasks)  # never reached


async def recover(rt: Engine) -> list[str]:
    """Recover what is left; the executions this process completed."""
    return [r.execution_id for r in await rt.recover() if r.status == "completed"]


def main(argv: list[str]) -> int:
    """Entry point (see the module docstring)."""
    url, log_path, mode, *rest = argv
    rt = build(url, log_path)
    try:
        if mode == "seed":
            asyncio.run(seed(rt, int(rest[0])))
            return 1
        done = asyncio.run(recover(rt))
    finally:
        rt.close()
    print(json.dumps({"pid": os.getpid(), "completed": done}))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.crash import lease_flow

    sys.exit(lease_flow.main(sys.argv[1:]))
