"""Checked by mypy (``test_typed_output_typing.py``), never run: ``Agent[Deps, Out]``, ``Run[Out]``
and ``AgentResult[Out]`` carry the deps and output types, so mypy and editors know what ``.output``
is and what ``start(deps=...)`` takes."""

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


@dataclasses.dataclass
class Db:
    """What the tools get."""

    url: str


async def check(model: loom.ScriptedModel) -> None:
    """Each line is a claim mypy checks."""
    plain = loom.Agent(model)
    assert_type(plain, loom.Agent[None, str])
    assert_type((await plain.start("q")).output, str)

    typed = loom.Agent(model, output_type=City, output_retries=3)
    assert_type(typed, loom.Agent[None, City])
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

    with_deps = loom.Agent(model, deps_type=Db)
    assert_type(with_deps, loom.Agent[Db, str])
    assert_type((await with_deps.run("q", deps=Db("duckdb://x"))).output, str)
    both = loom.Agent(model, deps_type=Db, output_type=City)
    assert_type(both, loom.Agent[Db, City])
    assert_type(both.start("q", deps=Db("duckdb://x")), loom.Run[City])
    assert_type(both.patch("v2", system="Be brief."), loom.Agent[Db, City])
