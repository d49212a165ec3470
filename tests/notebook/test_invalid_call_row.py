"""A tool call whose arguments the tool's schema rejects never runs and opens no gate: it still gets a
row, marked invalid, with the error the model read (live and in a view rebuilt from the journal),
and ``frames().tool_calls()`` says the same."""

from __future__ import annotations

import loom_nb as loom
from loom_nb.messages import ModelRequest
from loom_nb.notebook.formatting import short_text
from loom_nb.notebook.run_view import RunView
from tests.notebook.support import make_runtime


@loom.tool
def transfer(amount: int, to: str) -> str:
    """Send money.

    Args:
        amount: How much.
        to: To whom.
    """
    return f"sent {amount} to {to}"


def respond(request: ModelRequest) -> loom.ModelResponse:
    if not any(m.role == "tool" for m in request.messages):
        return loom.ModelResponse.tool_calls([("transfer", {"amount": "ten", "too": "bob"})], text="Paying.")
    return loom.ModelResponse.text("I could not pay.")


async def test_an_invalid_call_has_a_row_with_the_error_the_model_read() -> None:
    rt, model = make_runtime(), loom.ScriptedModel(respond)
    run = loom.Agent(model=model, tools=[transfer], name="payer").start("pay", runtime=rt)
    view = RunView(run)
    await run
    told = [m.text for m in model.history[-1].messages if m.role == "tool"]
    assert len(told) == 1 and told[0].startswith("Error: ") and "amount" in told[0]
    for shown in (view, RunView(run)):  # live, and rebuilt from the journal
        row = shown.tool_rows["#turn:0:tool:0"]
        assert row.status == "invalid" and row.preview == short_text(told[0], 200)
        line = f"  tool transfer(amount='ten', too='bob') invalid -> {row.preview}"
        assert line in shown.text().splitlines()
        assert "loom-tool-failed" in row.widget.value
    calls = loom.frames(rt).tool_calls(run.id)
    assert calls[["status", "error"]].values.tolist() == [["invalid", told[0]]]
