"""The one-line rows of the live view: a tool call (``ToolRow``: name, arguments, status, duration,
result preview, and its approval once decided) and a typed run's answer attempt (``AnswerRow``).
Each shows what it did not write through ``safe_text.visible``. The run view and the sub-agents'
panels make them (``ChildPanel`` takes the row type)."""

from __future__ import annotations

import html
from typing import Any

from loom_nb.agent.config import APPROVAL_GATE
from loom_nb.agent.output import FINAL_RESULT_TOOL, AnswerAttempt
from loom_nb.agent.tool_calls import ToolCallRecord
from loom_nb.journal.events import EventKind
from loom_nb.journal.run_state import GateState, StepState
from loom_nb.kernel.observers import Progress
from loom_nb.notebook.cards import describe_resolution
from loom_nb.notebook.edit_form import ordered_arguments
from loom_nb.notebook.formatting import (
    arguments_diff,
    call_text,
    clock_text,
    html_widget,
    one_line,
    result_value,
    short_text,
)
from loom_nb.notebook.safe_text import visible


class ToolRow:
    """One tool call of the run: name, arguments, status, duration, result preview.

    Attributes:
        step_id: The tool step (``#turn:<i>:tool:<j>``).
        name: The tool's name.
        arguments: The arguments it ran with (``agent/tool_calls.py``): a person's edit, else the model's.
        requested: The model's arguments, where a person edited them (else None); the row shows the change.
        status: ``awaiting approval``, ``approved``, ``refused``, ``running``, ``retrying``,
            ``done``, ``failed``, ``in doubt`` or ``invalid`` (arguments rejected before it could run).
        waited: Seconds its step waited at an in-doubt gate for a person (not counted in ``duration``).
        progress: How far the call has got while it runs, as its tool last reported it (``3/10 ·
            copying``; an MCP server's progress notifications), else ``""``.
        widget: The HTML row (class ``loom-tool-row``).
    """

    def __init__(self, step_id: str, name: str, arguments: Any) -> None:
        self.step_id = step_id
        self.name = name
        self.arguments = arguments
        self.requested: Any = None
        self.waited = 0.0
        self.status = "running"
        self.attempt = 1
        self.started: float | None = None
        self.ended: float | None = None
        self.preview = ""
        self.progress = ""
        #: The approval of the call, once decided, without its time (``approved (reason)``,
        #: ``approved with edited arguments``, ``refused (reason)``); its card folds into the row.
        self.decision: str | None = None
        #: The same with the clock time it was recorded (``approved at 14:25:03 (reason)``).
        self.decided: str | None = None
        self.widget = html_widget("loom-tool-row", shared=True)

    @property
    def duration(self) -> float | None:
        """Seconds from the first start to the end, once ended, less the time a person took to
        answer its in-doubt gate (``waited``)."""
        if self.started is None or self.ended is None:
            return None
        return max(self.ended - self.started - self.waited, 0.0)

    def progressed(self, progress: Progress) -> None:
        """Take a progress report of the running call (``progress``: ``3/10 · copying``)."""
        done = f"{progress.progress:g}" + (f"/{progress.total:g}" if progress.total else "")
        said = visible(short_text(one_line(progress.message), 80)) if progress.message else ""
        self.progress = f"{done} · {said}" if said else done

    def edit(self) -> str:
        """What a person changed in the model's arguments (``path: 'a' → 'b'``), or ``""``."""
        return "" if self.requested is None else arguments_diff(self.requested, self.arguments)

    def text(self) -> str:
        """The row as one line of text (without timings, so that it reads the same on every run):
        the call, its status and, once its approval is decided, the decision (``done, approved``)."""
        status = self.status
        if self.decision is not None and status == "approved":
            status = self.decision
        elif self.decision is not None and status != "refused":  # a refusal's reason is the preview
            status = f"{status}, {self.decision}"
        parts = [f"tool {call_text(self.name, self.arguments)}", status]
        if self.requested is not None:
            parts.append(f"[edited: {self.edit()}]")
        if self.attempt > 1:
            parts.append(f"attempt {self.attempt}")
        if self.progress and self.ended is None:
            parts.append(f"[{self.progress}]")
        if self.preview:
            parts.append(f"-> {self.preview}")
        return " ".join(parts)

    def update(self, step: StepState | None, gate: GateState | None, call: ToolCallRecord | None = None) -> None:
        """Take the row's status, attempt, timings and preview from its tool step and approval gate,
        and the arguments that ran from its call's record (``agent.tool_calls.tool_call``)."""
        if call is not None:
            self._take_call(call, invalid=step is None and gate is None)
        answer = gate.resolution if gate is not None and gate.resolved else None
        if isinstance(answer, dict) and "approved" in answer:
            verb = describe_resolution(APPROVAL_GATE, {**answer, "reason": None})
            why = visible(f" ({answer['reason']})") if answer.get("reason") else ""
            self.decision = verb + why
            self.decided = verb + (f" at {clock_text(gate.resolved_at)}" if gate and gate.resolved_at else "") + why
        if step is not None and step.attempts:
            self.attempt, self.started, self.ended = step.attempts, step.started_at, step.ended_at
            if step.completed:
                self.status, self.preview = "done", visible(short_text(one_line(result_value(step.output)), 120))
            elif step.error is not None:
                self.status = "failed"
                error = f"{step.error.get('type', '')}: {step.error.get('message', '')}"
                self.preview = visible(short_text(error, 160))
            elif step.last_event == EventKind.STEP_IN_DOUBT:
                self.status = "in doubt"
            else:
                self.status = "retrying" if step.retry_pending or step.attempts > 1 else "running"
        elif gate is not None:
            answer = gate.resolution
            if gate.resolved and isinstance(answer, dict) and "approved" in answer:
                self.status = "approved" if answer["approved"] else "refused"
                if not answer["approved"] and answer.get("reason"):
                    self.preview = visible(str(answer["reason"]))
            else:
                self.status = "awaiting approval"

    def _take_call(self, call: ToolCallRecord, *, invalid: bool) -> None:
        self.waited = call.waited
        if call.edited and self.requested is None:
            shown = self.arguments if isinstance(self.arguments, dict) else {}
            ran = call.arguments if isinstance(call.arguments, dict) else {}
            # in the order the row shows the model's arguments (the tool's parameter order)
            self.requested = call.requested
            self.arguments = {k: ran[k] for k in shown if k in ran} | ran
        if invalid and call.invalid is not None:
            self.status, self.preview = "invalid", visible(short_text(call.invalid, 200))

    def render(self, now: float | None = None) -> None:
        """Copy the row's state into its widget; while it runs, a spinner and (given ``now``) the
        seconds since it started."""
        state = self.status.split(" ")[0].replace("awaiting", "approval").replace("invalid", "failed")
        extra = f" <span>attempt {self.attempt}</span>" if self.attempt > 1 else ""
        dur = f" <span>{self.duration:.2f} s</span>" if self.duration is not None else ""
        if self.status in ("running", "retrying") and self.ended is None:
            since = f" {max(now - self.started, 0.0):.0f} s" if now is not None and self.started is not None else ""
            dur = f" <span class='loom-spinner'></span><span class='loom-elapsed'>{since}</span>"
            if self.progress:
                dur += f" <span class='loom-progress'>{html.escape(self.progress)}</span>"
        preview = f" → <code>{html.escape(self.preview)}</code>" if self.preview else ""
        badge = f"<span class='loom-tool-status loom-tool-{state}'>{html.escape(self.status)}</span>"
        decided = ""
        if self.decided is not None:  # the decided approval card, folded into the row
            shown = self.decided if self.status != "refused" else self.decided.split(" (", 1)[0]
            decided = f" <span class='loom-decision'>· {html.escape(shown)}</span>"
        edit = ""
        if self.requested is not None:
            edit = f" <span class='loom-decision'>· edited: <code>{html.escape(self.edit())}</code></span>"
        self.widget.value = (
            f"<code>{html.escape(call_text(self.name, self.arguments))}</code> "
            f"{badge}{extra}{dur}{decided}{edit}{preview}"
        )


class AnswerRow:
    """One final answer a typed run's model gave (``AnswerAttempt``): the ``final_result`` call (or
    "text answer"), and whether it was valid, or why not (what went back to the model).

    Attributes:
        attempt: The attempt it shows.
        widget: The HTML row (class ``loom-answer-row``).
    """

    def __init__(self, attempt: AnswerAttempt, schema: dict[str, Any] | None = None) -> None:
        self.attempt = attempt
        self.schema = schema or {}
        self.widget = html_widget("loom-answer-row", shared=True)

    def what(self) -> str:
        """The answer as given: the ``final_result`` call (arguments in the type's field order),
        ``JSON text`` (native structured output: the turn's text above) or ``text`` (a text answer
        where a ``final_result`` call was asked for)."""
        a = self.attempt
        if isinstance(a.arguments, dict):
            return call_text(FINAL_RESULT_TOOL, dict(ordered_arguments(a.arguments, self.schema)))
        if a.arguments is not None:
            return call_text(FINAL_RESULT_TOOL, a.arguments)
        return "JSON text" if a.mode == "native" else "text"

    def verdict(self) -> str:
        """``valid, shown below``, ``invalid`` or ``checking``."""
        return {"valid": "valid, shown below", "invalid": "invalid"}.get(self.attempt.status, "checking")

    def text(self) -> str:
        """The row as one line of text."""
        a = self.attempt
        line = f"answer attempt {a.attempt} ({self.what()}): {self.verdict()}"
        return visible(line + (f" -> {a.error}" if a.error else ""))

    def render(self) -> None:
        """Copy the attempt into the widget."""
        a = self.attempt
        state = {"valid": "done", "invalid": "failed"}.get(a.status, "running")
        what = self.what()
        shown = f"<code>{html.escape(what)}</code>" if what.startswith(FINAL_RESULT_TOOL) else f"({what})"
        error = f" → <code>{html.escape(visible(short_text(a.error, 240)))}</code>" if a.error else ""
        self.widget.value = (
            f"answer attempt {a.attempt} {shown} "
            f"<span class='loom-tool-status loom-tool-{state}'>{html.escape(self.verdict())}</span>{error}"
        )
