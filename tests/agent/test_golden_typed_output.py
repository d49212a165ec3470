"""The golden journal ``tests/agent/golden/agent_typed_output.jsonl``: a typed-output run's persisted
shapes must not change, the recorded run must replay, and a changed output type must be reported."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import loom_nb as loom
from loom_nb.journal.events import EventKind
from tests.agent import golden_typed_flows as golden
from tests.kernel import golden_flows

FORMATS = pytest.mark.parametrize("event_format", sorted(golden.GOLDENS), ids=lambda f: f"format{f}")


@FORMATS
async def test_a_typed_run_still_journals_the_golden_run_identically(event_format: int) -> None:
    """A diff here means persisted shapes changed: migrate, then regenerate (module docstring)."""
    fresh = golden_flows.to_lines(await golden.record(event_format))
    assert fresh == golden.GOLDENS[event_format].read_text(encoding="utf-8").splitlines()


@FORMATS
async def test_the_golden_typed_journal_replays_and_reads_back_typed(event_format: int) -> None:
    journal = golden.load(event_format)
    rt = golden.make_runtime(journal)
    before = len(journal.read(golden.EXECUTION_ID))
    report = await rt.replay(golden.EXECUTION_ID)
    assert report.reproduced, report.message
    assert len(journal.read(golden.EXECUTION_ID)) == before
    result = golden.make_agent().attach(golden.EXECUTION_ID, runtime=rt).result
    assert result is not None and result.output == golden.Forecast(city="Oslo", celsius=12)
    first = next(e for e in journal.read(golden.EXECUTION_ID) if e.kind == EventKind.STEP_STARTED)
    assert first.data["input"]["output"]["type"] == "tests.agent.golden_typed_flows:Forecast"
    assert [t["name"] for t in first.data["input"]["tools"]] == ["weather", "final_result"]


async def test_a_changed_output_type_does_not_replay_the_golden_run() -> None:
    class Forecast(BaseModel):
        city: str
        celsius: float  # was int

    rt = golden.make_runtime(golden.load())
    loom.Agent(
        loom.ScriptedModel(golden.respond),
        tools=[golden.weather],
        name=golden.AGENT_NAME,
        output_type=Forecast,
        system="Forecast.",
    ).register(rt)
    report = await rt.replay(golden.EXECUTION_ID)
    assert not report.reproduced
    assert "step '#turn:0': its input digest" in str(report.message)
