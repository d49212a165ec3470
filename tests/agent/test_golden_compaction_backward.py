"""The golden journal ``tests/agent/golden/agent_compaction_backward.jsonl``: a run recorded under the
old, backward kept-suffix rule (no ``keep_rule`` in its compaction inputs) must keep replaying and
recovering under today's code, which applies the rule each compaction was recorded with."""

from __future__ import annotations

from loom_nb.journal.events import EventKind
from tests.agent import golden_compaction_flows as golden
from tests.kernel import golden_flows


def compactions(events: list) -> dict[str, dict]:
    return {
        e.step_id: e.data["input"]
        for e in events
        if e.kind == EventKind.STEP_STARTED and e.step_id and e.step_id.endswith(":compact")
    }


async def test_the_backward_rule_golden_replays() -> None:
    journal = golden.load()
    recorded = journal.read(golden.EXECUTION_ID)
    # The file holds what the old rule kept: 4 messages where keep_recent=3 (the suffix was extended
    # back to the call of the tool result it started with).
    assert {sid: rec["keep"] for sid, rec in compactions(recorded).items()} == {
        "#turn:3:compact": 4,
        "#turn:4:compact": 4,
    }
    assert all("keep_rule" not in rec for rec in compactions(recorded).values())
    rt = golden.make_runtime(journal)
    report = await rt.replay(golden.EXECUTION_ID)
    assert report.reproduced, report.message
    assert len(journal.read(golden.EXECUTION_ID)) == len(recorded)


async def test_a_backward_rule_run_cut_at_every_event_recovers_with_the_rule_it_was_recorded_with() -> None:
    events = golden.load().read(golden.EXECUTION_ID)
    final = events[-1]
    assert final.kind == EventKind.EXECUTION_COMPLETED
    for cut in range(1, len(events) - 1):
        journal = golden_flows.load(golden.GOLDEN, upto_seq=events[cut].seq)
        rt = golden.make_runtime(journal)
        (result,) = await rt.recover()
        assert result.status == "completed", (cut, result.error)
        # The same answer in as many turns (the usage may differ: a compaction the cut journal did
        # not hold yet is made under today's rule, which sends fewer messages).
        done = final.data["output"]
        assert (result.output["output"], result.output["turns"]) == (done["output"], done["turns"]), cut
        again = journal.read(golden.EXECUTION_ID)
        # Every compaction the cut journal held keeps its recorded input (and so the old rule).
        held = compactions(events[: cut + 1])
        assert {sid: rec for sid, rec in compactions(again).items() if sid in held} == held, cut
