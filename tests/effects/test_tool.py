"""``@tool`` (``loom_nb.effects.tool``): schemas from type hints, docstrings and defaults; argument
validation with readable errors; tools run through the ring as effects."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from loom_nb.effects import EffectRing, tool
from loom_nb.errors import ToolArgumentsError, UsageError
from loom_nb.kernel import EffectContext, Principal
from loom_nb.runtime import Runtime
from tests.effects.support import error_type, make, one_step, step_events


@tool
def search(query: str, limit: int = 5, *, lang: str | None = None) -> list[str]:
    """Search the web.

    Returns the titles of the best pages.

    Args:
        query: What to look for.
        limit (int): How many results, at most.
        lang: A language code, like "en".
    """
    return [f"{query}:{i}" for i in range(limit)]


def test_tool_schema_comes_from_type_hints_docstring_and_defaults() -> None:
    spec = search.spec
    assert spec.name == "search"
    assert spec.description == "Search the web."
    params = spec.parameters
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    assert "title" not in params
    props = params["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"] == {"type": "integer", "default": 5, "description": "How many results, at most."}
    assert props["lang"]["description"] == 'A language code, like "en".'
    assert props["lang"]["default"] is None
    assert {"type": "string"} in props["lang"]["anyOf"]
    assert all("title" not in p for p in props.values())


def test_tool_registration_describes_the_effect() -> None:
    effects = EffectRing()
    spec = search.register(effects)
    assert search.effect_id == spec.effect_id == "tools.search"
    assert (spec.kind, spec.idempotent, spec.trusted, spec.meta) == ("tool", False, True, {"tool": "search"})
    assert spec.context_param == "effect_context"


def test_an_effect_context_parameter_is_hidden_from_the_schema() -> None:
    @tool(name="mail", idempotent=True, trusted=False, scopes=["mail.send"], description="Send mail.")
    async def send_mail(to: str, info: EffectContext, body: str = "") -> str:
        return f"{to}:{info.idempotency_key}"

    assert set(send_mail.spec.parameters["properties"]) == {"to", "body"}
    assert send_mail.spec.parameters["required"] == ["to"]
    assert send_mail.spec.description == "Send mail."
    assert (send_mail.name, send_mail.idempotent, send_mail.trusted, send_mail.scopes) == (
        "mail",
        True,
        False,
        frozenset({"mail.send"}),
    )
    assert repr(send_mail) == "Tool('mail', idempotent, untrusted)"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "query: Field required"),
        ({"query": "x", "limit": "many"}, "limit: Input should be a valid integer"),
        ({"query": "x", "color": "red"}, "color: Extra inputs are not permitted"),
        ({"query": ["x"]}, "query: Input should be a valid string"),
    ],
)
def test_invalid_tool_arguments_raise_a_readable_tool_arguments_error(arguments: dict[str, Any], problem: str) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        search.validate(arguments)
    assert str(info.value).startswith("invalid arguments for tool 'search': ")
    assert problem in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_tool_arguments_are_validated_and_defaulted() -> None:
    assert search.validate({"query": "x"}) == {"query": "x", "limit": 5, "lang": None}
    assert search.validate({"query": "x", "limit": "3"}) == {"query": "x", "limit": 3, "lang": None}
    assert search("direct", 2) == ["direct:0", "direct:1"]


def test_a_tool_with_star_args_is_a_usage_error() -> None:
    def spread(*items: str) -> None:
        """Spread."""

    with pytest.raises(UsageError, match=r"\*args / \*\*kwargs cannot be described"):
        tool(spread)


async def test_tools_run_through_the_ring_as_effects_sync_and_async() -> None:
    seen: list[EffectContext] = []

    @tool
    async def lookup(key: str, info: EffectContext) -> dict[str, str]:
        """Look a key up."""
        seen.append(info)
        return {"key": key, "by": info.principal.name}

    rt = make(principal=Principal.of("ada"))
    search.register(rt.effects)
    lookup.register(rt.effects)

    async def flow(ctx: Any, _: Any) -> list[Any]:
        return [
            await ctx.execute("tools.search", {"query": "cats", "limit": 2}, step_id="#turn:0:tool:0"),
            await ctx.execute("tools.lookup", {"key": "k"}, step_id="#turn:0:tool:1"),
        ]

    result = await rt.start(flow, None)
    assert result.output == [["cats:0", "cats:1"], {"key": "k", "by": "ada"}]
    assert (seen[0].idempotency_key, seen[0].attempt) == ("exec-1:#turn:0:tool:1", 1)


async def test_invalid_tool_arguments_are_journaled_as_step_failed_and_the_function_never_runs(rt: Runtime) -> None:
    calls: list[Any] = []

    @tool
    def record(value: int) -> int:
        """Record a value."""
        calls.append(value)
        return value

    record.register(rt.effects)

    async def flow(ctx: Any, _: Any) -> str:
        try:
            await ctx.execute("tools.record", {"value": 1, "extra": True})
        except ToolArgumentsError as exc:
            return str(exc)
        return "ran"

    result = await rt.start(flow, None)
    assert result.output == "invalid arguments for tool 'record': extra: Extra inputs are not permitted"
    assert calls == []
    failed = step_events(rt, result.execution_id, "#1")[-1]
    assert (failed.kind, error_type(failed.data)) == ("step_failed", "ToolArgumentsError")


async def test_a_tool_requiring_a_scope_is_authorized_against_the_principal() -> None:
    @tool(scopes=["fs.write"])
    def write(path: str) -> str:
        """Write a file."""
        return path

    rt = make(principal=Principal.of("reader", ["fs.read"]))
    write.register(rt.effects)
    result = await rt.start(one_step("tools.write", {"path": "/tmp/x"}), None)
    assert "effect 'tools.write' requires scope 'fs.write'" in str(result.exception())


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)


@settings(max_examples=300, deadline=None)
@given(
    arguments=st.dictionaries(st.sampled_from(["query", "limit", "lang", "other"]), JSONISH, max_size=4)
    | st.fixed_dictionaries({"query": st.text(max_size=5)}, optional={"limit": st.integers(), "lang": JSONISH})
)
def test_validate_gives_what_model_validate_and_a_getattr_per_field_give(arguments: dict[str, Any]) -> None:
    def slow() -> Any:
        try:
            model = search.args_model.model_validate(arguments)
        except ValidationError as exc:
            return ("error", [(e["loc"], e["msg"]) for e in exc.errors(include_url=False)])
        return ("ok", {k: getattr(model, k) for k in type(model).model_fields})

    try:
        fast: Any = ("ok", search.validate(arguments))
    except ToolArgumentsError as exc:
        fast = ("error", str(exc))
    expected = slow()
    if expected[0] == "ok":
        assert fast == expected
        assert list(fast[1]) == list(expected[1])  # the same order
    else:
        assert fast[0] == "error"
        problems = "; ".join(f"{'.'.join(str(p) for p in loc) or 'arguments'}: {msg}" for loc, msg in expected[1])
        assert fast[1] == f"invalid arguments for tool 'search': {problems}"


def test_the_tool_spec_is_kept_while_what_it_is_built_from_stays() -> None:
    @tool
    def probe(n: int) -> int:
        """Probe."""
        return n

    first = probe.spec
    assert probe.spec is first
    probe.description = "Probe twice."
    assert probe.spec.description == "Probe twice." and probe.spec is not first
    assert probe.spec.parameters == first.parameters
