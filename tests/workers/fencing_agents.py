"""The agent ``test_fencing_sigstop.py`` submits and its workers run (``--import tests.workers.fencing_agents``).

``cashier`` calls ``charge`` (NOT idempotent) once, then answers. ``charge`` logs ``entered`` to the
file ``LOOM_LEDGER`` names, waits ``LOOM_CHARGE_PAUSE`` seconds (a test freezes the worker there), then
charges a fake payment ledger (that file) with its fencing token: the ledger refuses a token whose
attempt is lower than one it has seen for the key, as a payment service given the token would. A
call cancelled while it waits logs ``cancelled``. Lines are ``<what> <key> <attempt> <pid>``, each
written under an exclusive ``flock``.
"""

from __future__ import annotations

import asyncio
import fcntl
import os

import loom_nb as loom
from loom_nb.messages import ModelRequest, ModelResponse


def _ledger(what: str, key: str, attempt: int) -> bool:
    """Append ``what`` to the ledger; for ``charge``: refuse (and log ``refused``) a stale token."""
    path = os.environ["LOOM_LEDGER"]
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        seen = [int(line.split()[2]) for line in f if line.startswith("charged ") and line.split()[1] == key]
        if what == "charged" and seen and attempt < max(seen):
            what = "refused"
        f.write(f"{what} {key} {attempt} {os.getpid()}\n")
        f.flush()
        return what != "refused"


@loom.tool
async def charge(item: str, effect: loom.EffectContext) -> str:
    """Charge for one item.

    Args:
        item: The item.
    """
    key, attempt = effect.fencing_token  # (effect.idempotency_key, effect.attempt)
    _ledger("entered", key, attempt)
    try:
        await asyncio.sleep(float(os.environ.get("LOOM_CHARGE_PAUSE", "0")))
    except asyncio.CancelledError:
        _ledger("cancelled", key, attempt)
        raise
    if not _ledger("charged", key, attempt):
        raise RuntimeError(f"the ledger refused the stale token {key} attempt {attempt}")
    return f"charged {item}"


def respond(request: ModelRequest) -> ModelResponse:
    """Turn 0: call ``charge``; turn 1: answer."""
    item = next(m.text for m in request.messages if m.role == "user")
    if not any(m.role == "assistant" for m in request.messages):
        return ModelResponse.tool_calls([("charge", {"item": item})])
    return ModelResponse.text(f"paid {item}")


cashier = loom.Agent(model=loom.ScriptedModel(respond), tools=[charge], name="cashier")
