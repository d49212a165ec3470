"""mypy knows the deps and output types: ``typed_output_types.py`` type-checks in strict mode, the
same file with one claim made wrong does not (so the check can fail), and ``reveal_type`` shows
``Agent[Deps, Out]`` as mypy infers it."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

pytestmark = pytest.mark.slow
ONE_STORE = "mypy reads the source: no journal is opened"

CHECKED = Path(__file__).with_name("typed_output_types.py")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for the module's checks: loom_nb and its dependencies are analysed once."""
    return tmp_path_factory.mktemp("mypy-cache")


def mypy(path: Path, cache: Path) -> tuple[str, int]:
    out, err, status = api.run(["--strict", "--cache-dir", str(cache), "--python-version", "3.11", str(path)])
    return out + err, status


def test_the_output_type_reaches_run_and_result(cache: Path) -> None:
    report, status = mypy(CHECKED, cache)
    assert status == 0, report


def test_a_wrong_claim_about_the_output_type_fails(tmp_path: Path, cache: Path) -> None:
    text = CHECKED.read_text(encoding="utf-8")
    wrong = text.replace("assert_type(result.output, City)", "assert_type(result.output, str)")
    assert wrong != text
    path = tmp_path / "wrong_claim.py"
    path.write_text(wrong, encoding="utf-8")
    report, status = mypy(path, cache)
    assert status == 1
    assert 'Expression is of type "City", not "str"' in report


REVEAL = """
import dataclasses

from pydantic import BaseModel

import loom_nb as loom


class City(BaseModel):
    name: str


@dataclasses.dataclass
class Db:
    url: str


async def check(model: loom.ScriptedModel) -> None:
    reveal_type(loom.Agent(model))
    reveal_type(loom.Agent(model, output_type=City))
    both = loom.Agent(model, deps_type=Db, output_type=City)
    reveal_type(both)
    reveal_type((await both.run("q", deps=Db("x"))).output)
    both.start("q", deps="not a Db")
"""


def test_reveal_type_shows_deps_and_output(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "reveal.py"
    path.write_text(REVEAL, encoding="utf-8")
    report, status = mypy(path, cache)
    assert status == 1  # the last line gives deps of the wrong type
    revealed = [line.split("Revealed type is ", 1)[1] for line in report.splitlines() if "Revealed type" in line]
    assert revealed == [
        '"loom_nb.agent.agent.Agent[None, str]"',
        '"loom_nb.agent.agent.Agent[None, reveal.City]"',
        '"loom_nb.agent.agent.Agent[reveal.Db, reveal.City]"',
        '"reveal.City"',
    ]
    assert 'Argument "deps" to "start" of "Agent" has incompatible type "str"; expected "Db | None"' in report
