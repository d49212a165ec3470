"""The in-doubt card (``InDoubtCard``): a non-idempotent step cut in flight, answered "it happened"
(with its output), "run again" or "fail"; and the words that say why the step is in doubt
(``in_doubt_cause``).
"""

from __future__ import annotations

import html
import shlex
from typing import Any

import ipywidgets as widgets

from loom_nb.journal import step_ids
from loom_nb.notebook.formatting import html_widget, parse_json_or_text, short_text
from loom_nb.notebook.gate_card import GateCard, card_button, card_field
from loom_nb.notebook.safe_text import visible, visible_json

#: What "It happened" records (the tool's result the model reads) when the person gave no output.
NO_RESULT_GIVEN = "(no result given: a person marked the call as done)"


def in_doubt_cause(cause: Any) -> str:
    """Why a step is in doubt, from its gate's ``cause`` (the error that left the outcome unknown;
    none when the process stopped mid-call), with the error's own words."""
    if not isinstance(cause, dict):
        return "The process stopped (a crash, a kill or a kernel restart) before the call's result was recorded"
    kind = str(cause.get("type", "")).rpartition(":")[2].rpartition(".")[2]
    message = short_text(str(cause.get("message", "")), 200)
    what = {
        "EffectTimeout": "The call ran past its timeout and was abandoned",
        "McpServerGone": "The MCP server went away mid-call",
    }.get(kind, "The call ended without telling whether it took effect")
    return f"{what} ({kind}: {message})" if message else f"{what} ({kind})"


class InDoubtCard(GateCard):
    """The card of an ``InDoubt`` gate (a non-idempotent step cut in flight): it happened (with
    its output), run it again, or record it as failed.

    Attributes:
        output: The output text box (JSON or text) for "happened" (class ``loom-output``).
        reason: The reason text box (class ``loom-reason``).
        happened: Button calling ``gate.happened(output)`` (class ``loom-happened``).
        run_again: Button calling ``gate.run_again()`` (class ``loom-run-again``).
        fail: Button calling ``gate.fail(reason)`` (class ``loom-fail``).
    """

    css = "loom-in-doubt"
    status_text = "Waiting for your answer: did it happen?"

    def _build(self) -> list[Any]:
        g = self.gate
        p = g.payload if isinstance(g.payload, dict) else {}
        step, effect = p.get("step_id", g.gate_id), p.get("effect", "?")
        where = f"step {step}, attempt {p.get('attempt', 1)}"
        title = html_widget(
            "loom-card-title",
            f"<b>Did <code>{html.escape(visible(step_ids.tool_name(str(effect))))}</code> happen?</b> "
            f"{html.escape(visible(in_doubt_cause(p.get('cause'))))}, and it is not safe to simply run it "
            f"again. <span class='loom-card-desc'>({html.escape(visible(where))})</span>",
        )
        body = html_widget("loom-card-arguments", f"<pre>{html.escape(visible_json(p.get('input')))}</pre>")
        self.output = card_field(widgets.Text, "Its output", "if it happened (JSON or text)", "loom-output")
        self.reason = card_field(widgets.Text, "Reason", "optional", "loom-reason")
        self.happened = card_button("It happened", "loom-happened", "success", "check")
        self.run_again = card_button("Run again", "loom-run-again", "warning", "redo")
        self.fail = card_button("Fail it", "loom-fail", "danger", "times")
        self.happened.on_click(lambda _: self.act("marked as happened", self._happened))
        self.run_again.on_click(lambda _: self.act("run again", g.run_again))
        self.fail.on_click(lambda _: self.act("marked as failed", self._fail))
        self.buttons = [self.happened, self.run_again, self.fail]
        self.inputs = [self.output, self.reason]
        return [title, body, self.output, self.reason, widgets.HBox(self.buttons)]

    def _happened(self) -> Any:
        output = parse_json_or_text(self.output.value)
        return self.gate.happened(NO_RESULT_GIVEN if output is None else output)

    def _fail(self) -> Any:
        return self.gate.fail(self.reason.value.strip() or None)

    def commands(self) -> str:
        """The ``%loom resume`` commands that resolve this gate from a cell."""
        gid = shlex.quote(self.gate.gate_id)
        return f"%loom resume {self.gate.execution_id} {gid} --happened OUTPUT | --run-again | --fail [--reason R]"

    def summary(self) -> str:
        """The step in doubt, on one line."""
        p = self.gate.payload if isinstance(self.gate.payload, dict) else {}
        return f"{step_ids.tool_name(str(p.get('effect', '?')))} (in doubt)"
