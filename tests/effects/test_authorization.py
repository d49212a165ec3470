"""Authorization (``loom_nb.effects.authz``): a principal's scopes are checked before an effect runs;
a refusal is journaled as ``step_failed`` and re-raised on replay; the journaled principal authorizes
a resumed run."""

from __future__ import annotations

from typing import Any

from loom_nb.errors import NotAuthorizedError
from loom_nb.journal import EventKind, InMemoryJournal
from loom_nb.kernel import FlowRegistry, Principal
from loom_nb.runtime import Runtime
from tests.effects.support import counting, error_type, make, of_kind, one_step, step_events
from tests.journal.support import kinds


async def test_a_runtime_principal_holding_the_scope_is_authorized() -> None:
    calls: list[Any] = []
    rt = make(principal=Principal.of("ops", ["mail.send", "read"]))
    rt.effects.register("mail.send", counting(calls), scopes=["mail.send"])
    result = await rt.start(one_step("mail.send", "hi"), None)
    assert (result.status, result.output, calls) == ("completed", "ok", ["hi"])
    (started,) = of_kind(rt, result.execution_id, EventKind.EXECUTION_STARTED)
    assert started.data["principal"] == {"name": "ops", "scopes": ["mail.send", "read"]}


async def test_a_missing_scope_is_refused_before_the_effect_runs_and_journaled_as_step_failed() -> None:
    calls: list[Any] = []
    rt = make(principal=Principal.of("intern", ["read"]))
    rt.effects.register("mail.send", counting(calls), scopes=["mail.send", "read"])
    result = await rt.start(one_step("mail.send", "hi"), None)

    assert result.status == "failed"
    assert calls == []
    error = result.exception()
    assert isinstance(error, NotAuthorizedError)
    message = str(error)
    assert "effect 'mail.send' requires scope 'mail.send'" in message
    assert "principal 'intern' does not hold" in message
    assert "(it holds: read)" in message
    assert "Principal.of('intern', scopes=[..., 'mail.send'])" in message
    assert kinds(step_events(rt, result.execution_id, "#1")) == ["step_started", "step_failed"]
    failed = step_events(rt, result.execution_id, "#1")[-1]
    assert failed.data["will_retry"] is False
    assert error_type(failed.data) == "NotAuthorizedError"
    assert of_kind(rt, result.execution_id, EventKind.STEP_COMPLETED) == []


async def test_a_principal_with_no_scopes_is_told_it_holds_none(rt: Runtime) -> None:
    rt.effects.register("admin.drop", lambda x: x, scopes=["admin"])
    result = await rt.start(one_step("admin.drop"), None)
    assert result.error is not None
    assert "principal 'anonymous' does not hold (it holds: none)" in result.error["message"]


async def test_the_principal_given_to_start_overrides_the_runtime_principal() -> None:
    calls: list[Any] = []
    rt = make(principal=Principal.of("nobody"))
    rt.effects.register("db.write", counting(calls), scopes=["db.write"])

    allowed = await rt.start(one_step("db.write", 1), None, principal=Principal.of("svc", ["db.write"]))
    refused = await rt.start(one_step("db.write", 2), None)
    other = await rt.start(one_step("db.write", 3), None, principal=Principal.of("guest", ["db.read"]))

    assert allowed.status == "completed"
    assert refused.status == "failed" and "principal 'nobody'" in str(refused.exception())
    assert other.status == "failed" and "principal 'guest'" in str(other.exception())
    assert "(it holds: db.read)" in str(other.exception())
    assert calls == [1]


async def test_the_journaled_principal_authorizes_a_resumed_run_in_a_new_runtime() -> None:
    """The principal is part of the execution's record, not of whichever runtime resumes it."""
    flows = FlowRegistry()
    journal = InMemoryJournal()
    calls: list[Any] = []

    async def flow(ctx: Any, _: Any) -> Any:
        await ctx.gate("go", "Approval")
        return await ctx.execute("db.write", "row")

    first = make(journal, flows=flows)
    result = await first.start(flow, None, principal=Principal.of("svc", ["db.write"]))
    assert result.status == "suspended"

    second = make(journal, flows=flows)  # default principal: anonymous, no scopes
    second.effects.register("db.write", counting(calls), scopes=["db.write"])
    resumed = await second.resume(result.execution_id, "go", True)
    assert (resumed.status, calls) == ("completed", ["row"])


async def test_a_refusal_caught_by_the_flow_is_re_raised_on_replay_without_invoking() -> None:
    calls: list[Any] = []
    rt = make(principal=Principal.of("intern"))
    rt.effects.register("mail.send", counting(calls), scopes=["mail.send"])

    async def flow(ctx: Any, _: Any) -> str:
        try:
            await ctx.execute("mail.send", "hi")
        except NotAuthorizedError as exc:
            await ctx.gate("ack", "Ack")
            return f"refused: {type(exc).__name__}"
        return "sent"

    result = await rt.start(flow, None)
    assert result.status == "suspended"
    done = await rt.resume(result.execution_id, "ack", None)
    assert (done.status, done.output, calls) == ("completed", "refused: NotAuthorizedError", [])
    report = await rt.replay(result.execution_id)
    assert report.reproduced, report.message
