"""Any Python text, lone UTF-16 surrogates included, goes through canonical JSON and both stores:
it is stored (never refused by DuckDB), the in-memory journal reads back what DuckDB reads back,
and the digest of what is read back equals the digest of the live value (so a replay matches).
Ids are keys and are not made storable (``tests/journal/test_journal_ids.py``): here they hold
any character but NUL and lone surrogates, surrogate pairs included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.journal import DuckDBJournal, Event, EventKind, InMemoryJournal, canonical_json, digest_value
from loom_nb.journal.canonical import storable_text

ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)  # surrogates (Cs) included
SURROGATES = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=4)
TEXT = st.one_of(ANY_TEXT, st.builds(lambda a, b, c: a + b + c, ANY_TEXT, SURROGATES, ANY_TEXT))
#: Ids a journal keys: any character but NUL and a lone surrogate, and surrogate pairs.
ID_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12)
IDS = st.one_of(ID_TEXT, st.builds(lambda a, b: a + "\ud83d\ude00" + b, ID_TEXT, ID_TEXT))
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None)
@given(value=VALUES, eid=IDS, step=IDS)
@pytest.mark.slow
def test_any_text_is_stored_read_back_alike_by_both_stores_with_the_live_digest(
    value: Any, eid: str, step: str
) -> None:
    text = canonical_json(value)
    text.encode("utf-8")  # valid Unicode: DuckDB and UTF-8 files take it
    assert canonical_json(json.loads(text)) == text  # idempotent: read back, it is the same text
    events = [
        Event(eid, 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": "f", "input": value, "principal": None}),
        Event(eid, 2, EventKind.VALUE_RECORDED, step, 2.0, {"kind": "x", "value": value}),
    ]
    read_back = []
    for journal in (InMemoryJournal(), DuckDBJournal(":memory:")):
        journal.append(events)
        got = journal.read(eid)
        assert [(e.execution_id, e.step_id) for e in got] == [
            (storable_text(eid), None),
            (storable_text(eid), storable_text(step)),
        ]
        assert digest_value(got[1].data["value"]) == digest_value(value)
        assert journal.get_execution(eid) is not None
        read_back.append([e.data for e in got])
        journal.close()
    assert read_back[0] == read_back[1]


def test_a_surrogate_pair_becomes_its_character_and_a_lone_one_the_replacement_character() -> None:
    assert storable_text("\ud83d\ude00") == "\U0001f600"
    assert storable_text("a\ud83db\udc00") == "a\ufffdb\ufffd"
    assert canonical_json({"\ud800": 1, "\ue000": 2}) == '{"\ue000":2,"\ufffd":1}'  # sorted as stored
