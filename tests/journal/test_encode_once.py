"""Encoding once (``jsonable_with_text``, ``canonical_object``, ``Event.data_json``) gives the very
text canonical JSON gives, whatever the value: number keys that sort otherwise as strings, surrogates,
models and tuples; and a store writes an event's ``data_json`` as the stored text of its data. The
fast paths of ``canonical.py`` (the encoder without a cycle check, the bare scanner, the split
numeric-key search) give what the slow ways they replace give."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from loom_nb.errors import UsageError
from loom_nb.journal import DuckDBJournal, Event, EventKind, InMemoryJournal, canonical, canonical_json, to_jsonable
from loom_nb.journal.canonical import canonical_object, jsonable_with_text

TEXT = st.text(st.characters(exclude_categories=()), max_size=6)  # lone surrogates included
KEYS = st.one_of(TEXT, st.integers(-20, 20))
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(TEXT, inner, max_size=3),
        st.dictionaries(st.integers(-20, 20), inner, max_size=3),
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(value=VALUES)
def test_jsonable_with_text_is_to_jsonable_and_its_canonical_json(value: Any) -> None:
    plain, text = jsonable_with_text(value)
    assert plain == to_jsonable(value)
    assert text == canonical_json(to_jsonable(value))


@settings(max_examples=200, deadline=None)
@given(data=st.dictionaries(TEXT, VALUES, max_size=4))
def test_canonical_object_of_member_texts_is_the_canonical_json_of_the_object(data: dict[str, Any]) -> None:
    plain = to_jsonable(data)
    assert canonical_object({k: canonical_json(v) for k, v in plain.items()}) == canonical_json(plain)


def test_number_keys_that_sort_otherwise_as_strings_are_encoded_again() -> None:
    value = {"a": {2: "two", 10: "ten"}, "b": [{"10": 1}]}
    plain, text = jsonable_with_text(value)
    assert canonical_json(value) == '{"a":{"2":"two","10":"ten"},"b":[{"10":1}]}'  # sorted as numbers
    assert text == canonical_json(plain) == '{"a":{"10":"ten","2":"two"},"b":[{"10":1}]}'


@pytest.mark.parametrize("store", ["memory", "duckdb"])
def test_a_store_writes_data_json_as_the_stored_text(store: str) -> None:
    journal = InMemoryJournal() if store == "memory" else DuckDBJournal(":memory:")
    data = {"output": {"text": "hi", "n": [1, 2]}}
    text = canonical_json(data)
    journal.append(
        [
            Event("e", 1, EventKind.EXECUTION_STARTED, None, 0.0, {"flow": "f"}),
            Event("e", 2, EventKind.STEP_COMPLETED, "s", 0.0, data, text),
        ]
    )
    (_, read), *_ = [(e, e.data) for e in journal.read("e") if e.seq == 2]
    assert read == json.loads(text) and canonical_json(read) == text
    journal.close()


# -- fast paths of canonical.py, each against the slow way it replaces ------------------------------


class _Model(BaseModel):
    a: Any = None
    b: list[Any] = []


@dataclasses.dataclass
class _Data:
    x: Any
    y: int = 2


RICH = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),  # NaN and infinity included: refused the same way
        TEXT,
        st.frozensets(st.integers(), max_size=3),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(TEXT, inner, max_size=3),
        st.dictionaries(st.integers(-20, 20), inner, max_size=3),
        st.builds(_Model, a=inner, b=st.lists(inner, max_size=2)),
        st.builds(_Data, x=inner),
    ),
    max_leaves=10,
)


def _outcome(fn: Any, value: Any) -> Any:
    try:
        return fn(value)
    except Exception as exc:
        return type(exc)


def _checked_dumps(value: Any) -> str:
    """``_dumps`` as it was: the checked encoder only."""
    try:
        return canonical._ENCODER.encode(value)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


@settings(max_examples=400, deadline=None)
@given(value=RICH)
def test_fast_encoder_writes_what_the_checked_encoder_writes(value: Any) -> None:
    assert canonical._FAST_ENCODER is not None  # CPython has the C accelerator
    assert _outcome(canonical._dumps, value) == _outcome(_checked_dumps, value)


def test_a_reference_cycle_is_refused_as_before() -> None:
    cycle: list[Any] = [1]
    cycle.append(cycle)
    loop: dict[str, Any] = {}
    loop["self"] = {"again": loop}
    for value in (cycle, loop, _Model(a=cycle)):
        with pytest.raises(UsageError, match="Circular reference"):
            canonical_json(value)


@settings(max_examples=300, deadline=None)
@given(value=RICH)
def test_loads_reads_a_canonical_text_as_json_loads_does(value: Any) -> None:
    try:
        text = canonical_json(value)
    except (UsageError, TypeError, ValueError):
        return
    fast, slow = canonical._loads(text), json.loads(text)
    assert fast == slow and canonical_json(fast) == canonical_json(slow)


@settings(max_examples=500, deadline=None)
@given(text=st.text(st.sampled_from('{},"-0123456789:[]ab'), max_size=30))
def test_numeric_key_check_matches_the_single_regex(text: str) -> None:
    assert canonical._may_hold_numeric_key(text) == (canonical._NUMERIC_KEY.search(text) is not None)
