"""The live view's state and how it renders (``ViewRender``, the base of ``RunView``): where the
turns sit (the finished ones in the capped ``body``, the rest uncapped in ``current``), and the
lines that change while the run runs: the turn progress, the spinner and elapsed time of the model
call, the streamed text (throttled), the usage and the live counts.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Callable
from typing import Any

from loom_nb.agent.run import Run
from loom_nb.journal import step_ids
from loom_nb.journal.run_state import RunState
from loom_nb.kernel.async_bridge import in_running_loop
from loom_nb.notebook.cards import FoldedCards, GateCard
from loom_nb.notebook.child_panel import ChildPanel
from loom_nb.notebook.confirm import ConfirmBar
from loom_nb.notebook.rows import AnswerRow, ToolRow
from loom_nb.notebook.throttle import Throttle
from loom_nb.notebook.turn_block import TurnBlock


class ViewRender:
    """The state of a live run view and its rendering: the turns' placement and the lines that
    change while the run runs. ``RunView`` (``notebook/run_view.py``) sets every attribute below
    in its ``__init__``; they are documented there.
    """

    run: Run
    state: RunState
    cards: dict[str, GateCard]
    folded: FoldedCards
    tool_rows: dict[str, ToolRow]
    answer_rows: dict[str, AnswerRow]
    _typed: bool | None
    _answer_schema: dict[str, Any]
    child_panels: dict[str, ChildPanel]
    _unsubscribe_children: Callable[[], None] | None
    blocks: dict[int, TurnBlock]
    reasoning: list[dict[str, Any]]
    reasoning_tokens: int
    turn: int
    deltas: int
    _texts: dict[str, list[str]]
    _dirty: set[int]
    _seen_delta: bool
    _resolutions: dict[str, tuple[Any, float]]
    _usage: dict[str, Any]
    _loading: bool
    _seq: int
    _unsubscribe: Callable[[], None] | None
    _ticker: asyncio.TimerHandle | None
    _calling: str | None
    _last_model_step: str
    _flow: str
    _throttle: Throttle
    title: Any
    status: Any
    progress: Any
    turn_label: Any
    session: Any
    body: Any
    current: Any
    capped: bool
    expand: Any
    cards_box: Any
    answer: Any
    error: Any
    usage: Any
    live: Any
    stop: Any
    _confirm_stop: ConfirmBar | None
    stopped: Any

    # -- turns ----------------------------------------------------------------------------------
    def block(self, turn: int) -> TurnBlock:
        """The block of ``turn`` (made, in order, on first use)."""
        found = self.blocks.get(turn)
        if found is None:
            found = self.blocks[turn] = TurnBlock(turn)
            self._place()
        return found

    def _place(self) -> None:
        """Put the finished turns in the capped box (``body``) and the rest below it, uncapped
        (``current``): the last turn and every turn from the first one that holds a waiting card
        on, so no card that waits for a person is ever inside a box that scrolls."""
        turns = sorted(self.blocks)
        live = [t for t in turns if self.blocks[t].waiting()] + turns[-1:]
        first = min(live) if live else 0
        done = tuple(self.blocks[t] for t in turns if t < first)
        rest = tuple(self.blocks[t] for t in turns if t >= first)
        if self.body.children != done:
            self.body.children = done
        if self.current.children != rest:
            self.current.children = rest

    @staticmethod
    def _turn_of(step_id: str | None) -> int:
        return (step_ids.parse_step_id(step_id).turn or 0) if step_id else 0

    def toggle_cap(self) -> None:
        """Lift (or put back) the cap on the turns' height."""
        capped = self.capped
        self.capped = not capped
        for box in (self.body, self.current):
            if capped:
                box.remove_class("loom-capped")
            else:
                box.add_class("loom-capped")
        self.expand.description = "Cap height" if capped else "Show all"

    # -- rendering ------------------------------------------------------------------------------
    @staticmethod
    def _clock() -> float:
        return time.time()  # the notebook layer's wall clock: only for the elapsed time shown

    def _tick_soon(self) -> None:
        """While a step runs, refresh its elapsed time about once a second."""
        running = self._calling is not None or any(r.status == "running" for r in self.tool_rows.values())
        if not running or self._ticker is not None or not in_running_loop():
            return
        self._ticker = asyncio.get_running_loop().call_later(1.0, self._tick)

    def _tick(self) -> None:
        self._ticker = None
        if self._unsubscribe is None:
            return
        now = self._clock()
        for row in self.tool_rows.values():
            if row.status == "running":
                row.render(now)
        self._render_calling()
        self._tick_soon()

    def _render_calling(self) -> None:
        for block in self.blocks.values():
            block.calling.value = ""
        step = self.state.steps.get(self._calling) if self._calling else None
        if step is None or self._loading:
            return
        since = f" {max(self._clock() - step.started_at, 0.0):.0f} s" if step.started_at else ""
        self.block(
            self._turn_of(step.step_id)
        ).calling.value = (
            f"<span class='loom-tool-running'><span class='loom-spinner'></span>calling the model…{since}</span>"
        )
        self._render_live()
        self._tick_soon()

    def _max_turns(self) -> int | None:
        agent = self.run.agent
        return agent.config.max_turns if agent is not None else None

    def _render_progress(self) -> None:
        if self.run.status in ("completed", "failed", "cancelled"):  # the turns it took, not a share of the limit
            self.progress.layout.display = ""
            self.progress.max = self.progress.value = max(self.turn, 1)
            self.turn_label.value = f"{self.turn} turn" + ("" if self.turn == 1 else "s")
            return
        limit = self._max_turns()
        # The agent not defined in this kernel yet: its turn limit is unknown, so no share is shown
        # (a full bar at turn 1 would read as done).
        self.progress.layout.display = "" if limit else "none"
        top = limit or max(self.turn, 1)
        self.progress.max = max(top, self.turn, 1)
        self.progress.value = self.turn
        self.turn_label.value = f"turn {self.turn}/{top}" if limit else f"turn {self.turn}"

    def _render_usage(self) -> None:
        text = self.usage_text()
        self.usage.value = html.escape(text) if text else ""
        self._render_live()

    def _render_live(self) -> None:
        if self.run.status != "running":
            self.live.value = ""
            return
        out = self._usage.get("output_tokens") or 0
        parts = [f"{self.deltas} chunk(s) streamed"] if self.deltas else []  # a model that does not stream: no count
        parts += [f"{out} output tokens in completed calls"] if out else []
        self.live.value = html.escape(" · ".join(parts))

    def _render_text(self) -> None:
        result = self.run.result if self.run.status == "completed" else None
        answer = result.output.strip() if result is not None and isinstance(result.output, str) else None
        last = max(self.blocks) if self.blocks else None
        texts: dict[int, list[str]] = {}
        for sid, parts in self._texts.items():
            if parts:
                texts.setdefault(self._turn_of(sid), []).append("".join(parts))
        for turn in sorted(set(texts) | self._dirty):
            text = "\n".join(texts.get(turn, ()))
            hidden = answer is not None and turn == last and text.strip() == answer
            self.block(turn).set_text(text, hidden=hidden)
        self._dirty.clear()
        if self._seen_delta:
            self._render_live()

    def flush(self) -> None:
        """Show every delta received so far now (instead of at the next throttled refresh)."""
        self._throttle.flush()

    @property
    def refreshes(self) -> int:
        """How many times the streamed text was refreshed."""
        return self._throttle.calls

    @property
    def text_so_far(self) -> str:
        """All the model text streamed so far (every delta, model steps separated by a newline)."""
        return "\n".join("".join(parts) for parts in self._texts.values() if parts)

    def usage_text(self) -> str:
        """Usage as one line (model calls, tokens, cost), or "" before any model call."""
        u = self._usage
        if not u.get("calls") and not u.get("input_tokens") and not u.get("output_tokens"):
            return ""
        text = f"usage: {u['input_tokens']} input + {u['output_tokens']} output tokens"
        if u.get("calls"):
            text += f" over {u['calls']} model call(s)"
        if u.get("cost") is not None:
            text += f", cost {u['cost']:.4f}"
        return text
