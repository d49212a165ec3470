"""chunk_deltas scans only new text and joins its buffer only to cut a chunk; it must cut exactly
where a full rescan of the buffer would (its time on long text: ``bench/chunking.py``)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.agent import chunk_deltas

_BOUNDARY = re.compile(r"[.!?;:](?:[\"')\]]*)\s+|\n")


def reference(deltas: list[str], min_chars: int) -> list[str]:
    """The straightforward rule: after each delta, rescan the whole buffer for its last boundary."""
    out, buffer = [], ""
    for delta in deltas:
        buffer += delta
        if len(buffer) < min_chars:
            continue
        cuts = [m.end() for m in _BOUNDARY.finditer(buffer) if m.end() >= min_chars]
        if cuts:
            out.append(buffer[: cuts[-1]])
            buffer = buffer[cuts[-1] :]
    return [*out, buffer] if buffer else out


pieces = st.lists(
    st.sampled_from(
        ["word", "a", " ", ".", "!", "?", '"', ")", "]", "'", ":", ";", "\n", "\t", "  ", ". ", "end. ", '"' * 9]
    )
)


@settings(max_examples=300, deadline=None)
@given(deltas=st.lists(pieces.map("".join), max_size=40), min_chars=st.integers(1, 30))
@pytest.mark.slow
def test_incremental_chunks_equal_a_full_rescan(deltas: list[str], min_chars: int) -> None:
    got: list[str] = []
    chunker = chunk_deltas(got.append, min_chars=min_chars)
    for delta in deltas:
        chunker(delta)
    chunker.flush()
    assert got == reference(deltas, min_chars)
    assert "".join(got) == "".join(deltas)
