"""DBOS's own PostgreSQL-backed workflow for ``bench/postgres.py``'s workload, one process per call.

    python bench/dbos_workload.py SYSTEM_DB_URL TURNS run WORKFLOW_ID
    python bench/dbos_workload.py SYSTEM_DB_URL TURNS crash WORKFLOW_ID CRASH_TURN
    python bench/dbos_workload.py SYSTEM_DB_URL TURNS recover WORKFLOW_ID CRASH_TURN

A workflow of ``TURNS`` turns: each a ``@DBOS.step`` "model" call (``bench/agent.py``'s text and tool
call, as a dict) and, but for the last turn, a ``@DBOS.step`` "tool" call (its 500 B result), the way
DBOS's agent integrations make each model and tool call a step. ``run`` prints the workflow's wall time
and the bytes DBOS stored for it (the serialized step outputs, the workflow's inputs and output) as
JSON. ``crash`` exits (code 86) when the model step of turn CRASH_TURN starts. ``recover`` launches
DBOS on the same system database, whose recovery resumes the workflow, and prints the time from just
before ``DBOS.launch()`` to the first NEW step call. DBOS is configured once per process (a global),
hence one process per call. Needs ``pip install dbos`` (the ``bench`` extra).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agent import ARG, TEXT, work_result  # bench/agent.py: the same turn

_first: list[float] = []
_began = [0.0]
_seen = threading.Event()
_crash_turn = [-1]
_new_from = [-1]


def build(url: str) -> Any:
    """Configure DBOS on the system database ``url`` and define the workflow; returns it (DBOS is
    imported here, so the module imports without it)."""
    from dbos import DBOS, DBOSConfig

    config: DBOSConfig = {
        "name": "loom-bench",
        "system_database_url": url,
        "executor_id": "bench",
        "log_level": "WARNING",
    }
    DBOS(config=config)

    @DBOS.step()
    def model_step(turn: int, turns: int) -> dict[str, Any]:
        """The scripted model: a tool call for turns 0..N-2, then the answer."""
        if turn == _crash_turn[0]:
            os._exit(86)
        if turn >= _new_from[0] >= 0 and not _first:
            _first.append(time.perf_counter() - _began[0])
            _seen.set()
        if turn >= turns - 1:
            return {"text": "All batches are done.", "tool_calls": []}
        return {"text": TEXT, "tool_calls": [{"name": "work", "arguments": {"turn": turn, "batch": ARG}}]}

    @DBOS.step()
    def tool_step(turn: int, batch: str) -> str:
        """The tool: one batch's result (about 500 B)."""
        return work_result(turn)

    @DBOS.workflow()
    def agent_workflow(task: str, turns: int) -> str:
        """Model, tool, model, tool... until the model answers."""
        for turn in range(turns):
            response = model_step(turn, turns)
            if not response["tool_calls"]:
                return str(response["text"])
            call = response["tool_calls"][0]
            tool_step(call["arguments"]["turn"], call["arguments"]["batch"])
        return "out of turns"

    return agent_workflow


def stored_bytes(url: str, workflow_id: str) -> int:
    """The bytes DBOS stored for the workflow: step outputs, inputs and output (their text)."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as pg:
        steps = pg.execute(
            "SELECT coalesce(sum(length(coalesce(output, '')) + length(coalesce(function_name, ''))), 0) "
            "FROM dbos.operation_outputs WHERE workflow_uuid = %s",
            (workflow_id,),
        ).fetchone()
        status = pg.execute(
            "SELECT coalesce(length(inputs), 0) + coalesce(length(output), 0) FROM dbos.workflow_status "
            "WHERE workflow_uuid = %s",
            (workflow_id,),
        ).fetchone()
    return int(steps[0] if steps else 0) + int(status[0] if status else 0)


def main() -> None:
    url, turns, mode, workflow_id = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    crash_turn = int(sys.argv[5]) if len(sys.argv) > 5 else -1
    agent_workflow = build(url)
    from dbos import DBOS, SetWorkflowID

    if mode == "crash":
        _crash_turn[0] = crash_turn
    if mode == "recover":
        _new_from[0] = crash_turn
        _began[0] = time.perf_counter()
        DBOS.launch()  # recovers the workflow the crash left PENDING
        _seen.wait(120)
        handle = DBOS.retrieve_workflow(workflow_id)
        assert handle.get_result() == "All batches are done."
        print(json.dumps({"first_call_ms": _first[0] * 1e3 if _first else None}))
        DBOS.destroy()
        return
    DBOS.launch()
    began = time.perf_counter()
    with SetWorkflowID(workflow_id):
        out = agent_workflow("Process every batch.", turns)
    wall = time.perf_counter() - began
    assert out == "All batches are done.", out
    print(json.dumps({"wall": wall, "bytes": stored_bytes(url, workflow_id)}))
    DBOS.destroy()


if __name__ == "__main__":
    main()
