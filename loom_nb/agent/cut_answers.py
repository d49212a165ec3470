"""Answers the model did not finish: cut off by its output token limit or the provider's content
filter (``ModelResponse.finish_reason`` ``length`` / ``content_filter``).

The agent's ``when_cut`` says what then: ``finish`` (the default) ends the run with what came and
``stop_reason="max_tokens"`` / ``"content_filter"``; ``continue`` asks the model to go on where it
stopped (``GO_ON``, a user message in the transcript, so replay rebuilds the same request) while
turns remain, the answer being every part joined; a content filter's cut is never continued;
``fail`` fails the run with ``AnswerCutError``.
"""

from __future__ import annotations

from typing import Final, Literal

from loom_nb.errors import AnswerCutError
from loom_nb.messages import Message, ModelResponse

#: What an agent does with a cut answer (``AgentConfig.when_cut``).
WhenCut = Literal["finish", "continue", "fail"]
WHEN_CUT: Final = ("finish", "continue", "fail")

#: Why an answer was cut off, as ``AgentResult.stop_reason`` says it.
CutReason = Literal["max_tokens", "content_filter"]

#: ``AgentResult.stop_reason`` for each cutting ``finish_reason``.
CUT_STOP_REASONS: Final[dict[str, CutReason]] = {"length": "max_tokens", "content_filter": "content_filter"}

#: What the model reads when asked to go on with an answer its token limit cut.
GO_ON: Final = Message.user(
    "Your previous answer was cut off by the output token limit. Continue exactly where it stopped, "
    "without repeating anything."
)


def cut_reason(response: ModelResponse) -> CutReason | None:
    """``max_tokens`` or ``content_filter`` when ``response`` was cut off, else None."""
    reason = response.finish_reason
    return CUT_STOP_REASONS.get(reason) if reason is not None else None


def answer_cut(execution_id: str, step_id: str, why: str) -> AnswerCutError:
    """The error a cut answer fails the run with under ``when_cut="fail"``."""
    if why == "content_filter":
        return AnswerCutError(
            f"execution {execution_id!r}: the provider's content filter stopped the answer at step {step_id!r}; "
            "change the request, or Agent(when_cut='finish') to keep what came"
        )
    return AnswerCutError(
        f"execution {execution_id!r}: the answer at step {step_id!r} was cut off by the model's output token "
        "limit; raise the provider's max_tokens, or Agent(when_cut='continue') to ask it to go on"
    )
