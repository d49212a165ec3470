"""The model step's deltas wait in the kernel and reach the chunker only when their text is needed
(``execute(..., defer_deltas=True)``): the journal is the same byte for byte whether anybody watches
(deltas chunked as they arrive) or not (an attempt that completes is never chunked), the text of a
failed attempt is journaled as it was, and a long stream still commits its held text mid-step."""

from __future__ import annotations

from typing import Any

import loom_nb as loom
from loom_nb.errors import ProviderHTTPError
from loom_nb.journal import Event, EventKind
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.testing import FakeClock, SequentialIds
from tests import stores

SENTENCES = " ".join(f"Sentence number {i} says a little more." for i in range(30))


class FailsOnceAfterStreaming:
    """Streams a long text word by word; the first call then fails (retryable), the second calls a
    tool, the third answers."""

    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest, *, on_delta: Any = None, idempotency_key: Any = None) -> Any:
        self.calls += 1
        if on_delta is not None:
            for word in SENTENCES.split(" "):
                on_delta(word + " ")
        if self.calls == 1:
            raise ProviderHTTPError("overloaded", status_code=529)
        if self.calls == 2:
            return ModelResponse.tool_calls([("echo", {"text": "hi"})], text=SENTENCES)
        return ModelResponse.text(SENTENCES)


@loom.tool
def echo(text: str) -> str:
    """Say it back."""
    return text


def record(*, watched: bool) -> tuple[list[tuple[Any, ...]], list[str], int]:
    """Run the agent on a fresh journal; the journal's rows, the chunk texts an observer saw, and
    the deltas it saw."""
    rt = loom.Runtime(stores.default_journal(), clock=FakeClock(tick=0.001), ids=SequentialIds(), flows=FlowRegistry())
    seen_chunks: list[str] = []
    seen_deltas: list[str] = []
    if watched:

        def on_event(event: Event) -> None:
            if event.kind == EventKind.STREAM_CHUNK:
                seen_chunks.append(event.data["text"])

        rt.observe(on_event, on_delta=lambda eid, sid, text: seen_deltas.append(text))
    agent = loom.Agent(
        model=FailsOnceAfterStreaming(),
        tools=[echo],
        name="deferred",
        model_retry=loom.RetryPolicy(attempts=2, initial=0.01, jitter=0.0),
    )
    run = agent.start("go", runtime=rt, execution_id="d-1")
    assert run.status == "completed", run
    rows = [(e.seq, e.kind, e.step_id, e.at, e.data) for e in rt.journal.read("d-1")]
    rt.close()
    return rows, seen_chunks, len(seen_deltas)


def test_the_journal_is_the_same_watched_or_not() -> None:
    unwatched, _, _ = record(watched=False)
    watched, chunks, deltas = record(watched=True)
    assert watched == unwatched
    assert deltas == 3 * len(SENTENCES.split(" "))  # every delta of every attempt reached the observer
    assert "".join(chunks).startswith(SENTENCES)  # the observer saw the failed attempt's text chunked


def test_a_failed_attempt_keeps_its_streamed_text() -> None:
    rows, _, _ = record(watched=False)
    failed_at = next(i for i, r in enumerate(rows) if r[1] == EventKind.STEP_FAILED)
    chunks = [r[4]["text"] for r in rows[:failed_at] if r[1] == EventKind.STREAM_CHUNK]
    assert "".join(chunks) == SENTENCES + " "  # all of it, in order, before the failure
    assert all(r[1] != EventKind.STREAM_CHUNK for r in rows[failed_at + 1 :])  # completed attempts: none


class StreamsThenBreaks:
    """Streams the long text, then fails for good (not retryable)."""

    name = "broken"

    async def complete(self, request: ModelRequest, *, on_delta: Any = None, idempotency_key: Any = None) -> Any:
        if on_delta is not None:
            for word in SENTENCES.split(" "):
                on_delta(word + " ")
        raise ProviderHTTPError("bad request", status_code=400)


def test_a_step_that_fails_for_good_keeps_its_streamed_text_watched_or_not() -> None:
    journals = []
    for watched in (False, True):
        rt = loom.Runtime(
            stores.default_journal(), clock=FakeClock(tick=0.001), ids=SequentialIds(), flows=FlowRegistry()
        )
        if watched:
            rt.observe(lambda event: None, on_delta=lambda eid, sid, text: None)
        agent = loom.Agent(model=StreamsThenBreaks(), name="broken", model_retry=None)
        run = agent.start("go", runtime=rt, execution_id="b-1")
        assert run.status == "failed", run
        rows = [(e.seq, e.kind, e.step_id, e.at, e.data) for e in rt.journal.read("b-1")]
        rt.close()
        failed_at = next(i for i, r in enumerate(rows) if r[1] == EventKind.STEP_FAILED)
        assert "".join(r[4]["text"] for r in rows[:failed_at] if r[1] == EventKind.STREAM_CHUNK) == SENTENCES + " "
        journals.append(rows)
    assert journals[0] == journals[1]
