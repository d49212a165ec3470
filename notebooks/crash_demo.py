"""The agent of tutorial 3, run in a process that gets killed in the middle of the run.

    python crash_demo.py JOURNAL CALLS_LOG EXECUTION_ID [--crash-after N] [--crash-in-book]

``--crash-after N`` kills the process (exit code 86) right after the commit that brings the events it
journaled to N (``loom_nb.testing.CrashingJournal``). ``--crash-in-book`` kills it *inside* the ``book``
tool: the booking is made, but its result never reaches the journal. Every model and tool call appends a
line to CALLS_LOG (``subprocess: <call>``), so you can see afterwards which calls ran in which process.
"""

from __future__ import annotations

import argparse
import os
import sys

import loom_nb as loom
from loom_nb.journal import DuckDBJournal
from loom_nb.testing import CrashingJournal

TASK = "Plan my trip: the weather in Paris and Rome, 100 EUR in USD, then book a hotel in Rome."


def build_agent(calls_log: str, who: str) -> loom.Agent:
    """Four model turns: look up Paris; look up Rome and convert money; book Rome; answer.

    Every call appends ``<who>: <call>`` to ``calls_log``.
    """

    def log(line: str) -> None:
        with open(calls_log, "a", encoding="utf-8") as fh:
            fh.write(f"{who}: {line}\n")

    # async, and awaiting nothing: turn 1's two calls run on the event loop in the order asked, so
    # the calls log reads the same every time (sync tools run in worker threads, in either order)
    @loom.tool(idempotent=True)
    async def weather(city: str) -> str:
        """Today's weather in a city."""
        log(f"weather({city!r})")
        return {"Paris": "Paris: rain, 14C", "Rome": "Rome: sunny, 24C"}[city]

    @loom.tool(idempotent=True)
    async def convert(amount: float, currency: str) -> str:
        """Convert euros to another currency."""
        log(f"convert({amount}, {currency!r})")
        return f"{amount:g} EUR = {amount * 1.08:.2f} {currency}"

    @loom.tool  # not idempotent: running it twice books two rooms
    def book(city: str) -> str:
        """Book a hotel room."""
        log(f"book({city!r})")
        if os.environ.get("CRASH_IN_BOOK"):
            os._exit(86)  # the room is booked, but the process dies before the result is journaled
        return f"booked a room in {city} (ref BK-{city.upper()})"

    def respond(request: loom.ModelRequest) -> loom.ModelResponse:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        log(f"model, turn {turn}")
        if turn == 0:
            return loom.ModelResponse.tool_calls([("weather", {"city": "Paris"})], text="Paris first.")
        if turn == 1:
            return loom.ModelResponse.tool_calls(
                [("weather", {"city": "Rome"}), ("convert", {"amount": 100, "currency": "USD"})],
                text="Now Rome, and the money.",
            )
        if turn == 2:
            return loom.ModelResponse.tool_calls([("book", {"city": "Rome"})], text="Rome is sunnier: booking it.")
        return loom.ModelResponse.text("Trip: " + " | ".join(m.text for m in request.messages if m.role == "tool"))

    return loom.Agent(model=loom.ScriptedModel(respond), tools=[weather, convert, book], name="trip")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("journal")
    parser.add_argument("calls_log")
    parser.add_argument("execution_id")
    parser.add_argument("--crash-after", type=int, metavar="N", help="die after N journaled events")
    parser.add_argument("--crash-in-book", action="store_true", help="die inside the book tool")
    args = parser.parse_args()
    if args.crash_in_book:
        os.environ["CRASH_IN_BOOK"] = "1"
    runtime = loom.Runtime(CrashingJournal(DuckDBJournal(args.journal), args.crash_after))
    with runtime:
        run = build_agent(args.calls_log, "subprocess").start(TASK, runtime=runtime, execution_id=args.execution_id)
        print(f"run {run.id}: {run.status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
