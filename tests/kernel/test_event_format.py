"""Event format 2 (``loom_nb.journal.event_format``): what the kernel leaves out of the journal, and
that every guarantee holds without it: input references, derived digests and keys, and the stream
chunks a step's output holds (dropped once it completes, kept when it does not)."""

from __future__ import annotations

from typing import Any

import pytest

from loom_nb.errors import NonDeterminismError, UsageError
from loom_nb.journal import EventKind
from loom_nb.journal.event_format import FORMAT_1, FORMAT_2, with_format
from loom_nb.journal.run_state import RunState
from loom_nb.kernel import EffectContext, Engine, ExecutionContext
from tests.journal.support import copy_prefix, kinds
from tests.kernel.support import make_runtime

WORDS = [f"w{i} " for i in range(100)]


def talker(fail: bool = False) -> Any:
    """An effect that streams WORDS through its delta sink, then returns (or raises)."""

    def talk(value: Any, ctx: EffectContext) -> Any:
        for word in WORDS[: value["words"]]:
            ctx.emit_delta(word)
        if fail:
            raise ValueError("cut off")
        return {"text": "".join(WORDS[: value["words"]]), "args": {"n": value["words"]}}

    return talk


def runtime(event_format: int, *, fail: bool = False) -> Engine:
    rt = make_runtime()
    rt.event_format = event_format
    rt.effects.register("talk", talker(fail), idempotent=True)
    rt.effects.register("use", lambda value: {"used": value}, idempotent=True)
    return rt


async def streaming_body(ctx: ExecutionContext, inp: Any) -> Any:
    def to_journal(text: str) -> None:
        ctx.stream(text, step_id="talk")

    said = await ctx.execute("talk", {"words": inp}, step_id="talk", on_delta=to_journal)
    return await ctx.execute("use", said["args"], step_id="use", input_ref=("talk", "args"))


def chunks(rt: Engine, eid: str) -> list[str]:
    return [e.data["text"] for e in rt.journal.read(eid) if e.kind == EventKind.STREAM_CHUNK]


async def test_format_2_drops_the_chunks_a_completed_step_holds_and_references_its_input() -> None:
    rt = runtime(FORMAT_2)
    seen: list[str] = []
    rt.observe(lambda e: seen.append(e.data["text"]) if e.kind == EventKind.STREAM_CHUNK else None)
    result = await rt.start(streaming_body, 5, execution_id="e")
    assert result.output == {"used": {"n": 5}}
    assert seen == WORDS[:5]  # every chunk is shown live
    assert chunks(rt, "e") == []  # none is journaled: the step's output holds the text
    events = rt.journal.read("e")
    assert events[0].data["format"] == FORMAT_2
    assert [e.data for e in events if e.kind == EventKind.STEP_STARTED] == [
        {"effect": "talk", "input": {"words": 5}},
        {"effect": "use", "ref": ["talk", "args"]},
    ]
    steps = RunState.fold(events).steps
    assert steps["use"].input == {"n": 5} and steps["use"].ref == ["talk", "args"]
    assert (await rt.replay("e")).reproduced


async def test_format_1_journals_every_chunk_and_a_copy_of_the_input() -> None:
    rt = runtime(FORMAT_1)
    await rt.start(streaming_body, 5, execution_id="e")
    assert chunks(rt, "e") == WORDS[:5]
    events = rt.journal.read("e")
    assert "format" not in events[0].data
    used = [e.data for e in events if e.kind == EventKind.STEP_STARTED][1]
    assert (used["input"], used["idempotency_key"], used["attempt"]) == ({"n": 5}, "e:use", 1)


async def test_a_step_that_fails_keeps_the_text_it_streamed() -> None:
    rt = runtime(FORMAT_2, fail=True)
    result = await rt.start(streaming_body, 3, execution_id="e")
    assert result.status == "failed"
    events = rt.journal.read("e")
    assert chunks(rt, "e") == WORDS[:3]
    assert kinds(events)[-3:] == ["stream_chunk", "step_failed", "execution_failed"]


async def test_a_long_stream_is_durable_in_part_while_its_step_runs_and_recovery_keeps_it() -> None:
    """64 waiting events commit the held chunks inside the step: a crash mid-stream leaves that
    partial text in the journal, and the recovered run keeps it and completes."""
    rt = runtime(FORMAT_2)
    await rt.start(streaming_body, 100, execution_id="e")
    events = rt.journal.read("e")
    done = next(e.seq for e in events if e.kind == EventKind.STEP_COMPLETED and e.step_id == "talk")
    partial = [e for e in events if e.kind == EventKind.STREAM_CHUNK]
    assert 0 < len(partial) < 100 and all(e.seq < done for e in partial)
    assert "".join(e.data["text"] for e in partial) == "".join(WORDS[: len(partial)])

    crashed = make_runtime(copy_prefix(events, done - 1), flows=rt.flows)  # cut mid-step, after that commit
    crashed.effects = rt.effects
    (result,) = await crashed.recover()
    assert result.status == "completed"
    after = chunks(crashed, "e")
    assert after[: len(partial)] == [e.data["text"] for e in partial]  # the partial text survived


async def test_a_reference_is_kept_only_when_the_output_there_is_the_input() -> None:
    rt = runtime(FORMAT_2)

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        said = await ctx.execute("talk", {"words": 1}, step_id="talk")
        await ctx.execute("use", {"n": 2}, step_id="other", input_ref=("talk", "args"))  # not what it holds
        await ctx.execute("use", said["args"], step_id="missing", input_ref=("talk", "nowhere"))
        return await ctx.execute("use", said["args"], step_id="unknown", input_ref=("nope", "args"))

    await rt.start(body, None, execution_id="e")
    started = {e.step_id: e.data for e in rt.journal.read("e") if e.kind == EventKind.STEP_STARTED}
    assert started["other"] == {"effect": "use", "input": {"n": 2}}
    assert started["missing"] == {"effect": "use", "input": {"n": 1}}
    assert started["unknown"] == {"effect": "use", "input": {"n": 1}}


async def test_a_changed_input_behind_a_reference_is_non_determinism() -> None:
    rt = runtime(FORMAT_2)
    await rt.start(streaming_body, 2, execution_id="e")
    events = rt.journal.read("e")
    cut = next(e.seq for e in events if e.kind == EventKind.STEP_STARTED and e.step_id == "use")

    async def changed(ctx: ExecutionContext, inp: Any) -> Any:
        said = await ctx.execute("talk", {"words": inp}, step_id="talk")
        return await ctx.execute("use", {**said["args"], "extra": 1}, step_id="use")

    rt.flows.register(changed, name="streaming_body")
    crashed = make_runtime(copy_prefix(events, cut), flows=rt.flows)
    crashed.effects = rt.effects
    (reported,) = await crashed.recover()
    assert reported.status == "running" and reported.error is not None
    digest = RunState.fold(events).steps["use"].input_digest()
    assert f"its input digest {digest} was recorded" in str(reported.exception())
    assert isinstance(reported.exception(), NonDeterminismError)


async def test_a_fork_keeps_its_sources_format() -> None:
    rt = runtime(FORMAT_2)
    await rt.start(streaming_body, 2, execution_id="e")
    rt.event_format = FORMAT_1
    forked = await rt.fork("e", "use", new_execution_id="f")
    assert forked.status == "completed"
    events = rt.journal.read("f")
    assert events[0].data["format"] == FORMAT_2
    assert [e.data for e in events if e.kind == EventKind.STEP_STARTED][-1] == {
        "effect": "use",
        "ref": ["talk", "args"],
    }


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(UsageError, match="unknown event format 3"):
        with_format({}, 3)
