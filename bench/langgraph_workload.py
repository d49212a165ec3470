"""LangGraph's own SQLite-checkpointed agent for ``bench/agent.py``'s workload, one process per call.

    python bench/langgraph_workload.py one PATH TURNS [WARMUP]
    python bench/langgraph_workload.py many PATH CONCURRENCY TURNS [WARMUP]

The graph is LangGraph's ReAct shape: a "model" node and a "tools" node, ``tools_condition``
routing model -> tools while the last ``AIMessage`` has tool calls, tools -> model always. The
model node is an instant fake that returns an ``AIMessage`` with ``bench/agent.py``'s ~300 B
``TEXT`` and one tool call ``work(turn, batch)`` (``ARG``: ~200 B of arguments) for turns
0..N-2, then a final answer; the tools node is LangGraph's prebuilt ``ToolNode`` over a
``langchain_core`` tool ``work`` that returns ``work_result(turn)`` (~500 B), the way a LangGraph
agent dispatches its tools. The model node builds its ``AIMessage`` directly (no
``BaseChatModel``, no callbacks): if anything, that flatters LangGraph.

The state's ``messages`` live in a ``DeltaChannel`` (``langgraph.channels.DeltaChannel``, beta in
the installed langgraph, with the batch reducer its docstring names,
``langgraph.graph.message._messages_delta_reducer``): a checkpoint stores the new writes, not the
whole transcript, but for a snapshot every 100 updates (its default ``snapshot_frequency``).

The checkpointer is a FILE: ``one`` uses ``SqliteSaver`` (sync ``graph.invoke``), ``many`` uses
``AsyncSqliteSaver`` (aiosqlite) on one file with CONCURRENCY ``graph.ainvoke`` calls (each its
own ``thread_id``, async nodes) gathered with asyncio. Both invoke with ``durability="sync"``:
each step's checkpoint is written before the next step starts (LangGraph's default is
``"async"``). The savers keep their own SQLite settings (``PRAGMA journal_mode=WAL``, Python's
``sqlite3`` default ``synchronous``).

Each call first runs WARMUP turns (default 10) on a separate fresh file, untimed (imports, first
connection, first compiled step), then the timed run on a fresh file, and prints one JSON line:
``one``: ``wall`` (s), ``turns``, ``blob_bytes`` (the lengths of the ``checkpoints`` table's
``checkpoint`` and ``metadata`` blobs and of the ``writes`` table's ``value`` blobs), ``file_bytes``
(the SQLite file after ``PRAGMA wal_checkpoint(TRUNCATE)``), ``checkpoints`` and ``writes`` (rows);
``many``: ``wall`` (s from just before the first ``ainvoke`` to all done) and ``turns`` (their sum).
Needs the ``bench`` extra (``pip install -c constraints.txt -e '.[bench]'``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

try:  # the bench extra; without it the module still imports (tests/test_meta.py imports every bench)
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langchain_core.tools import StructuredTool
    from langgraph.channels import DeltaChannel
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import _messages_delta_reducer
    from langgraph.prebuilt import ToolNode, tools_condition
except ImportError:
    INSTALLED = False
else:
    INSTALLED = True

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agent import ARG, TEXT, work_result  # bench/agent.py: the same turn

TASK = "Process every batch."
FINAL = "All batches are done."


class State(TypedDict):
    """The graph's state: the transcript, in a ``DeltaChannel`` (only the new writes checkpointed)."""

    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]


def fake_reply(messages: list[AnyMessage], turns: int) -> AIMessage:
    """The scripted model: a tool call for turns 0..N-2 (the turn is the count of replies so far),
    then the answer; the same text and arguments as ``bench/agent.py``'s ``respond_for``."""
    turn = sum(1 for m in messages if isinstance(m, AIMessage))
    if turn >= turns - 1:
        return AIMessage(content=FINAL)
    call = {"name": "work", "args": {"turn": turn, "batch": ARG}, "id": f"call_{turn}", "type": "tool_call"}
    return AIMessage(content=TEXT, tool_calls=[call])


def work(turn: int, batch: str) -> str:
    """Process one batch."""
    return work_result(turn)


async def awork(turn: int, batch: str) -> str:
    """Process one batch (the async graph's tool)."""
    return work_result(turn)


def build_graph(turns: int, checkpointer: Any, *, is_async: bool = False) -> Any:
    """The compiled model/tools graph of ``turns`` turns on ``checkpointer`` (async nodes and an
    async tool with ``is_async``, for ``ainvoke``)."""
    tool = StructuredTool.from_function(
        func=work, coroutine=awork if is_async else None, name="work", description="Process one batch."
    )
    builder = StateGraph(State)
    if is_async:

        async def amodel(state: State) -> dict[str, list[AnyMessage]]:
            """The model node (async)."""
            return {"messages": [fake_reply(state["messages"], turns)]}

        builder.add_node("model", amodel)
    else:

        def model(state: State) -> dict[str, list[AnyMessage]]:
            """The model node."""
            return {"messages": [fake_reply(state["messages"], turns)]}

        builder.add_node("model", model)
    builder.add_node("tools", ToolNode([tool]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


def run_config(thread_id: str, turns: int) -> dict[str, Any]:
    """The invoke config: the thread, and a recursion limit above the run's 2*N supersteps."""
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": 2 * turns + 10}


def check(result: dict[str, Any], turns: int) -> None:
    """The run made ``turns`` model replies and ended on the answer."""
    replies = [m for m in result["messages"] if isinstance(m, AIMessage)]
    assert len(replies) == turns and replies[-1].content == FINAL, (len(replies), replies[-1])


def sync_run(path: Path, turns: int) -> float:
    """Seconds of one ``graph.invoke`` of ``turns`` turns on a ``SqliteSaver`` over the file ``path``."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        graph = build_graph(turns, SqliteSaver(conn))
        inputs = {"messages": [HumanMessage(content=TASK)]}
        began = time.perf_counter()
        result = graph.invoke(inputs, run_config("bench-1", turns), durability="sync")
        wall = time.perf_counter() - began
        check(result, turns)
        return wall
    finally:
        conn.close()


def store_sizes(path: Path) -> dict[str, int]:
    """The checkpoint tables' blob bytes and rows, and the file's size after a WAL checkpoint."""
    conn = sqlite3.connect(str(path))
    try:
        ck = conn.execute(
            "SELECT count(*), sum(length(checkpoint)) + sum(length(metadata)) FROM checkpoints"
        ).fetchone()
        wr = conn.execute("SELECT count(*), coalesce(sum(length(value)), 0) FROM writes").fetchone()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return {"blob_bytes": int(ck[1]) + int(wr[1]), "checkpoints": int(ck[0]), "writes": int(wr[0])}


async def many_runs(path: Path, concurrency: int, turns: int) -> float:
    """Seconds for ``concurrency`` ``ainvoke`` runs of ``turns`` turns, gathered, on one
    ``AsyncSqliteSaver`` file: from just before the first starts to all done."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()
        graph = build_graph(turns, saver, is_async=True)

        async def one(i: int) -> None:
            inputs = {"messages": [HumanMessage(content=f"{TASK} ({i})")]}
            check(await graph.ainvoke(inputs, run_config(f"bench-{i}", turns), durability="sync"), turns)

        began = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(concurrency)))
        return time.perf_counter() - began


def main(argv: list[str]) -> None:
    """``one PATH TURNS [WARMUP]`` or ``many PATH CONCURRENCY TURNS [WARMUP]``: print the JSON line."""
    if not INSTALLED:
        raise SystemExit("LangGraph is not installed: pip install -c constraints.txt -e '.[bench]'")
    mode, path = argv[0], Path(argv[1])
    warm = path.with_name(path.stem + "-warmup.sqlite")
    if mode == "one":
        turns, warmup = int(argv[2]), int(argv[3]) if len(argv) > 3 else 10
        if warmup:
            sync_run(warm, warmup)
        wall = sync_run(path, turns)
        out: dict[str, Any] = {"wall": wall, "turns": turns, **store_sizes(path), "file_bytes": path.stat().st_size}
    elif mode == "many":
        concurrency, turns = int(argv[2]), int(argv[3])
        warmup = int(argv[4]) if len(argv) > 4 else 10
        if warmup:
            asyncio.run(many_runs(warm, 1, warmup))
        out = {"wall": asyncio.run(many_runs(path, concurrency, turns)), "turns": concurrency * turns}
    else:
        raise SystemExit(f"unknown mode {mode!r}: one or many")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
