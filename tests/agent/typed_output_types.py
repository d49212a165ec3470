"""Checked by mypy (``test_typed_output_typing.py``), never run: ``Agent[Out]``, ``Run[Out]`` and
``AgentResult[Out]`` carry the output type, so mypy and editors know what ``.output`` is."""

from __future__ import annotations

import dataclasses
from typing import assert_type

from pydantic import BaseModel
from typing_extensions import TypedDict

import loom_nb as loom


class City(BaseModel):
    """A city."""

    name: str


@dataclasses.dataclass
class Point:
    """A point."""

    x: float


class Pair(TypedDict):
    """A pair."""

    left: str


async def check(model: loom.ScriptedModel) -> None:
    """Each line is a claim mypy checks."""
    plain = loom.Agent(model)
    assert_type(plain, loom.Agent[str])
    assert_type((await plain.start("q")).output, str)

    typed = loom.Agent(model, output_type=City, output_retries=3)
    assert_type(typed, loom.Agent[City])
    run = typed.start("q")
    assert_type(run, loom.Run[City])
    result = await run
    assert_type(result, loom.AgentResult[City])
    assert_type(result.output, City)
    assert_type(result.output.name, str)
    assert_type(await typed.run("q"), loom.AgentResult[City])
    assert_type(typed.attach("id").result, loom.AgentResult[City] | None)

    assert_type((await loom.Agent(model, output_type=Point).run("q")).output, Point)
    assert_type((await loom.Agent(model, output_type=list[City]).run("q")).output, list[City])
    assert_type((await loom.Agent(model, output_type=Pair).run("q")).output, Pair)
