"""The write path (``docs/design.md``, section 4): durability per effect, the safety exceptions,
group commit across executions, and the per-execution fallback when a shared transaction fails.
The agent's commits per turn: ``tests/agent/test_commits_per_turn.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from loom_nb.errors import JournalWriteError, UsageError
from loom_nb.journal import ContentBlob, Event, InMemoryJournal
from loom_nb.journal.events import EventKind
from loom_nb.journal.store import write_error
from loom_nb.kernel import Durability, ExecutionContext, JournalWriter
from loom_nb.kernel.effect_registry import EffectRegistry
from loom_nb.testing import FailingJournal, JournalProxy
from tests.kernel.support import make_runtime


def test_the_default_durability_follows_idempotence_and_after_needs_it() -> None:
    effects = EffectRegistry()
    assert effects.register("a", lambda v: v, idempotent=True).commit_rule is Durability.AFTER
    assert effects.register("b", lambda v: v).commit_rule is Durability.BEFORE
    assert effects.register("c", lambda v: v, idempotent=True, durability="deferred").commit_rule is Durability.DEFERRED
    for rule in ("after", "deferred"):
        with pytest.raises(UsageError, match=r"effect 'd'.*needs idempotent=True"):
            effects.register("d", lambda v: v, durability=rule)
    with pytest.raises(UsageError, match="durability must be one of"):
        effects.register("e", lambda v: v, idempotent=True, durability="sometimes")


class Dies:
    """A journal whose process "dies" (``kill``): every later append raises ``SystemExit`` and
    writes nothing, as after a real kill."""

    def __init__(self, inner: InMemoryJournal) -> None:
        self.inner, self.dead = inner, False
        self.location = inner.location

    def append(self, events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        if self.dead:
            raise SystemExit("killed")
        self.inner.append(events, contents)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_recovered_run_commits_starts_first_until_an_outcome_is_committed() -> None:
    """An AFTER step cut in flight leaves no trace; the recovered run's first live step is then
    committed as started before it runs, so a step that kills its process every time counts its
    attempts and meets its limit."""
    journal = InMemoryJournal()
    dying = Dies(journal)
    seen: list[int] = []

    def fetch(value: Any) -> Any:
        seen.append(value)
        if value == 2 and len(seen) == 2:
            dying.dead = True
            raise SystemExit("the process dies inside the call")
        return value

    async def two(ctx: ExecutionContext, inp: Any) -> Any:
        first = await ctx.execute("fetch", 1)
        for _ in range(5):  # the body yields: #1's outcome is committed on its own
            await asyncio.sleep(0)
        return [first, await ctx.execute("fetch", 2)]

    rt = make_runtime(dying)  # type: ignore[arg-type]
    rt.effects.register("fetch", fetch, idempotent=True)
    rt.flows.register(two, "two")
    with pytest.raises(SystemExit):
        await rt.start("two", None, execution_id="x")
    assert [(e.kind, e.step_id) for e in journal.read("x")][-2:] == [
        (EventKind.STEP_STARTED, "#1"),
        (EventKind.STEP_COMPLETED, "#1"),
    ]  # AFTER: no trace of the cut call

    proxy = JournalProxy(journal)
    again = make_runtime(proxy, flows=rt.flows)
    again.effects.register("fetch", fetch, idempotent=True)
    observed: list[tuple[str, str | None]] = []
    again.observe(lambda e: observed.append((e.kind, e.step_id)))
    (done,) = await again.recover()
    assert done.status == "completed" and done.output == [1, 2]
    assert seen == [1, 2, 2]
    assert proxy.appends == 2  # "#2" started (alone, before it runs); its outcome with execution_completed
    assert observed[0] == (EventKind.STEP_STARTED, "#2")


class FailingFor:
    """A journal whose appends fail when they hold an event of ``bad``."""

    def __init__(self, inner: InMemoryJournal, bad: str) -> None:
        self.inner, self.bad = inner, bad
        self.location = inner.location
        self.appends: list[set[str]] = []

    def append(self, events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        self.appends.append({e.execution_id for e in events})
        if any(e.execution_id == self.bad for e in events):
            raise write_error(self.location, [e for e in events if e.execution_id == self.bad], OSError("bad"))
        self.inner.append(events, contents)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def event(eid: str, seq: int) -> Event:
    kind = EventKind.EXECUTION_STARTED if seq == 1 else EventKind.WARNING
    return Event(eid, seq, kind, None, 0.0, {"flow": "f"} if seq == 1 else {"code": "c"})


async def test_group_commit_writes_every_execution_in_one_transaction() -> None:
    journal = JournalProxy(InMemoryJournal())
    writer = JournalWriter(journal)
    await asyncio.gather(*(writer.commit([event(f"e{i}", 1)]) for i in range(5)))
    assert journal.appends == 1 and writer.batches == 1
    assert [len(journal.read(f"e{i}")) for i in range(5)] == [1] * 5


async def test_a_lone_commit_is_written_at_once() -> None:
    journal = JournalProxy(InMemoryJournal())
    writer = JournalWriter(journal)
    await writer.commit([event("a", 1)])
    assert journal.appends == 1
    await writer.commit([event("a", 2)])
    assert journal.appends == 2


async def test_one_executions_failure_never_costs_another_its_events() -> None:
    journal = FailingFor(InMemoryJournal(), "bad")
    writer = JournalWriter(journal)
    outcomes = await asyncio.gather(
        writer.commit([event("ok-1", 1)]),
        writer.commit([event("bad", 1)]),
        writer.commit([event("ok-2", 1)]),
        return_exceptions=True,
    )
    assert outcomes[0] is None and outcomes[2] is None
    error = outcomes[1]
    assert isinstance(error, JournalWriteError) and error.execution_id == "bad" and "'bad'" in str(error)
    assert journal.read("ok-1") and journal.read("ok-2") and not journal.read("bad")
    # the shared transaction first, then each execution alone
    assert journal.appends == [{"ok-1", "bad", "ok-2"}, {"ok-1"}, {"bad"}, {"ok-2"}]


async def test_a_failed_background_commit_stops_the_run_before_the_next_effect() -> None:
    """The commit of a step's outcome, started when the body yields, fails: the next step's effect
    does not run and its start is not written; the engine writes what was staged once more and
    raises; ``recover()`` runs the rest once."""
    journal = FailingJournal(InMemoryJournal(), 2, persistent=False)
    rt = make_runtime(journal)  # type: ignore[arg-type]
    charged: list[Any] = []
    rt.effects.register("fetch", lambda v: v, idempotent=True)
    rt.effects.register("charge", lambda v: charged.append(v) or "ok")

    async def pay(ctx: ExecutionContext, inp: Any) -> Any:
        item = await ctx.execute("fetch", 1)
        for _ in range(5):  # the body yields: the outcome's commit starts (and fails) meanwhile
            await asyncio.sleep(0)
        return [item, await ctx.execute("charge", 2)]

    rt.flows.register(pay, "pay")
    with pytest.raises(JournalWriteError):
        await rt.start("pay", None, execution_id="p")
    assert charged == []
    assert not [e for e in journal.read("p") if e.step_id == "#2"]
    assert [e.kind for e in journal.read("p") if e.step_id == "#1"][-1] == EventKind.STEP_COMPLETED
    (done,) = await rt.recover()
    assert done.status == "completed" and charged == [2]


def test_every_staged_data_json_is_the_canonical_json_of_its_data() -> None:
    """What the context hands the store pre-encoded (``Event.data_json``) is exactly what the store
    would have encoded: a run with dict, list and string outputs, checked event by event."""
    import loom_nb as loom
    from loom_nb.journal import InMemoryJournal, canonical_json
    from loom_nb.kernel import FlowRegistry

    seen: list[tuple[str, str]] = []

    class Checking(InMemoryJournal):
        def append(self, events, contents=()):  # type: ignore[no-untyped-def]
            seen.extend((e.data_json, canonical_json(e.data)) for e in events if e.data_json is not None)
            super().append(events, contents)

    @loom.tool(idempotent=True)
    async def lookup(key: str) -> dict[str, object]:
        """Look a key up."""
        return {"key": key, "values": [3, 1, 2], "nested": {"b": 1, "a": None}}

    model = loom.ScriptedModel(
        [
            loom.ModelResponse.tool_calls([("lookup", {"key": "x"})], text="Looking it up."),
            loom.ModelResponse.text("Done."),
        ]
    )
    rt = loom.Runtime(Checking(), flows=FlowRegistry())
    run = loom.Agent(model=model, tools=[lookup], name="enc").start("go", runtime=rt, execution_id="enc-1")
    rt.close()
    assert run.status == "completed"
    assert len(seen) >= 3  # both model outputs and the tool's dict output
    assert all(given == expected for given, expected in seen)


@pytest.mark.parametrize("cancels", [1, 2])
async def test_a_cancel_during_a_commit_waits_for_the_write_then_passes(cancels: int) -> None:
    """A task cancelled (once or twice) while its commit is in flight: the write goes on, the task
    waits for it, and only then does the cancel pass, as ``CancelledError`` from ``commit``."""
    journal = InMemoryJournal()
    rt = make_runtime(journal)
    seen: list[Any] = []

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        ctx.warn("w", "staged before the cancel")
        task = asyncio.current_task()
        assert task is not None
        for _ in range(cancels):  # arrive while the write waits for the writer's flush
            asyncio.get_running_loop().call_soon(task.cancel)
        try:
            await ctx.commit()
        except asyncio.CancelledError:
            seen.append([e.kind for e in journal.read("c")])
            raise
        seen.append("not cancelled")

    rt.flows.register(body, "c")
    with pytest.raises(asyncio.CancelledError):
        await asyncio.ensure_future(rt.start("c", None, execution_id="c"))
    assert seen == [[EventKind.EXECUTION_STARTED, EventKind.WARNING]]


async def test_a_cancel_during_a_failing_commit_passes_and_keeps_the_events_staged() -> None:
    """The write a cancelled task waits for fails: the cancel passes (not the journal's error), and
    what it held stays staged, so the engine's last commit writes it with no gap in ``seq``."""
    journal = FailingJournal(InMemoryJournal(), 1, persistent=False)
    rt = make_runtime(journal)  # type: ignore[arg-type]
    seen: list[Any] = []

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        ctx.warn("w", "staged before the cancel")
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().call_soon(task.cancel)
        try:
            await ctx.commit()
        except BaseException as exc:
            seen.append((type(exc), journal.failures))
            raise

    rt.flows.register(body, "c")
    with pytest.raises(asyncio.CancelledError):
        await asyncio.ensure_future(rt.start("c", None, execution_id="c"))
    assert seen == [(asyncio.CancelledError, 1)]
    assert [(e.seq, e.kind) for e in journal.read("c")] == [(1, EventKind.EXECUTION_STARTED), (2, EventKind.WARNING)]


def test_the_context_builds_events_as_event_does() -> None:
    """``_new_event`` (the staged events' fast constructor) sets every field of ``Event``, in the
    order of its fields, and builds an instance equal to the one ``Event`` builds."""
    from dataclasses import astuple, fields

    from loom_nb.kernel import context

    assert len(fields(Event)) == 7 and not hasattr(Event, "__post_init__")
    values = ("x", 3, EventKind.STEP_STARTED, "#1", 12.5, {"effect": "e"}, '{"effect":"e"}')
    built, fast = Event(*values), context._new_event(*values)
    assert type(fast) is Event and fast == built and astuple(fast) == astuple(built) == values
    assert fast.data_json == built.data_json
