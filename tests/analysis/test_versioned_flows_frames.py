"""Versioned flows in the frames: which runs took a patch's new path (the ``#patched:<change>``
marker is a value row of ``steps()``), and a replay of each run against the patched agent."""

from __future__ import annotations

import loom_nb as loom
from loom_nb.analysis.frames import frames
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import make_runtime


def respond(request: ModelRequest) -> ModelResponse:
    return ModelResponse.text(f"({request.messages[0].text})")


async def test_steps_show_which_runs_took_the_patched_path_and_both_replay() -> None:
    rt = make_runtime()
    old = loom.Agent(ScriptedModel(respond), system="Be careful.", name="versioned-frames")
    assert (await old.run("a", runtime=rt, execution_id="old")).output == "(Be careful.)"
    new = loom.Agent(ScriptedModel(respond), system="Be careful.", name="versioned-frames")
    new.patch("terse", system="Be terse.")
    assert (await new.run("b", runtime=rt, execution_id="new")).output == "(Be terse.)"
    f = frames(rt)
    steps = f.steps()
    markers = steps[steps["step_id"] == "#patched:terse"]
    assert markers["execution_id"].tolist() == ["new"] and markers["kind"].tolist() == ["value"]
    replayed = (await f.replay(["old", "new"])).set_index("execution_id")
    assert replayed["reproduced"].tolist() == [True, True]  # the old run replays on the old prompt
