"""Claim-check on an agent's tools (``docs/design.md``, section 6.9): a listed tool's result is
offloaded and the model sees the envelope (a reference plus a digest: by default a 256-character
preview, never for tainted content), never the resolved bytes; a model or compaction effect listed
is an error naming ``claim_check.tool_ids``."""

from __future__ import annotations

import json
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.effects import ClaimCheck, resolve
from loom_nb.effects.claimcheck import ENVELOPE_KEY, PREVIEW_CHARS
from loom_nb.effects.guard import FENCE_CLOSE, FENCE_OPEN, GUARD_NOTE
from loom_nb.errors import ClaimCheckError
from loom_nb.journal import canonical_json
from loom_nb.journal.events import EventKind
from loom_nb.messages import Message, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime
from tests.agent.support import assert_rebuilt_matches, calls, events, make_runtime

PAGE = {"title": "Release notes", "body": "All the details. " * 100}


def page_tools() -> list[loom.Tool]:
    @loom.tool
    def fetch_page(url: str) -> dict[str, Any]:
        """Fetch a page."""
        return PAGE

    @loom.tool(trusted=False)
    def fetch_untrusted(url: str) -> dict[str, Any]:
        """Fetch a page from the open web."""
        return PAGE

    return [fetch_page, fetch_untrusted]


async def run_with(claim_check: ClaimCheck, tool: str = "fetch_page") -> tuple[Any, loom.Run, ScriptedModel]:
    model = ScriptedModel([calls((tool, {"url": "https://example.com"})), ModelResponse.text("Read it.")])
    rt = make_runtime()
    agent = loom.Agent(model=model, tools=page_tools(), name="reader", claim_check=claim_check)
    run = agent.start("Summarise the page", runtime=rt)
    await run.wait()
    return rt, run, model


def envelope_seen(model: ScriptedModel) -> tuple[Message, dict[str, Any]]:
    message = model.history[1].messages[-1]
    assert message.role == "tool"
    text = message.text
    if message.tainted:  # the provider got it fenced: <open>\n<text>\n<close>
        assert text.startswith(FENCE_OPEN + "\n") and text.endswith("\n" + FENCE_CLOSE)
        text = text[len(FENCE_OPEN) + 1 : -len(FENCE_CLOSE) - 1]
    return message, json.loads(text)


async def test_a_listed_tools_result_reaches_the_model_as_a_reference_and_a_preview() -> None:
    rt, run, model = await run_with(ClaimCheck(tool_ids=["fetch_page"]))
    assert (await run).output == "Read it."

    message, env = envelope_seen(model)
    text = canonical_json(PAGE)
    assert env == {
        ENVELOPE_KEY: True,
        "ref": env["ref"],
        "size": len(text.encode()),
        "tool": "tools.fetch_page",
        "digest": {"preview": text[:PREVIEW_CHARS], "truncated": True},
    }
    assert PAGE["body"] not in message.text and not message.tainted
    # The bytes are in the content store, by reference; the journal's events never hold them.
    assert resolve(env, rt.journal) == PAGE
    assert all(PAGE["body"] not in json.dumps(e.data) for e in events(rt, run.id))
    (done,) = [e for e in events(rt, run.id, EventKind.STEP_COMPLETED) if e.step_id == "#turn:0:tool:0"]
    assert done.data["output"] == env
    assert_rebuilt_matches(rt, run.id, model)


async def test_a_tainted_result_gets_a_bare_reference_marked_tainted_and_fenced() -> None:
    rt, run, model = await run_with(ClaimCheck(tool_ids=["fetch_untrusted"]), "fetch_untrusted")
    await run

    message, env = envelope_seen(model)
    assert message.tainted
    assert message.text.startswith(FENCE_OPEN)  # the guard fenced it for the provider
    assert Message.system(GUARD_NOTE) in model.history[1].messages
    assert env == {
        ENVELOPE_KEY: True,
        "ref": env["ref"],
        "size": env["size"],
        "tool": "tools.fetch_untrusted",
        "tainted": True,
    }
    assert "digest" not in env and "Release notes" not in message.text  # no preview of tainted content
    info = rt.journal.content_info(env["ref"])
    assert info is not None and info[2] is True  # stored as tainted
    assert_rebuilt_matches(rt, run.id, model, guarded=True)


async def test_preview_false_gives_a_bare_reference() -> None:
    rt, run, model = await run_with(ClaimCheck(tool_ids=["tools.fetch_page"], preview=False))
    await run
    _, env = envelope_seen(model)
    assert sorted(env) == sorted([ENVELOPE_KEY, "ref", "size", "tool"])
    assert resolve(env, rt.journal) == PAGE


async def test_a_declared_digest_replaces_the_preview() -> None:
    digests = {"fetch_page": lambda page: {"title": page["title"], "words": len(page["body"].split())}}
    _, run, model = await run_with(ClaimCheck(tool_ids=["fetch_page"], digests=digests))
    await run
    _, env = envelope_seen(model)
    assert env["digest"] == {"title": "Release notes", "words": 300}


async def test_listing_the_model_effect_fails_the_run_naming_claim_check_tool_ids() -> None:
    model = ScriptedModel([ModelResponse.text("never")])
    rt = make_runtime()
    agent = loom.Agent(
        model=model,
        tools=page_tools(),
        name="reader",
        claim_check=ClaimCheck(tool_ids=["fetch_page", "model.reader"]),
    )
    run = agent.start("hi", runtime=rt)
    with pytest.raises(ClaimCheckError):
        await run
    error = run.exception()
    assert isinstance(error, ClaimCheckError)
    assert str(error) == (
        "claim_check.tool_ids lists 'model.reader', a model effect: a model or compaction result must reach "
        "the loop whole, never as an envelope. Remove it from claim_check.tool_ids (now ['fetch_page', "
        "'model.reader'])."
    )
    assert model.history == []
    assert rt.result(run.id).status == "failed"


async def test_listing_the_compaction_effect_fails_the_run_too() -> None:
    model = ScriptedModel(
        [calls(("fetch_page", {"url": "u"})), calls(("fetch_page", {"url": "v"})), ModelResponse.text("done")]
    )
    rt = make_runtime()
    agent = loom.Agent(
        model=model,
        tools=page_tools(),
        name="reader",
        summarizer=ScriptedModel([ModelResponse.text("s")]),
        compaction=loom.Compaction(effect_id="model.summary", after_messages=2, keep_recent=1),
        claim_check=ClaimCheck(tool_ids=["model.summary"]),
    )
    run = agent.start("hi", runtime=rt)
    await run.wait()
    error = run.exception()
    assert isinstance(error, ClaimCheckError)
    assert "claim_check.tool_ids lists 'model.summary', a summarizer effect" in str(error)


async def test_a_model_result_holding_an_envelope_is_refused_by_the_loop(rt: Runtime) -> None:

    def sneaky(request: Any) -> dict[str, Any]:
        response = ModelResponse.text("hi").model_dump(mode="json")
        response["message"]["text"] = "hi"
        return {**response, "attachment": {ENVELOPE_KEY: True, "ref": "sha256:00", "size": 1}}

    rt.effects.register("model.sneaky", sneaky, kind="model", idempotent=True)
    agent = loom.Agent(model="model.sneaky", name="sneaky")
    run = agent.start("hi", runtime=rt)
    await run.wait()
    error = run.exception()
    assert isinstance(error, ClaimCheckError)
    assert "the model effect 'model.sneaky' returned a claim-check envelope at step '#turn:0'" in str(error)
