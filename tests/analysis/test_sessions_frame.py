"""``frames().sessions()``: one row per session run, columns as documented, read from the journal."""

from __future__ import annotations

import re
from pathlib import Path

import loom_nb as loom
from loom_nb.analysis.frames import SESSION_COLUMNS, frames
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import make_runtime

ROOT = Path(__file__).resolve().parents[2]


def documented() -> dict[str, str]:
    """The rows of the table after ``f.sessions()`` in docs/analysis.md."""
    out: dict[str, str] = {}
    inside = False
    for line in (ROOT / "docs" / "analysis.md").read_text().splitlines():
        if line.startswith("`f.sessions()`"):
            inside = True
        elif inside and line.startswith("`f."):
            break
        row = re.match(r"^\| `(\w+)` \| `([\w\[\]]+)` \|", line)
        if inside and row:
            out[row.group(1)] = row.group(2)
    return out


def dtypes(df: object) -> dict[str, str]:
    return {c: str(t) for c, t in df.dtypes.items()}  # type: ignore[attr-defined]


async def test_sessions_frame_lists_each_run_in_session_order() -> None:
    rt = make_runtime()
    f = frames(rt)
    assert documented() == SESSION_COLUMNS
    assert f.sessions().empty and dtypes(f.sessions()) == dtypes(f.sessions().astype(SESSION_COLUMNS))

    def respond(request: ModelRequest) -> ModelResponse:
        return ModelResponse.text(f"{sum(m.role == 'user' for m in request.messages)} so far")

    agent = loom.Agent(model=ScriptedModel(respond), name="chat")
    await agent.run("not in a session", runtime=rt)
    for sid, texts in (("b", ["hi", "again"]), ("a", ["one", "two", "three"])):
        session = agent.session(sid, runtime=rt)
        for text in texts:
            await session.run(text)
    df = f.sessions()
    assert list(df.columns) == list(SESSION_COLUMNS)
    assert df[["session_id", "index"]].values.tolist() == [["a", 0], ["a", 1], ["a", 2], ["b", 0], ["b", 1]]
    assert df["output"].tolist() == ["1 so far", "2 so far", "3 so far", "1 so far", "2 so far"]
    assert df["message"].tolist() == ["one", "two", "three", "hi", "again"]
    assert df["previous"].tolist()[1:3] == ["session:chat:a:0", "session:chat:a:1"]
    assert df["previous"].isna().tolist() == [True, False, False, True, False]
    assert set(df["status"]) == {"completed"} and set(df["turns"]) == {1}
    # A later run's transcript frame resolves the carried conversation.
    t = f.transcript("session:chat:a:2", 0)
    assert t["role"].tolist() == ["user", "assistant", "user", "assistant", "user"]
    assert dtypes(df) == dtypes(df.astype(SESSION_COLUMNS))


def test_the_fold_and_the_sql_agree_on_the_golden_session_runs() -> None:
    from loom_nb.testing import FakeClock, SequentialIds
    from tests.agent import golden_session_flows
    from tests.analysis.test_fold_matches_sql import assert_fold_matches_sql

    rt = loom.Runtime(golden_session_flows.load(), clock=FakeClock(tick=1), ids=SequentialIds())
    for eid in [f"session:chat:thread-1:{i}" for i in range(3)]:
        assert_fold_matches_sql(rt, eid)
        steps = frames(rt).steps(eid)
        marker = steps[steps["step_id"] == "#patched:short-answers"]
        assert marker["kind"].tolist() == ["value"], eid
