"""The run's steps in the live view (``ViewSteps``, under ``RunView``): a row per tool call (with
the call's record once it ran, invalid calls included), a typed run's answer attempts, the model's
reasoning per turn, the token usage, and the sub-agents' child executions (``ChildPanel``) under
their tool rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loom_nb.agent.output import FINAL_RESULT_TOOL, answer_attempts
from loom_nb.agent.tool_calls import tool_call, tool_calls
from loom_nb.journal import step_ids
from loom_nb.journal.events import Event, EventKind
from loom_nb.journal.run_state import StepState
from loom_nb.kernel.observers import Progress
from loom_nb.notebook.cards import run_tool_schema
from loom_nb.notebook.child_panel import ChildPanel, direct_child
from loom_nb.notebook.edit_form import ordered_arguments
from loom_nb.notebook.formatting import html_widget
from loom_nb.notebook.rows import AnswerRow, ToolRow
from loom_nb.notebook.turn_block import thinking_html
from loom_nb.notebook.view_render import ViewRender


class ViewSteps(ViewRender):
    """How the live view shows the run's steps: tool rows, answer rows, reasoning and usage, and
    the sub-agents' panels (``RunView`` builds on it)."""

    def _sync_answers(self) -> None:
        """A typed run's answer attempts (``answer_attempts``) as rows in their turns."""
        if self._typed is False:
            return
        model_steps = [s for s in self.state.steps.values() if s.kind == step_ids.MODEL_KIND]
        if self._typed is None and model_steps:
            first = model_steps[0].input
            self._typed = isinstance(first, dict) and isinstance(first.get("output"), dict)
            out = self.run.agent.config.output if self.run.agent is not None else None
            spec = out.tool_spec if out is not None else None  # live: the journal's copy has its keys sorted
            self._answer_schema = dict(spec.parameters) if spec is not None else {}
        if not self._typed:
            return
        for attempt in answer_attempts(self.state):
            row = self.answer_rows.get(attempt.step_id)
            if row is None:
                row = self.answer_rows[attempt.step_id] = AnswerRow(attempt, self._answer_schema)
                self.block(attempt.turn).add_row(row)
            elif row.attempt == attempt:
                continue
            row.attempt = attempt
            row.render()

    def _text_of_output(self, step: StepState) -> None:
        """Event format 2 journals no copy of the text a model step streamed: a view that did not
        see the deltas or chunks (one rebuilt from the journal) shows the text of its output. One
        that saw only its first chunks (a run followed from another process: the tail the step
        completed with is journaled in the output only) shows the rest of the output after them."""
        if self._seen_delta or not isinstance(step.output, dict):
            return
        message = step.output.get("message")
        text = message.get("text") if isinstance(message, dict) else None
        if not isinstance(text, str) or not text:
            return
        parts = self._texts.get(step.step_id) or []
        shown = "".join(parts)
        if not shown:
            self._texts[step.step_id] = [text]
        elif len(shown) < len(text) and text.startswith(shown):
            self._texts[step.step_id] = [*parts, text[len(shown) :]]
        else:
            return
        self._dirty.add(self._turn_of(step.step_id))
        self._throttle.request()

    def _row(self, sid: str, name: str, arguments: Any) -> ToolRow:
        row = self.tool_rows.get(sid)
        if row is None:
            if isinstance(arguments, dict):  # in the tool's parameter order, as the card shows them
                arguments = dict(ordered_arguments(arguments, run_tool_schema(self.run, name)[1]))
            row = self.tool_rows[sid] = ToolRow(sid, name, arguments)
            self.block(self._turn_of(sid)).add_row(row)
        return row

    def _take_calls(self, *, every: bool = False) -> None:
        """Make a row for each call rejected before it could run (``invalid``, with the error the
        model read), and give it (``every``: every row, after a load) its call's record
        (``agent.tool_calls``: the arguments that ran). The caller renders ``every`` row."""
        for call in tool_calls(self.state):
            row = self.tool_rows.get(call.step_id)
            # a typed run's rejected answer has its own row (``AnswerRow``)
            new = row is None and call.invalid is not None and call.name != FINAL_RESULT_TOOL
            if new:
                row = self._row(call.step_id, call.name, call.requested)
            if row is not None and (new or every):
                gate = self.state.gates.get(step_ids.approval_gate_for(call.step_id))
                row.update(self.state.steps.get(call.step_id), gate, call)
                if not every:
                    row.render(self._clock())

    def _observe(
        self,
        runtime: Any,
        execution_id: str,
        on_event: Callable[[Event], None],
        on_delta: Callable[[str, str, str], None],
    ) -> Callable[[], None]:
        """Watch the run's events, streamed deltas and progress reports; returns the unsubscribe."""
        return runtime.observe(  # type: ignore[no-any-return]
            on_event, on_delta=on_delta, on_progress=self.on_progress, execution_id=execution_id
        )

    def on_progress(self, execution_id: str, step_id: str, progress: Progress) -> None:
        """A running call's progress report (never journaled): shown on its tool row until it ends."""
        row = self.tool_rows.get(step_id)
        if row is not None and row.ended is None:
            shown = row.progress
            row.progressed(progress)
            if row.progress != shown and not self._loading:  # a report that changes nothing shown: no redraw
                row.render(self._clock())

    def _refresh_row(self, sid: str) -> None:
        row = self.tool_rows.get(sid)
        if row is None:
            return
        call = None if self._loading else tool_call(self.state, sid)
        row.update(self.state.steps.get(sid), self.state.gates.get(step_ids.approval_gate_for(sid)), call)
        if not self._loading:
            row.render(self._clock())
            self._tick_soon()

    def _step_changed(self, kind: str, step: StepState) -> None:
        if kind == EventKind.STEP_STARTED and step.kind == step_ids.TOOL_KIND:
            self._row(step.step_id, step.tool or step.effect, step.input)
        elif kind == EventKind.STEP_STARTED and step.kind == step_ids.MODEL_KIND:
            if not self._loading:
                self._take_calls()  # the calls the previous turn rejected: its input holds their errors
            self._calling = self._last_model_step = step.step_id
            self.block(self._turn_of(step.step_id))
            if self.state.turns > self.turn:
                self.turn = self.state.turns
                if not self._loading:
                    self._render_progress()
            if step.attempts > 1 and step.step_id in self._texts:  # a retried model call streams its text again
                del self._texts[step.step_id]
                self._dirty.add(self._turn_of(step.step_id))
                self._throttle.request()
            self._render_calling()
        elif kind == EventKind.STEP_COMPLETED and step.usage is not None and "input_tokens" in step.usage:
            totals = self.state.usage
            self._usage.update(
                calls=totals.calls,
                input_tokens=totals.input_tokens,
                output_tokens=totals.output_tokens,
                cost=totals.cost,
            )
            if not self._loading:
                self._render_usage()
        if kind == EventKind.STEP_COMPLETED and step.kind == step_ids.MODEL_KIND:
            self._take_reasoning(step)
        if kind != EventKind.STEP_STARTED and step.step_id == self._calling:
            self._calling = None
            self._render_calling()
        self._refresh_row(step.step_id)

    def _take_reasoning(self, step: StepState) -> None:
        """Keep the model step's reasoning blocks (extended thinking) and show them collapsed."""
        output = step.output if isinstance(step.output, dict) else {}
        message = output.get("message") if isinstance(output.get("message"), dict) else {}
        blocks = [b for b in (message or {}).get("reasoning") or () if isinstance(b, dict)]
        if not blocks:
            return
        self.reasoning.extend(blocks)
        usage = output.get("usage") if isinstance(output.get("usage"), dict) else {}
        tokens = int((usage or {}).get("reasoning_tokens") or 0)
        self.reasoning_tokens += tokens
        block = self.block(self._turn_of(step.step_id))
        block.reasoning.extend(blocks)
        block.reasoning_tokens += tokens
        block.thinking.value = thinking_html(block.reasoning, block.reasoning_tokens)

    @property
    def thinking(self) -> Any:
        """The reasoning of the latest turn that has some (class ``loom-thinking``), or an empty widget."""
        for t in sorted(self.blocks, reverse=True):
            if self.blocks[t].thinking.value:
                return self.blocks[t].thinking
        return html_widget("loom-thinking")

    # -- sub-agents (child executions) ---------------------------------------------------------
    def _has_sub_agents(self) -> bool:
        """Whether the run may start child executions (an ``as_tool`` tool, or no agent to tell)."""
        agent = self.run.agent
        return agent is None or any(getattr(t, "child_flow", None) for t in agent.config.tools)

    def _load_children(self) -> None:
        """Fold in the journaled events of the run's direct children (a view rebuilt later)."""
        if not self._has_sub_agents():
            return
        journal = self.run.runtime.journal
        for record in journal.list_executions():
            if direct_child(self.run.id, record.execution_id) == record.execution_id:
                for event in journal.read(record.execution_id):
                    self._on_child_event(event)
        for panel in self.child_panels.values():
            panel.render_rows()

    def _on_child_event(self, e: Event) -> None:
        cid = direct_child(self.run.id, e.execution_id)
        if cid is None or cid != e.execution_id:
            return  # not a child of this run (a grandchild shows only its cards, in its child's panel)
        panel = self.panel(cid)
        panel.apply(e, render=not self._loading)
        row = self.tool_rows[panel.parent_step]
        row.status, row.preview = panel.row_status, panel.preview
        if not self._loading:
            row.render()
        if e.kind == EventKind.GATE_RESOLVED:
            self._place()

    def panel(self, child_id: str) -> ChildPanel:
        """The panel of the direct child ``child_id`` (made, under its tool row, on first use)."""
        found = self.child_panels.get(child_id)
        if found is not None:
            return found

        def child_row(sid: str, name: str, arguments: Any) -> ToolRow:
            if isinstance(arguments, dict):  # in the child's tool's parameter order
                arguments = dict(ordered_arguments(arguments, run_tool_schema(self.run, name, child_id)[1]))
            return ToolRow(sid, name, arguments)

        found = self.child_panels[child_id] = ChildPanel(child_id, row=child_row)
        name, arguments = self._call_of(found.parent_step)
        row = self._row(found.parent_step, name, arguments)
        tools = self.block(self._turn_of(found.parent_step)).tools
        at = tools.children.index(row.widget) + 1 if row.widget in tools.children else len(tools.children)
        tools.children = (*tools.children[:at], found, *tools.children[at:])
        return found

    def _call_of(self, sid: str) -> tuple[str, Any]:
        """The tool name and arguments the model asked for at the tool step ``sid``."""
        where = step_ids.parse_step_id(sid)
        for step in reversed(self.state.steps.values()):
            if step.kind != step_ids.MODEL_KIND or step.turn != where.turn or not isinstance(step.output, dict):
                continue
            message = step.output.get("message")
            tool_calls = message.get("tool_calls") if isinstance(message, dict) else None
            j = where.tool_index
            if isinstance(tool_calls, list) and j is not None and j < len(tool_calls):
                call = tool_calls[j] if isinstance(tool_calls[j], dict) else {}
                return str(call.get("name", "sub-agent")), call.get("arguments")
        return "sub-agent", None

    def _stop_watching_children(self) -> None:
        if self._unsubscribe_children is not None:
            self._unsubscribe_children()
            self._unsubscribe_children = None
