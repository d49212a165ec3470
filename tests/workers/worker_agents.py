"""The agent the worker tests submit and ``loom-nb worker --import tests.workers.worker_agents`` runs.

``clerk`` answers in two model turns: turn 0 calls ``record`` (NOT idempotent) with the input, turn 1
answers ``done <input>``. Every real call of ``record`` appends ``record <execution> <pid>`` to the
file ``LOOM_WORKER_LOG`` names (``O_APPEND``, one ``write``), so a test counts calls across processes.
``LOOM_WORKER_PAUSE`` (seconds) makes ``record`` take that long after logging (a test kills a worker in it);
``LOOM_WORKER_SLOW_TURN`` makes each model turn sleep that long before answering.
"""

from __future__ import annotations

import os
import time

import loom_nb as loom
from loom_nb.messages import ModelRequest, ModelResponse


@loom.tool
def record(item: str) -> str:
    """Record one item (a side effect counted in the log).

    Args:
        item: The item.
    """
    log = os.environ.get("LOOM_WORKER_LOG")
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"record {item} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
    time.sleep(float(os.environ.get("LOOM_WORKER_PAUSE", "0")))  # the call was made; its answer comes later
    return f"recorded {item}"


def respond(request: ModelRequest) -> ModelResponse:
    """Turn 0: call ``record``; turn 1: answer."""
    time.sleep(float(os.environ.get("LOOM_WORKER_SLOW_TURN", "0")))
    turns = sum(1 for m in request.messages if m.role == "assistant")
    item = next(m.text for m in request.messages if m.role == "user")
    if turns == 0:
        return ModelResponse.tool_calls([("record", {"item": item})])
    return ModelResponse.text(f"done {item}")


clerk = loom.Agent(model=loom.ScriptedModel(respond), tools=[record], name="clerk")


@loom.tool(needs_approval=True)
def send(item: str) -> str:
    """Send one item (asks for approval first).

    Args:
        item: The item.
    """
    return f"sent {item}"


def respond_gated(request: ModelRequest) -> ModelResponse:
    """Turn 0: call ``send`` (a gate); turn 1: answer."""
    turns = sum(1 for m in request.messages if m.role == "assistant")
    item = next(m.text for m in request.messages if m.role == "user")
    if turns == 0:
        return ModelResponse.tool_calls([("send", {"item": item})])
    return ModelResponse.text(f"sent {item}")


courier = loom.Agent(model=loom.ScriptedModel(respond_gated), tools=[send], name="courier")
