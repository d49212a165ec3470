"""``frames().outputs()``: a typed-output run's answer as JSON and as flattened columns, its attempts,
and no row for a text agent."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import loom_nb as loom
from loom_nb.agent.output import FINAL_RESULT_TOOL
from loom_nb.analysis import OUTPUT_COLUMNS
from loom_nb.journal import InMemoryJournal
from loom_nb.testing import FakeClock, SequentialIds


class Address(BaseModel):
    """Where."""

    city: str
    zip: str


class Person(BaseModel):
    """Who."""

    name: str
    age: int
    address: Address


def final(arguments: dict) -> loom.ModelResponse:
    return loom.ModelResponse.tool_calls([(FINAL_RESULT_TOOL, arguments)])


@pytest.mark.parametrize("store", ["memory", "duckdb"])
async def test_outputs_shows_json_and_flattened_columns_per_typed_run(store: str) -> None:
    if store == "duckdb":
        rt = loom.Runtime.open(":memory:", clock=FakeClock(tick=0.01), ids=SequentialIds())
    else:
        rt = loom.Runtime(InMemoryJournal(), clock=FakeClock(tick=0.01), ids=SequentialIds())
    ann = {"name": "Ann", "age": 41, "address": {"city": "Oslo", "zip": "0150"}}
    typed = loom.Agent(loom.ScriptedModel([final({"name": "Ann"}), final(ann)]), output_type=Person, name="people")
    run = typed.start("Who?", runtime=rt, view=False)
    assert (await run).output == Person.model_validate(ann)
    await loom.Agent(loom.ScriptedModel([loom.ModelResponse.text("plain")]), name="text").run("Hi", runtime=rt)
    native = loom.Agent(
        loom.ScriptedModel([loom.ModelResponse.text('{"response": [1, 2]}')], native_output=True),
        output_type=list[int],
        name="numbers",
    )
    numbers = native.start("Numbers?", runtime=rt, view=False)
    assert (await numbers).output == [1, 2]

    df = loom.frames(rt).outputs()
    # The journal keeps canonical JSON (sorted keys): the flattened columns come in that order.
    flat = ["output.address.city", "output.address.zip", "output.age", "output.name"]
    assert list(df.columns) == [*OUTPUT_COLUMNS, *flat]
    assert list(df["execution_id"]) == [run.id, numbers.id]  # the text agent has no row
    people = df.iloc[0]
    assert (people["output_type"], people["output_mode"]) == (
        "tests.analysis.test_typed_output_frames:Person",
        "tool",
    )
    assert (people["attempts"], people["failed_attempts"], people["status"]) == (2, 1, "completed")
    assert people["output"] == ann
    assert people["output_json"] == '{"address":{"city":"Oslo","zip":"0150"},"age":41,"name":"Ann"}'
    assert (people["output.name"], people["output.age"], people["output.address.city"]) == ("Ann", 41, "Oslo")
    listed = df.iloc[1]
    assert (listed["output_type"], listed["output_mode"], listed["output"]) == ("list[int]", "native", [1, 2])
    assert listed["attempts"] == 1 and listed["failed_attempts"] == 0
    one = loom.frames(rt).outputs(numbers.id)
    assert list(one["execution_id"]) == [numbers.id] and "output.name" not in one.columns
    assert {c: str(t) for c, t in df[list(OUTPUT_COLUMNS)].dtypes.items()}["attempts"] == "int64"
