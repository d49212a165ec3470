"""``StreamCommits``: when stream chunks are committed (``docs/design.md``, section 4, rule 8).

The journal chooses the default (a shared journal, which another process may follow: ``PROMPT``,
chunks committed on the event loop's next turn; else ``DEFERRED``, within 0.2 s); a step that streams
for longer than ``within`` has its chunks committed while it runs, one that completes first journals
none (its output holds the text), and what the sink refuses when fed late still fails the step.
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
    assert PROMPT.within == 0 and DEFERRED.within == 0.2
    with pytest.raises(UsageError, match="within=-1"):
        StreamCommits(within=-1)


def deferred_runtime(pause: float, mid_stream: list[list[str]], within: float = 0.05) -> Engine:
    """A runtime whose ``talk`` streams SENTENCES, waits ``pause`` seconds (not at all when 0),
    appends the chunks the journal holds by then to ``mid_stream``, and returns; chunks are due
    ``within`` seconds after a delta."""
    rt = make_runtime()
    rt.event_format = FORMAT_2
    rt.stream_commits = StreamCommits(within=within)
    journal = rt.journal

    async def talk(value: Any, ctx: EffectContext) -> Any:
        for text in SENTENCES:
            ctx.emit_delta(text)
        if pause:
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


@pytest.mark.parametrize("within", [0.0, 0.05])
async def test_a_slow_steps_chunks_are_committed_while_it_runs(within: float) -> None:
    mid: list[list[str]] = []
    rt = deferred_runtime(0.4, mid, within)
    result = await rt.start(streaming_body("journal"), None, execution_id="e")
    assert result.status == "completed", result
    assert mid == [SENTENCES]  # committed while the step still ran, unwatched
    assert (await rt.replay("e")).reproduced


@pytest.mark.parametrize("within", [0.0, 0.05])
async def test_a_step_that_completes_before_its_chunks_are_due_journals_none(within: float) -> None:
    mid: list[list[str]] = []
    rt = deferred_runtime(0.0, mid, within)
    await rt.start(streaming_body("journal"), None, execution_id="e")
    assert mid == [[]]
    assert [e for e in rt.journal.read("e") if e.kind == EventKind.STREAM_CHUNK] == []


async def test_a_delta_the_sink_refuses_when_fed_late_fails_the_step() -> None:
    rt = deferred_runtime(0.3, [])
    result = await rt.start(streaming_body("refuse"), None, execution_id="e")
    assert result.status == "failed" and "too much text" in str(result.error), result
    failed = [e for e in rt.journal.read("e") if e.kind == EventKind.STEP_FAILED]
    assert len(failed) == 1 and failed[0].step_id == "talk"


@pytest.mark.parametrize("within", [0.0, 0.05])
async def test_the_journal_is_the_same_watched_or_not(within: float) -> None:
    journals = []
    for watched in (False, True):
        mid: list[list[str]] = []
        rt = deferred_runtime(0.3, mid, within)
        shown: list[str] = []
        if watched:
            rt.observe(lambda e, seen=shown: seen.append(e.data["text"]) if e.kind == EventKind.STREAM_CHUNK else None)
        await rt.start(streaming_body("journal"), None, execution_id="e")
        journals.append([(e.seq, e.kind, e.step_id, e.at, e.data) for e in rt.journal.read("e")])
        assert mid == [SENTENCES] and (not watched or shown == SENTENCES)
    assert journals[0] == journals[1]
