"""The agent of tutorial 11, importable by the notebook and by ``loom-nb worker --import shared_demo``.

A worker process runs the executions the notebook submits, so both must build the same agent: the
notebook imports it from here, and the worker imports this module (``--import shared_demo``, run from
this folder). The model is a ``ScriptedModel`` (offline): it routes a ticket to a team, and asks to
call ``refund`` (a tool that needs approval) when the ticket asks for a refund.

Every model and tool call appends ``<who>: <call>`` to the file ``$LOOM_DEMO_CALLS`` names, where
``who`` is ``$LOOM_DEMO_WHO`` (the notebook starts its worker with ``LOOM_DEMO_WHO=worker``), so the
notebook can show which process made the calls.
"""

from __future__ import annotations

import os
import re

import loom_nb as loom

TICKETS = [
    "Where is my parcel? It is a week late.",
    "My invoice shows the wrong address.",
    "Please refund order 1042 (30 EUR): it arrived broken.",
    "The parcel came without the charger.",
    "I want to close my account.",
]


def log(call: str) -> None:
    """Append ``<who>: <call>`` to ``$LOOM_DEMO_CALLS`` (one ``write``, so lines never interleave)."""
    path = os.environ.get("LOOM_DEMO_CALLS")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{os.environ.get('LOOM_DEMO_WHO', 'notebook')}: {call}\n".encode())
        finally:
            os.close(fd)


@loom.tool(needs_approval=True)
def refund(order: int, amount: int) -> str:
    """Refund an order.

    Args:
        order: The order number.
        amount: The amount, in euros.
    """
    log(f"refund({order}, {amount})")
    return f"refunded {amount} EUR on order {order}"


def respond(request: loom.ModelRequest) -> loom.ModelResponse:
    """Route a ticket to a team, or ask for a refund and then report it."""
    ticket = next(m.text for m in request.messages if m.role == "user")
    result = next((m for m in request.messages if m.role == "tool"), None)
    log(f"model({ticket[:20]!r}...)")
    asked = re.search(r"refund order (\d+) \((\d+) EUR\)", ticket)
    if asked and result is None:
        order, amount = map(int, asked.groups())
        return loom.ModelResponse.tool_calls([("refund", {"order": order, "amount": amount})])
    if result is not None:
        return loom.ModelResponse.text(("Refund refused: " if result.is_error else "Done: ") + result.text)
    team = "billing" if "invoice" in ticket else "shipping" if "parcel" in ticket else "accounts"
    return loom.ModelResponse.text(f"Routed to {team}.")


agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[refund], name="support")
