"""``StreamCommits``: when stream chunks are committed (``docs/design.md``, section 4, rule 8).

The journal chooses the default (a shared journal, which another process may follow: ``PROMPT``;
else ``DEFERRED``); under ``DEFERRED`` a step that streams for longer than ``within`` seconds has
its chunks committed while it runs, and what the sink refuses then still fails the step.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loom_nb.errors import UsageError
from loom_nb.journal import EventKind
from loom_nb.journal.event_format import FORMAT_2
from loom_nb.kernel import DEFERRED, PROMPT, EffectContext, Engine, ExecutionContext, StreamCommits
from tests import stores
from tests.kernel.support import make_runtime

SENTENCES = [f"Sentence {i} is here. " for i in range(6)]


def test_the_journal_chooses_the_default_and_an_option_overrides_it() -> None:
    rt = make_runtime()
    assert rt.stream_policy is (PROMPT if stores.current == "postgres" else DEFERRED)
    rt.stream_commits = PROMPT if rt.stream_policy is DEFERRED else DEFERRED
    assert rt.stream_policy is rt.stream_commits
    assert Engine(rt.journal, stream_commits=DEFERRED).stream_policy is DEFERRED
    with pytest.raises(UsageError, match="within=0"):
        StreamCommits(prompt=False, within=0)


def deferred_runtime(pause: float, mid_stream: list[list[str]]) -> Engine:
    """A runtime whose ``talk`` streams SENTENCES, waits ``pause`` seconds, appends the chunks the
    journal holds by then to ``mid_stream``, and returns; chunks are due 50 ms after a delta."""
    rt = make_runtime()
    rt.event_format = FORMAT_2
    rt.stream_commits = StreamCommits(prompt=False, within=0.05)
    journal = rt.journal

    async def talk(value: Any, ctx: EffectContext) -> Any:
        for text in SENTENCES:
            ctx.emit_delta(text)
        await asyncio.sleep(pause)
        held = [e.data["text"] for e in journal.read(ctx.execution_id) if e.kind == EventKind.STREAM_CHUNK]
        mid_stream.append(held)
        return {"text": "".join(SENTENCES)}

    rt.effects.register("talk", talk, idempotent=True)
    return rt


def streaming_body(sink: str) -> Any:
    """A body running ``talk`` with its deltas deferred, into the journal (or a sink that refuses)."""

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        def to_journal(text: str) -> None:
            if sink == "refuse":
                raise UsageError("too much text")
            ctx.stream(text, step_id="talk")

        return await ctx.execute("talk", None, step_id="talk", on_delta=to_journal, defer_deltas=True)

    return body


async def test_deferred_commits_a_slow_steps_chunks_within_its_bound() -> None:
    mid: list[list[str]] = []
    rt = deferred_runtime(0.4, mid)
    result = await rt.start(streaming_body("journal"), None, execution_id="e")
    assert result.status == "completed", result
    assert mid == [SENTENCES]  # committed while the step still ran, unwatched
    assert (await rt.replay("e")).reproduced


async def test_a_quick_step_under_deferred_journals_no_chunk() -> None:
    mid: list[list[str]] = []
    rt = deferred_runtime(0.0, mid)
    await rt.start(streaming_body("journal"), None, execution_id="e")
    assert mid == [[]]
    assert [e for e in rt.journal.read("e") if e.kind == EventKind.STREAM_CHUNK] == []


async def test_a_delta_the_sink_refuses_when_fed_late_fails_the_step() -> None:
    rt = deferred_runtime(0.3, [])
    result = await rt.start(streaming_body("refuse"), None, execution_id="e")
    assert result.status == "failed" and "too much text" in str(result.error), result
    failed = [e for e in rt.journal.read("e") if e.kind == EventKind.STEP_FAILED]
    assert len(failed) == 1 and failed[0].step_id == "talk"
