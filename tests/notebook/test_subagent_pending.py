"""``%loom pending`` with a sub-agent waiting at its gate: the child's gate is the open one, its
card answers the child, and the parent goes on; ``%loom replay`` of the parent replays the child too
(through ``IPython.testing.globalipapp``, no kernel)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.testing import globalipapp

from loom_nb.notebook import magics
from loom_nb.notebook.cards import ApprovalCard
from loom_nb.notebook.run_view import RunView
from tests.agent.test_subagents import TOOL_STEP, agents


@pytest.fixture(scope="module")
def shell() -> Any:
    return globalipapp.start_ipython() or globalipapp.get_ipython()  # None when another module started it


@pytest.fixture
def ip(shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("LOOM_JOURNAL", str(tmp_path / "nb.duckdb"))
    shell.run_line_magic("load_ext", "loom_nb")
    yield shell
    shell.run_line_magic("unload_ext", "loom_nb")
    for name in ("lead", "researcher"):
        shell.user_ns.pop(name, None)


def test_pending_lists_the_childs_gate_and_its_card_finishes_child_and_parent(
    ip: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shown: list[Any] = []
    monkeypatch.setattr(magics, "display", shown.append)
    log: list[str] = []
    lead, researcher = agents(log)
    ip.user_ns.update(lead=lead, researcher=researcher)
    run = lead.start("go", execution_id="lead-p")
    assert run.status == "suspended"
    child = f"lead-p/{TOOL_STEP}"
    capsys.readouterr()
    ip.run_line_magic("loom", "pending")
    out = capsys.readouterr().out
    assert "loom_nb: 1 gate(s) open when this cell ran, in 1 execution(s); the views below stay live" in out
    (view,) = shown  # the child's own view: its gate is the open one
    assert isinstance(view, RunView) and view.run.id == child
    card = view.cards["#turn:0:tool:0:approval"]
    assert isinstance(card, ApprovalCard)
    assert f"%loom resume {child} '#turn:0:tool:0:approval' --approve" in card.text()
    card.approve.click()
    rt = run.runtime
    assert rt.result(child).status == "completed" and log == ["fetch https://a.test"]
    assert rt.result("lead-p").status == "completed"
    assert rt.result("lead-p").output["output"] == "Done: a.test says hi"
    view.close()
    capsys.readouterr()
    ip.run_line_magic("loom", "replay lead-p")  # the replay descends into the child
    assert "loom_nb: replay of lead-p: reproduced (" in (out := capsys.readouterr().out), out
    assert "1 child execution(s) replayed too)" in out
