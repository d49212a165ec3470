"""The batch of tutorial 8, run as a script that may be killed in the middle of the batch.

    python batch_crash_demo.py JOURNAL CALLS_LOG [--crash-after N]

Maps a triage agent over ``TICKETS`` (``agent.map``, concurrency 3) on the DuckDB file JOURNAL.
``--crash-after N`` kills the process (exit code 86) right after the commit that brings the events
it journaled to N (``loom_nb.testing.CrashingJournal``). Every model and tool call appends a line to
CALLS_LOG (``<pid tag>: <call>``), so you can see afterwards which calls ran in which process. Run
without ``--crash-after`` it prints the batch's progress line and results, as any script does.
"""

from __future__ import annotations

import argparse
import sys

import loom_nb as loom
from loom_nb.journal import DuckDBJournal
from loom_nb.testing import CrashingJournal, FakeClock

TICKETS = [
    "Where is my parcel? It is a week late.",
    "My invoice shows the wrong address.",
    "The parcel came without the charger.",
    "Can I change the invoice currency?",
    "I want to close my account.",
    "The parcel was left at the wrong door.",
]


def build_agent(calls_log: str, who: str) -> loom.Agent:
    """Two model turns per ticket around one ``topic`` lookup; every call appends ``<who>: <call>``
    to ``calls_log``."""

    def log(line: str) -> None:
        with open(calls_log, "a", encoding="utf-8") as fh:
            fh.write(f"{who}: {line}\n")

    @loom.tool(idempotent=True)
    async def topic(ticket: str) -> str:
        """The team a ticket belongs to."""
        log(f"topic({ticket[:24]!r}...)")
        return "billing" if "invoice" in ticket else "shipping" if "parcel" in ticket else "accounts"

    def respond(request: loom.ModelRequest) -> loom.ModelResponse:
        ticket = next(m.text for m in request.messages if m.role == "user")
        team = next((m.text for m in request.messages if m.role == "tool"), None)
        log(f"model({ticket[:24]!r}..., {'answer' if team else 'ask'})")
        if team is None:
            return loom.ModelResponse.tool_calls([("topic", {"ticket": ticket})])
        return loom.ModelResponse.text(f"Routed to {team}.")

    return loom.Agent(model=loom.ScriptedModel(respond), tools=[topic], name="triage")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("journal")
    parser.add_argument("calls_log")
    parser.add_argument("--crash-after", type=int, metavar="N", help="die after N journaled events")
    args = parser.parse_args()
    who = "run killed mid-batch" if args.crash_after else "run again"
    journal = CrashingJournal(DuckDBJournal(args.journal), args.crash_after)
    # A fake clock (a millisecond per reading) so the durations printed are the same on every run;
    # the run after the crash starts an hour later, as if someone came back to it.
    clock = FakeClock(start=1_767_225_600.0 + (0 if args.crash_after else 3600), tick=0.001)
    with loom.Runtime(journal, clock=clock) as rt:
        build_agent(args.calls_log, who).map(TICKETS, concurrency=3, runtime=rt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
