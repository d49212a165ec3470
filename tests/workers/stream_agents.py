"""The agent ``loom-nb worker --import tests.workers.stream_agents`` runs for the live-stream tests
(``test_live_stream.py``) and ``bench/live_stream.py``.

``narrator`` answers in one model turn: ``answer()`` (sentences of about 50 characters, each its own
chunk, then an unfinished one), streamed word by word ``LOOM_STREAM_PACE`` seconds apart
(``ScriptedModel(delta_delay=...)``, 0.02 by default). With ``LOOM_STREAM_LOG`` set, the model appends
one line per delta to that file
once it answered: the wall time (``time.time()``) the worker handed the delta on, and how many
characters of the answer were streamed with it, so a follower in another process can tell when the
worker received the delta that completed each chunk.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import loom_nb as loom
from loom_nb.messages import ModelRequest, ModelResponse

#: Sentences in an answer.
SENTENCES = 8
#: How an answer ends: no sentence boundary, so never a chunk of its own (the output holds it).
TAIL = "That is all"


def answer(item: str) -> str:
    """The answer to ``item``: ``SENTENCES`` sentences, each long enough to be a chunk of its own,
    then ``TAIL``."""
    return "".join(f"Sentence {i} about {item} is streamed a word at a time. " for i in range(SENTENCES)) + TAIL


class TimedModel:
    """A paced ``ScriptedModel`` that logs when it handed on each delta (see the module)."""

    name = "timed"

    def __init__(self) -> None:
        pace = float(os.environ.get("LOOM_STREAM_PACE", "0.02"))
        self.inner = loom.ScriptedModel(self.respond, delta_delay=pace)

    @staticmethod
    def respond(request: ModelRequest) -> ModelResponse:
        """The answer to the user's message."""
        return ModelResponse.text(answer(next(m.text for m in request.messages if m.role == "user")))

    async def complete(self, request: ModelRequest, *, on_delta: Any = None, idempotency_key: Any = None) -> Any:
        """Answer, timing each delta handed on to ``on_delta``."""
        times: list[tuple[float, int]] = []
        streamed = [0]

        def timed(delta: str) -> None:
            streamed[0] += len(delta)
            times.append((time.time(), streamed[0]))
            if on_delta is not None:
                on_delta(delta)

        response = await self.inner.complete(request, on_delta=timed, idempotency_key=idempotency_key)
        log = os.environ.get("LOOM_STREAM_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as out:
                out.write("".join(f"{t:.6f} {n}\n" for t, n in times))
        return response


narrator = loom.Agent(model=TimedModel(), name="narrator", model_retry=None)


def chunk_ends(text: str) -> list[int]:
    """Where the chunker cuts ``text`` streamed word by word (``chunk_deltas``, 40 characters):
    the end offset of each chunk cut while it streams (not the tail flushed at the end)."""
    ends: list[int] = []
    chunker = loom.chunk_deltas(lambda chunk: ends.append((ends[-1] if ends else 0) + len(chunk)))
    for word in re.findall(r"\S+\s*|\s+", text):
        chunker(word)
    return ends


def read_delta_log(path: str) -> list[tuple[float, int]]:
    """``(time, characters streamed)`` of each delta in a ``LOOM_STREAM_LOG`` file, in order."""
    with open(path, encoding="utf-8") as log:
        return [(float(t), int(n)) for t, n in (line.split() for line in log if line.strip())]


def shown_delays(
    text: str, deltas: list[tuple[float, int]], chunks: list[tuple[float, str]], completed_at: float
) -> list[float]:
    """Seconds from the worker handing on the delta that completed each chunk of ``text`` to the
    follower having that text: the arrival of the first chunk event reaching past it (``chunks``:
    arrival time and text, in order), or the step's completion (``completed_at``) if none came first."""
    delays = []
    for end in chunk_ends(text):
        received = next(t for t, n in deltas if n >= end)
        shown, reached = completed_at, 0
        for at, chunk in chunks:
            reached += len(chunk)
            if reached >= end:
                shown = min(at, completed_at)
                break
        delays.append(shown - received)
    return delays
