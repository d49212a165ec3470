"""The effect ring: sync and async effects registered on the assembled ``loom_nb.runtime.Runtime`` run as
journaled steps, with an ``EffectContext`` when they ask for one; unknown or invalid registrations are
usage errors. The interceptors have a file each beside this one.
"""

from __future__ import annotations

from typing import Any

import pytest

from loom_nb.effects import EffectRing, JournalContentStore
from loom_nb.errors import EffectNotFoundError, UsageError
from loom_nb.journal import EventKind
from loom_nb.kernel import EffectContext, Principal
from loom_nb.runtime import Runtime
from tests.effects.support import counting, make, of_kind, one_step
from tests.journal.support import kinds


async def test_sync_and_async_effects_run_as_journaled_steps(rt: Runtime) -> None:
    rt.effects.register("double", lambda x: x * 2)

    async def add_one(x: int) -> int:
        return x + 1

    rt.effects.register("add_one", add_one)

    async def flow(ctx: Any, n: int) -> list[int]:
        return [await ctx.execute("double", n), await ctx.execute("add_one", n)]

    result = await rt.start(flow, 5)
    assert (result.status, result.output) == ("completed", [10, 6])
    assert kinds(rt.journal.read(result.execution_id)) == [
        "execution_started",
        "step_started",
        "step_completed",
        "step_started",
        "step_completed",
        "execution_completed",
    ]
    started = of_kind(rt, result.execution_id, EventKind.STEP_STARTED)
    assert [(e.step_id, e.data["effect"], e.data["input"], e.data.get("attempt", 1)) for e in started] == [
        ("#1", "double", 5, 1),
        ("#2", "add_one", 5, 1),
    ]


async def test_an_effect_asking_for_an_effect_context_gets_ids_attempt_key_and_principal() -> None:
    seen: list[EffectContext] = []

    async def effect(value: Any, info: EffectContext) -> str:
        seen.append(info)
        return "ok"

    def sync_effect(value: Any, info: EffectContext) -> str:
        seen.append(info)
        return "ok"

    rt = make(principal=Principal.of("ada", ["read"]))
    rt.effects.register("fx.async", effect)
    rt.effects.register("fx.sync", sync_effect)
    assert rt.effects.spec("fx.async").context_param == "info"

    async def flow(ctx: Any, _: Any) -> None:
        await ctx.execute("fx.async", 1, step_id="fetch")
        await ctx.execute("fx.sync", 2)

    result = await rt.start(flow, None, execution_id="run-7")
    assert result.status == "completed"
    first, second = seen
    assert (first.execution_id, first.step_id, first.effect_id) == ("run-7", "fetch", "fx.async")
    assert first.attempt == 1
    assert first.idempotency_key == "run-7:fetch"
    assert first.principal == Principal.of("ada", ["read"])
    assert (second.step_id, second.idempotency_key, second.effect_id) == ("#1", "run-7:#1", "fx.sync")
    started = of_kind(rt, "run-7", EventKind.STEP_STARTED)
    assert [e.data.get("idempotency_key") for e in started] == [None, None]  # event format 2: derived


async def test_an_effect_without_a_context_parameter_gets_only_its_input(rt: Runtime) -> None:
    got: list[Any] = []
    rt.effects.register("plain", counting(got))
    assert rt.effects.spec("plain").context_param is None
    assert (await rt.start(one_step("plain", {"a": 1}), None)).status == "completed"
    assert got == [{"a": 1}]


async def test_an_unknown_effect_is_named_in_the_error_and_nothing_runs(rt: Runtime) -> None:
    rt.effects.register("known", lambda x: x)
    with pytest.raises(EffectNotFoundError, match=r"no effect 'missing' is registered.*registered: known"):
        await rt.start(one_step("missing"), None)


def test_registering_a_non_callable_or_an_empty_id_is_a_usage_error() -> None:
    effects = EffectRing()
    with pytest.raises(UsageError, match="not callable"):
        effects.register("x", 42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="non-empty string"):
        effects.register("", lambda x: x)


def test_the_assembled_runtime_installs_the_ring_and_a_journal_content_store(rt: Runtime) -> None:
    assert isinstance(rt.effects, EffectRing)
    names = [type(i).__name__ for i in rt.effects.interceptors]
    assert names == ["Authorization", "Metering", "Retry", "PromptGuard", "Timeout", "ImageContent"]
    assert isinstance(rt.effects.content_store, JournalContentStore)


def test_the_ring_runs_its_close_callbacks_once_newest_first_when_the_runtime_closes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt = make()
    closed: list[str] = []

    def broken() -> None:
        closed.append("broken")
        raise RuntimeError("cannot close")

    rt.effects.on_close(lambda: closed.append("first"))
    rt.effects.on_close(broken)
    rt.effects.on_close(lambda: closed.append("last"))
    rt.close()
    rt.close()
    assert closed == ["last", "broken", "first"]  # one that raises does not stop the rest
    assert "a close callback of the effect ring failed" in caplog.text
