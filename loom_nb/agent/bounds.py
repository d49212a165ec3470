"""Bounds on what a model may make the loop do in one step: tool calls per turn, answer size.

A model's output is data the loop acts on; without a bound one answer could open 10,000 approval
gates or stream 100 MB into the journal. ``AgentConfig.max_tool_calls`` and
``AgentConfig.max_answer_chars`` hold the limits; this module owns what happens past them:

- more tool calls in one turn than ``max_tool_calls``: none of them runs (no step, no gate); each
  gets an error result the model can correct (``too_many_calls``), like other bad model output;
- an answer longer than ``max_answer_chars``: ``AnswerBound`` counts the streamed text as it
  arrives and fails the model step with ``AnswerTooLargeError`` once past the limit (not
  retried); an answer that came whole is checked when its step completes. The journal's stream
  chunks of one step are at most ``max_answer_chars / chunk_min_chars + 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loom_nb.errors import AnswerTooLargeError
from loom_nb.messages import Message, ToolCall

#: Default ``AgentConfig.max_tool_calls``: most tool calls one model turn may ask for.
MAX_TOOL_CALLS = 128
#: Default ``AgentConfig.max_answer_chars``: most characters of text one model step may answer.
MAX_ANSWER_CHARS = 1_000_000


def too_many_calls(calls: Sequence[ToolCall], limit: int) -> list[Message]:
    """The error result of each of a turn's ``calls`` when there are more than ``limit``: the first
    says why and what to do, the others point at it (journaled inline in the next turn's input:
    changing these texts breaks the replay of recorded runs)."""
    first = (
        f"Error: you asked for {len(calls):,} tool calls in one turn; at most {limit:,} run in a turn, "
        f"so none of them ran. Call the tools again, at most {limit:,} at a time."
    )
    rest = "Error: not run (too many tool calls in one turn; see the first call's result)."
    return [Message.tool(call, first if j == 0 else rest, is_error=True) for j, call in enumerate(calls)]


def answer_too_large(execution_id: str, step_id: str, limit: int, seen: int) -> AnswerTooLargeError:
    """The error of a model step whose answer passed ``limit`` characters (``seen`` so far)."""
    return AnswerTooLargeError(
        f"execution {execution_id!r}, step {step_id!r}: the model's answer passed max_answer_chars={limit:,} "
        f"({seen:,} characters so far); the step fails and the run stops. Ask for a shorter answer, "
        "or allow a longer one with Agent(max_answer_chars=...)."
    )


class AnswerBound:
    """A delta sink that counts a model step's streamed text and raises ``AnswerTooLargeError``
    once it passes ``limit`` characters; otherwise it hands each delta on to ``then`` (if any).

    Attributes:
        limit: Most characters of the step's text.
        seen: Characters seen so far.
    """

    __slots__ = ("execution_id", "limit", "seen", "step_id", "then")

    def __init__(self, limit: int, execution_id: str, step_id: str, then: Callable[[str], None] | None) -> None:
        self.limit = limit
        self.execution_id = execution_id
        self.step_id = step_id
        self.then = then
        self.seen = 0

    def __call__(self, delta: str) -> None:
        """Count ``delta``; past the limit raise, else pass it on."""
        self.seen += len(delta)
        if self.seen > self.limit:
            raise answer_too_large(self.execution_id, self.step_id, self.limit, self.seen)
        if self.then is not None:
            self.then(delta)
