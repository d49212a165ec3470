"""Progress of long calls (``EffectContext.report_progress``, ``Observers``): reported by a tool or
an MCP server's progress notifications, handed to whoever watches the run, shown on the view's
tool row while the call runs, never journaled. The MCP case runs against a real SDK server
(``mcp_progress_server.py``) over stdio."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp import StdioServerParameters

import loom_nb as loom
from loom_nb.kernel.observers import Progress
from loom_nb.notebook.run_view import RunView
from tests.effects.support import calls, mcp_runtime, scripted_agent

SERVER = Path(__file__).with_name("mcp_progress_server.py")


def watched(rt: loom.Runtime) -> list[tuple[str, Progress]]:
    seen: list[tuple[str, Progress]] = []
    rt.observe(on_progress=lambda eid, sid, progress: seen.append((sid, progress)))
    return seen


def test_a_tools_reports_reach_the_watchers_and_never_the_journal() -> None:
    @loom.tool
    async def index(pages: int, context: loom.EffectContext) -> str:
        """Index some pages."""
        for i in range(1, pages + 1):
            context.report_progress(i, pages, f"page {i}")
        context.report_progress(pages + 1)  # past the total, no message: still a report
        return "indexed"

    rt = loom.Runtime.open()
    seen = watched(rt)
    bot, _ = scripted_agent([index], calls(("index", {"pages": 2})))
    run = bot.start("index", runtime=rt)
    assert run.status == "completed"
    assert seen == [
        ("#turn:0:tool:0", Progress(1, 2, "page 1")),
        ("#turn:0:tool:0", Progress(2, 2, "page 2")),
        ("#turn:0:tool:0", Progress(3, None, None)),
    ]
    assert "page 1" not in json.dumps([e.data for e in rt.journal.read(run.id)])
    rt.close()


def test_a_synchronous_tool_reports_from_its_thread_and_a_failing_watcher_breaks_nothing() -> None:
    @loom.tool
    def scan(context: loom.EffectContext) -> str:
        """Scan (on a worker thread)."""
        context.report_progress(1, 1, "done")
        return "scanned"

    rt = loom.Runtime.open()
    rt.observe(on_progress=lambda eid, sid, progress: 1 / 0)
    seen = watched(rt)
    bot, _ = scripted_agent([scan], calls(("scan", {})))
    assert bot.start("scan", runtime=rt).status == "completed"
    assert [p for _, p in seen] == [Progress(1, 1, "done")]
    rt.close()


async def test_the_view_shows_the_progress_on_the_running_row_only() -> None:
    shown: list[str] = []
    views: list[RunView] = []

    @loom.tool
    async def index(context: loom.EffectContext) -> str:
        """Index."""
        context.report_progress(3, 10, "page 3\nof the manual")
        shown.append(views[0].tool_rows["#turn:0:tool:0"].text())
        shown.append(views[0].tool_rows["#turn:0:tool:0"].widget.value)
        return "indexed"

    rt = loom.Runtime.open()
    bot, _ = scripted_agent([index], calls(("index", {})))
    run = bot.start("index", runtime=rt)  # a task on this loop: the view watches before the tool runs
    views.append(RunView(run))
    await run
    assert run.status == "completed"
    text, html = shown
    assert text.endswith("running [3/10 · page 3↵of the manual]")
    assert "<span class='loom-progress'>3/10 · page 3↵of the manual</span>" in html
    row = views[0].tool_rows["#turn:0:tool:0"]
    assert "[3/10" not in row.text() and "loom-progress" not in row.widget.value  # ended: no progress
    rt.close()


@pytest.mark.slow
async def test_an_mcp_servers_progress_notifications_reach_the_view() -> None:
    tools = loom.mcp_tools(StdioServerParameters(command=sys.executable, args=[str(SERVER)]))
    rt = mcp_runtime()
    seen = watched(rt)
    bot, _ = scripted_agent(tools, calls(("copy_files", {"count": 3})))
    run = bot.start("copy", runtime=rt)
    view = RunView(run)
    await run
    assert run.status == "completed", run
    assert [(sid, p) for sid, p in seen] == [("#turn:0:tool:0", Progress(i, 3, f"copied file {i}")) for i in (1, 2, 3)]
    assert view.tool_rows["#turn:0:tool:0"].progress == "3/3 · copied file 3"  # the last report it showed
    assert "copied file" not in json.dumps([e.data for e in rt.journal.read(run.id)])
    rt.close()
