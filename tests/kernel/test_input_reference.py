"""Format 2 input references (``ExecutionContext._input_reference``): the canonical texts of the
named output part and of the input are compared instead of their digests; a reference is kept
exactly when the digests are equal, whatever the values (numbers of several types that Python
finds equal, number keys, surrogates)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.journal.canonical import digest_bytes, digest_value, jsonable_with_text, to_jsonable
from loom_nb.kernel import ExecutionContext
from tests.kernel.support import make_runtime

TEXT = st.text(st.characters(exclude_categories=()), max_size=4)  # lone surrogates included
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, -1.0, 0.5]), TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(TEXT, inner, max_size=3),
        st.dictionaries(st.integers(-3, 3), inner, max_size=2),
    ),
    max_leaves=8,
)


def _context() -> ExecutionContext:
    rt = make_runtime()
    captured: list[ExecutionContext] = []

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        captured.append(ctx)
        return None

    rt.flows.register(body, "capture")
    asyncio.run(rt.start("capture", None, execution_id="ref"))
    return captured[0]


CTX = _context()


@settings(max_examples=400, deadline=None)
@given(target=VALUES, input=VALUES, same=st.booleans())
def test_a_reference_is_kept_exactly_when_the_digests_are_equal(target: Any, input: Any, same: bool) -> None:
    if same:
        input = target
    _, text = jsonable_with_text(input)
    output = to_jsonable({"args": target})  # a live step's output, as the context keeps it
    CTX._recent["src"] = output
    ref = CTX._input_reference(["src", "args"], text)
    # What it compared before: the digest ``execute`` takes of the input, and the target's.
    expected = digest_value(output["args"]) == digest_bytes(text.encode("utf-8"))
    assert ref == (["src", "args"] if expected else None)
