"""An agent run in a subprocess that a crash switch kills after the Nth committed event.

Usage::

    python tests/crash/agent_crash_flow.py <journal_path> <calls_log> <crash> <start|recover>

The agent (``loom.Agent`` over a DuckDB FILE journal) answers in four model turns: turn 0 calls
``lookup``; turn 1 calls ``lookup`` and ``convert`` together; turn 2 calls ``book`` (NOT
idempotent: cut in flight it is in doubt); turn 3 answers with a text built from every tool result it
was sent, so the final output equals the uninterrupted run's only if the transcript does.

``start`` starts execution ``run-1`` and drives it to the end; ``recover`` calls
``runtime.recover()`` in a fresh process, then resolves an ``InDoubt`` gate (if the crash left one)
with ``happened`` and the output ``book`` would have given. The result is printed as one JSON line,
with ``commits``: the number of events committed by this process after each commit.

Every model call and every tool call appends ``<model|tool> <idempotency_key> <attempt>`` to the
calls log (flushed and fsynced) when it is made, so the parent test sees which calls ran, across
crashes. ``crash`` is ``none``; N: the process dies (exit code 86) right after the commit that
brings the events committed by this process to N or more (``CrashingJournal``); or
``inside:<step id>``: it dies INSIDE that step's call, right after logging it (the call was made,
its answer is lost).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import loom_nb as loom
from loom_nb.journal import ContentBlob, DuckDBJournal, Event
from loom_nb.kernel import EffectContext, FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.testing import CrashingJournal, FakeClock, SequentialIds

EXECUTION_ID = "run-1"
CRASH_EXIT_CODE = 86
INPUT = "Plan a trip: weather in Paris and Rome, 10 EUR in USD, then book Rome."
#: The step whose call kills the process (``inside:<step id>``), if any.
DIE_INSIDE: str | None = None


class CountingCrashJournal(CrashingJournal):
    """``CrashingJournal`` that also remembers the committed count after every commit."""

    def __init__(self, inner: DuckDBJournal, crash_after: int | None) -> None:
        super().__init__(inner, crash_after, exit_code=CRASH_EXIT_CODE)
        self.commits: list[int] = []

    def append(self, events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        """Append, remember the count, then maybe die."""
        self.commits.append(self.committed + len(events))
        super().append(events, contents)


def log_call(path: str, what: str, key: str, attempt: int) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{what} {key} {attempt}\n")
        fh.flush()
        os.fsync(fh.fileno())
    if DIE_INSIDE is not None and key == f"{EXECUTION_ID}:{DIE_INSIDE}":
        os._exit(CRASH_EXIT_CODE)


def respond(request: ModelRequest) -> ModelResponse:
    """The scripted model: a pure function of the request."""
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        return ModelResponse.tool_calls([("lookup", {"city": "Paris"})], text="Checking Paris first.")
    if turn == 1:
        return ModelResponse.tool_calls(
            [("lookup", {"city": "Rome"}), ("convert", {"amount": 10, "currency": "USD"})],
            text="Now Rome and the money.",
        )
    if turn == 2:
        return ModelResponse.tool_calls([("book", {"city": "Rome"})], text="Booking Rome.")
    results = [m.text for m in request.messages if m.role == "tool"]
    return ModelResponse.text("Plan: " + "; ".join(results))


class LoggedModel:
    """A ``ScriptedModel`` answering with ``script`` (``respond`` by default) that logs each call with
    its idempotency key before answering, after ``latency`` seconds (so concurrent runs interleave)."""

    name = "logged"

    def __init__(
        self, log_path: str, script: Callable[[ModelRequest], ModelResponse] = respond, *, latency: float = 0.0
    ) -> None:
        self.log_path = log_path
        self.latency = latency
        self.inner = loom.ScriptedModel(script)

    async def complete(
        self, request: ModelRequest, *, on_delta: Any = None, idempotency_key: str | None = None
    ) -> ModelResponse:
        """Log, then answer from the script."""
        log_call(self.log_path, "model", idempotency_key or "?", 0)
        if self.latency:
            await asyncio.sleep(self.latency)
        return await self.inner.complete(request, on_delta=on_delta)


def book_output(city: str) -> str:
    """What ``book`` returns (pure, so a person resolving an in-doubt booking can say it)."""
    return f"booked {city} (ref BK-{city.upper()})"


def build_agent(log_path: str) -> loom.Agent:
    """The agent, its tools logging every call. They are ``async def``: they run on the event loop,
    so the two calls of turn 1 (run concurrently) finish in a fixed order and every run commits at
    the same points (synchronous tools would run on worker threads and finish in either order)."""

    @loom.tool(idempotent=True)
    async def lookup(city: str, ctx: EffectContext) -> str:
        """Weather of a city."""
        log_call(log_path, "tool", ctx.idempotency_key, ctx.attempt)
        return f"{city}: sunny, 21C"

    @loom.tool(idempotent=True)
    async def convert(amount: float, currency: str, ctx: EffectContext) -> str:
        """Convert euros."""
        log_call(log_path, "tool", ctx.idempotency_key, ctx.attempt)
        return f"{amount} EUR = {amount * 1.1:.2f} {currency}"

    @loom.tool
    async def book(city: str, ctx: EffectContext) -> str:
        """Book a hotel (not idempotent)."""
        log_call(log_path, "tool", ctx.idempotency_key, ctx.attempt)
        return book_output(city)

    return loom.Agent(model=LoggedModel(log_path), tools=[lookup, convert, book], name="trip", model_retry=None)


def run(journal_path: str, log_path: str, crash_after: int | None, mode: str) -> dict[str, Any]:
    """Run ``mode`` and return what to print."""
    from tests import stores  # the repository root is on sys.path by now (see __main__)

    journal = CountingCrashJournal(stores.open_journal(journal_path), crash_after)
    rt = loom.Runtime(journal, clock=FakeClock(tick=0.001), ids=SequentialIds(), flows=FlowRegistry())
    agent = build_agent(log_path)
    resolved: list[str] = []
    try:
        handle = start_or_recover(
            mode, agent, rt, EXECUTION_ID, lambda: agent.start(INPUT, runtime=rt, execution_id=EXECUTION_ID)
        )
        while handle.status == "suspended":
            gate = handle.gates[0]
            if gate.kind != "InDoubt":
                raise SystemExit(f"unexpected gate {gate!r}")
            resolved.append(gate.gate_id)
            gate.happened(book_output(gate.payload["input"]["city"]))
        result = handle.result
        return {
            "status": handle.status,
            "output": result.model_dump(mode="json") if result else None,
            "resolved": resolved,
            "commits": journal.commits,
        }
    finally:
        rt.close()


def start_or_recover(
    mode: str, agent: loom.Agent[Any], rt: loom.Runtime, execution_id: str, start: Callable[[], Any]
) -> Any:
    """``start``: ``start()`` (a new run); ``recover``: register ``agent``, ``recover()`` what a crash left
    running and attach ``execution_id`` -- the two modes every agent crash script has."""
    if mode == "start":
        return start()
    if mode == "recover":
        agent.register(rt)
        rt.recover_sync()
        return agent.attach(execution_id, runtime=rt)
    raise SystemExit(f"unknown mode {mode!r}: use start or recover")


def script_main(argv: list[str], run: Callable[[str, str, int | None, str], dict[str, Any]], doc: str | None) -> int:
    """The entry point the agent crash scripts share: ``<journal_path> <calls_log> <crash> <mode>``
    (``crash``: ``none`` or an event count); prints ``run``'s answer as JSON."""
    if len(argv) != 4:
        print(doc, file=sys.stderr)
        return 2
    journal_path, log_path, crash, mode = argv
    crash_after = None if crash == "none" else int(crash)
    print(json.dumps(run(journal_path, log_path, crash_after, mode), sort_keys=True))
    return 0


def main(argv: list[str]) -> int:
    """Entry point: ``<journal_path> <calls_log> <crash> <mode>``."""
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    global DIE_INSIDE
    journal_path, log_path, crash, mode = argv
    crash_after: int | None = None
    if crash.startswith("inside:"):
        DIE_INSIDE = crash.removeprefix("inside:")
    elif crash != "none":
        crash_after = int(crash)
    print(json.dumps(run(journal_path, log_path, crash_after, mode), sort_keys=True))
    return 0


if __name__ == "__main__":
    # Launched by path: run through the importable module ``tests.crash.agent_crash_flow`` (the repository root on
    # ``sys.path``) so persisted names (the gate schema) read ``tests.crash.agent_crash_flow:...``, which the test
    # process resolves too.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.crash import agent_crash_flow

    sys.exit(agent_crash_flow.main(sys.argv[1:]))
