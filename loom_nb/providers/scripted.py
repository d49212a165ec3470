"""``ScriptedModel``: a deterministic, offline model for tutorials and tests."""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from loom_nb.errors import UsageError
from loom_nb.messages import ModelRequest, ModelResponse, Usage, bounded_response
from loom_nb.providers.base import DeltaSink

Responder = Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]
_WORD = re.compile(r"\S+\s*|\s+")


@functools.lru_cache(maxsize=256)
def _words(text: str) -> tuple[str, ...]:
    """``text`` in the pieces it is streamed in (a script repeats its texts: split each once)."""
    return tuple(_WORD.findall(text))


class ScriptedModel:
    """A model that answers from a script: a list of responses, or a function of the request.

    Text is streamed to ``on_delta`` word by word. A response without usage gets a deterministic
    estimate (characters / 4), kept up to date turn by turn (a long run does not sum its whole
    transcript every turn). ``history`` keeps the last ``history_size`` requests it was sent (each
    holds the whole transcript: all of a 10,000-turn run's would take gigabytes); ``calls`` counts
    them all.

    Args:
        script: Responses in order, or ``respond(request) -> ModelResponse`` (sync or async).
        name: The provider name shown in logs.
        delta_delay: Seconds to sleep between streamed deltas (0: none), to make streaming visible.
        native_output: Claim native structured output, so an ``Agent(output_type=...)`` in
            ``auto`` mode sends the schema in the request (``ModelRequest.output``) and reads the
            answer from the text, as on OpenAI; False (the default): it answers through the
            ``final_result`` tool, as on Anthropic.
        history_size: How many of the latest requests ``history`` keeps (None: every one).

    Attributes:
        history: The latest requests, oldest first.
        calls: How many requests it answered.
    """

    def __init__(
        self,
        script: Sequence[ModelResponse] | Responder,
        *,
        name: str = "scripted",
        delta_delay: float = 0.0,
        native_output: bool = False,
        history_size: int | None = 100,
    ) -> None:
        if history_size is not None and history_size < 1:
            raise UsageError(f"ScriptedModel(history_size={history_size}): keep at least 1 request, or None for all")
        self.name = name
        self.history_size = history_size
        self.calls = 0
        #: The characters of the last request's messages: (how many messages, the last one, chars).
        self._sent: tuple[int, Any, int] = (0, None, 0)
        self.native_output = native_output
        self.delta_delay = delta_delay
        self.history: list[ModelRequest] = []
        self._responses: list[ModelResponse] | None = None
        self._respond: Responder | None = None
        if callable(script):
            self._respond = script
        else:
            self._responses = list(script)

    def __repr__(self) -> str:
        return f"ScriptedModel(name={self.name!r}, calls={self.calls})"

    async def complete(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None, idempotency_key: str | None = None
    ) -> ModelResponse:
        """Answer ``request`` from the script, streaming the text (``idempotency_key`` is ignored)."""
        self.calls += 1
        self.history.append(request)
        if self.history_size is not None and len(self.history) > self.history_size:
            del self.history[0]
        response = await self._next(request)
        if on_delta is not None and response.message.text:
            delay = self.delta_delay
            for piece in _words(response.message.text):
                on_delta(piece)
                if delay:
                    await asyncio.sleep(delay)
        usage = response.usage  # ``usage == Usage()`` field by field (a pydantic ``==`` costs more)
        if not (usage.input_tokens or usage.output_tokens or usage.reasoning_tokens) and usage.cost is None:
            sent = self._sent_chars(request.messages)
            counted = bounded_response(response).message.tool_calls  # str() of too-deep arguments would recurse
            out = len(response.message.text) + sum(len(str(c.arguments)) for c in counted)
            response = response.model_copy(update={"usage": Usage(input_tokens=sent // 4, output_tokens=out // 4)})
        return response

    def _sent_chars(self, messages: Sequence[Any]) -> int:
        """The characters of ``messages``' texts: the previous request's count plus the messages
        added since, when this request extends it (its message at the previous length is the same
        object), else counted from the start (a compaction, another run)."""
        n, last, chars = self._sent
        if 0 < n <= len(messages) and messages[n - 1] is last:
            total = chars + sum(len(m.text) for m in messages[n:])
        else:
            total = sum(len(m.text) for m in messages)
        self._sent = (len(messages), messages[-1] if messages else None, total)
        return total

    async def _next(self, request: ModelRequest) -> ModelResponse:
        if self._respond is not None:
            result: Any = self._respond(request)
            if inspect.isawaitable(result):
                result = await result
            if not isinstance(result, ModelResponse):
                raise UsageError(
                    f"the ScriptedModel function returned {type(result).__name__}; "
                    "return loom.ModelResponse.text(...) or loom.ModelResponse.tool_calls(...)"
                )
            return result
        assert self._responses is not None
        index = self.calls - 1
        if index >= len(self._responses):
            raise UsageError(
                f"the ScriptedModel ran out of responses: call {index + 1} but the script has "
                f"{len(self._responses)}; add responses or pass a function"
            )
        return self._responses[index]
