"""Claim-check (``loom_nb.effects.claimcheck``): a listed tool's large result becomes an envelope
(preview, ref) with its bytes in the journal's content store, served on replay without running."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.effects import ClaimCheck, EffectRing, JournalContentStore, contains_envelope, is_envelope, resolve
from loom_nb.effects.claimcheck import ENVELOPE_KEY, PREVIEW_CHARS
from loom_nb.errors import ClaimCheckError, UsageError
from loom_nb.journal import DuckDBJournal, EventKind, InMemoryJournal, canonical_json, digest_bytes
from loom_nb.journal.store import JournalStore
from loom_nb.messages import Message, ModelRequest
from loom_nb.runtime import Runtime
from tests.effects.support import error_type, make, model_response, of_kind, one_step, step_events


def big_rows(n: int = 50) -> list[dict[str, Any]]:
    return [{"id": i, "title": f"result number {i}", "body": "lorem ipsum " * 3} for i in range(n)]


def claim_runtime(config: ClaimCheck, journal: JournalStore | None = None) -> Runtime:
    rt = make(journal)
    rt.effects.add_claim_check(config)
    return rt


def holds_envelope(value: Any) -> bool:
    """The definition ``contains_envelope`` implements, written the plainest way."""
    if isinstance(value, Mapping):
        return value.get(ENVELOPE_KEY) is True or any(holds_envelope(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(holds_envelope(v) for v in value)
    return False


_ENVELOPE_OR_NOT = st.fixed_dictionaries({ENVELOPE_KEY: st.sampled_from([True, False, 1, "true", None])})
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5) | _ENVELOPE_OR_NOT,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.sampled_from(["a", "b", ENVELOPE_KEY]), inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", ENVELOPE_KEY]), inner, max_size=3).map(MappingProxyType)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_contains_envelope_finds_an_envelope_wherever_the_plain_definition_does(value: Any) -> None:
    """Only ``True`` under the key is an envelope (not 1, not "true"), at any depth, in dicts, other
    mappings, lists and tuples."""
    assert contains_envelope(value) is holds_envelope(value)


async def test_a_listed_tool_result_becomes_an_envelope_with_a_preview_and_its_bytes_in_the_journal() -> None:
    rows = big_rows()
    rt = claim_runtime(ClaimCheck(tool_ids=["search"]))
    rt.effects.register("tools.search", lambda q: rows, kind="tool")
    result = await rt.start(one_step("tools.search", "q"), None)

    envelope = result.output
    text = canonical_json(rows)
    assert envelope == {
        ENVELOPE_KEY: True,
        "ref": digest_bytes(text.encode()),
        "size": len(text.encode()),
        "tool": "tools.search",
        "digest": {"preview": text[:PREVIEW_CHARS], "truncated": True},
    }
    assert is_envelope(envelope) and contains_envelope({"x": [envelope]})
    (completed,) = of_kind(rt, result.execution_id, EventKind.STEP_COMPLETED)
    assert completed.data["output"] == envelope
    assert rt.journal.get_content(envelope["ref"]) == text.encode()
    assert rt.journal.content_info(envelope["ref"]) == (len(text.encode()), "application/json", False)
    assert resolve(envelope, rt.journal) == rows
    assert resolve(envelope, JournalContentStore(rt.journal)) == rows


async def test_a_short_result_has_an_untruncated_preview() -> None:
    rt = claim_runtime(ClaimCheck(tool_ids=["tools.lookup"]))
    rt.effects.register("tools.lookup", lambda q: {"b": 2, "a": 1}, kind="tool")
    result = await rt.start(one_step("tools.lookup", "q"), None)
    assert result.output["digest"] == {"preview": '{"a":1,"b":2}', "truncated": False}


async def test_a_tainted_result_gets_a_bare_ref_and_a_tainted_marker_and_no_preview() -> None:
    rows = big_rows(3)
    rt = claim_runtime(ClaimCheck(tool_ids=["fetch"], digests={"fetch": len}))
    rt.effects.register("tools.fetch", lambda q: rows, kind="tool", trusted=False)
    result = await rt.start(one_step("tools.fetch", "q"), None)
    envelope = result.output
    assert envelope["tainted"] is True
    assert "digest" not in envelope
    assert set(envelope) == {ENVELOPE_KEY, "ref", "size", "tool", "tainted"}
    (completed,) = of_kind(rt, result.execution_id, EventKind.STEP_COMPLETED)
    assert completed.data["tainted"] is True
    info = rt.journal.content_info(envelope["ref"])
    assert info is not None and info[2] is True
    assert resolve(envelope, rt.journal) == rows


async def test_preview_false_gives_a_bare_ref() -> None:
    rt = claim_runtime(ClaimCheck(tool_ids=["search"], preview=False))
    rt.effects.register("tools.search", lambda q: big_rows(2), kind="tool")
    result = await rt.start(one_step("tools.search", "q"), None)
    assert set(result.output) == {ENVELOPE_KEY, "ref", "size", "tool"}


@pytest.mark.parametrize("key", ["search", "tools.search"])
async def test_a_custom_digest_projection_replaces_the_preview(key: str) -> None:
    rows = big_rows(7)

    def project(result: list[dict[str, Any]]) -> dict[str, Any]:
        return {"count": len(result), "first": result[0]["id"]}

    rt = claim_runtime(ClaimCheck(tool_ids=["search"], digests={key: project}))
    rt.effects.register("tools.search", lambda q: rows, kind="tool")
    result = await rt.start(one_step("tools.search", "q"), None)
    assert result.output["digest"] == {"count": 7, "first": 0}
    assert resolve(result.output, rt.journal) == rows


async def test_unlisted_effects_pass_the_claim_check_untouched() -> None:
    rt = claim_runtime(ClaimCheck(tool_ids=["search"]))
    rt.effects.register("tools.other", lambda q: big_rows(2), kind="tool")
    rt.effects.register("model.fake", lambda r: model_response("plain"), kind="model")

    async def flow(ctx: Any, _: Any) -> list[Any]:
        return [
            await ctx.execute("tools.other", "q"),
            (await ctx.execute("model.fake", ModelRequest(messages=(Message.user("x"),))))["message"]["text"],
        ]

    result = await rt.start(flow, None)
    assert result.output == [big_rows(2), "plain"]


async def test_a_model_effect_listed_in_tool_ids_is_refused_without_running() -> None:
    got: list[Any] = []
    rt = claim_runtime(ClaimCheck(tool_ids=["search", "model.main"]))
    rt.effects.register("model.main", lambda r: got.append(r) or model_response(), kind="model")
    result = await rt.start(one_step("model.main", ModelRequest(messages=(Message.user("x"),))), None)
    assert result.status == "failed"
    assert got == []
    error = result.exception()
    assert isinstance(error, ClaimCheckError)
    message = str(error)
    assert "claim_check.tool_ids lists 'model.main', a model effect" in message
    assert "Remove it from claim_check.tool_ids (now ['model.main', 'search'])" in message
    assert error_type(step_events(rt, "exec-1", "#1")[-1].data) == "ClaimCheckError"


async def test_a_model_effect_returning_an_envelope_is_refused() -> None:
    rt = claim_runtime(ClaimCheck(tool_ids=["search"]))
    envelope = {ENVELOPE_KEY: True, "ref": "sha256:00", "size": 1, "tool": "tools.search"}
    rt.effects.register("summarize", lambda r: {"summary": [envelope]}, kind="summarizer")
    result = await rt.start(one_step("summarize", None), None)
    error = result.exception()
    assert isinstance(error, ClaimCheckError)
    assert "the summarizer effect 'summarize' returned a claim-check envelope" in str(error)


async def test_a_replayed_claim_checked_step_serves_the_envelope_without_running() -> None:
    calls: list[Any] = []
    rt = claim_runtime(ClaimCheck(tool_ids=["search"]))
    rt.effects.register("tools.search", lambda q: calls.append(q) or big_rows(3), kind="tool")

    async def flow(ctx: Any, _: Any) -> Any:
        envelope = await ctx.execute("tools.search", "q")
        await ctx.gate("look", "Ack")
        return envelope

    suspended = await rt.start(flow, None)
    done = await rt.resume(suspended.execution_id, "look", None)
    assert calls == ["q"]
    assert is_envelope(done.output)
    assert (await rt.replay(suspended.execution_id)).reproduced


async def test_claim_checked_bytes_land_in_the_duckdb_content_table(tmp_path: Path) -> None:
    rows = big_rows(20)
    journal = DuckDBJournal(tmp_path / "loom.duckdb")
    rt = claim_runtime(ClaimCheck(tool_ids=["search"]), journal)
    rt.effects.register("tools.search", lambda q: rows, kind="tool")
    result = await rt.start(one_step("tools.search", "q"), None)
    rt.close()
    reopened = DuckDBJournal(tmp_path / "loom.duckdb", read_only=True)
    try:
        (row,) = reopened.connection.execute(
            "SELECT size, media_type, tainted FROM content WHERE digest = ?", [result.output["ref"]]
        ).fetchall()
        assert row == (len(canonical_json(rows).encode()), "application/json", False)
        assert resolve(result.output, reopened) == rows
    finally:
        reopened.close()


def test_a_claim_check_needs_a_store() -> None:
    with pytest.raises(UsageError, match=r"ClaimCheck needs a store"):
        EffectRing().add_claim_check(ClaimCheck(tool_ids=["search"]))


def test_a_claim_check_configuration_is_installed_once() -> None:
    effects = EffectRing()
    config = ClaimCheck(tool_ids=("search",), store=JournalContentStore(InMemoryJournal()))
    effects.add_claim_check(config)
    effects.add_claim_check(config)
    assert [type(i).__name__ for i in effects.interceptors][-1] == "ClaimCheckInterceptor"
    assert len(effects.interceptors) == 7


def test_resolve_refuses_what_is_not_an_envelope_and_names_a_missing_ref() -> None:
    journal = InMemoryJournal()
    with pytest.raises(UsageError, match="takes a claim-check envelope"):
        resolve({"ref": "x"}, journal)
    with pytest.raises(UsageError, match="the content sha256:00 is not in the store"):
        resolve({ENVELOPE_KEY: True, "ref": "sha256:00"}, journal)
