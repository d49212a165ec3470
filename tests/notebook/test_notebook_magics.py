"""The ``%load_ext loom_nb`` extension and the ``%loom`` / ``%%loom_sql`` magics, through
``IPython.testing.globalipapp`` (a real IPython shell, no kernel, no event loop: runs go on
synchronously)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.testing import globalipapp

import loom_nb as loom
from loom_nb.agent.agent import RUN_HOOKS
from loom_nb.journal import Event
from loom_nb.kernel.flows import FLOWS
from loom_nb.notebook import extension, magics
from loom_nb.notebook.cards import ApprovalCard
from loom_nb.notebook.run_view import RunView
from tests.notebook.support import TidyAgent

GATE = "#turn:1:tool:0:approval"
TASK = "Remove the stale files in /tmp/x"


@pytest.fixture(scope="module")
def shell() -> Any:
    return globalipapp.start_ipython()


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "nb.duckdb"
    monkeypatch.setenv("LOOM_JOURNAL", str(path))
    return path


@pytest.fixture
def displayed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Everything the magics display (the objects, besides their printed text)."""
    seen: list[Any] = []
    original = magics.display

    def capture(obj: Any) -> None:
        seen.append(obj)
        original(obj)

    monkeypatch.setattr(magics, "display", capture)
    return seen


@pytest.fixture
def ip(shell: Any, journal: Path) -> Iterator[Any]:
    shell.run_line_magic("load_ext", "loom_nb")
    added: list[str] = []
    shell.test_added = added
    yield shell
    shell.run_line_magic("unload_ext", "loom_nb")
    for name in added:
        shell.user_ns.pop(name, None)


def define(ip: Any, name: str, value: Any) -> None:
    """Put ``value`` in the notebook's namespace (as running the cell that defines it would)."""
    ip.user_ns[name] = value
    ip.test_added.append(name)


def suspended_run(ip: Any, name: str = "tidy") -> tuple[TidyAgent, loom.Run]:
    t = TidyAgent(name)
    define(ip, f"agent_{name}", t.agent)
    run = t.agent.start("Remove the stale files in /tmp/x")
    assert run.status == "suspended"
    return t, run


def one_line_error(ip: Any, capsys: pytest.CaptureFixture[str], line: str) -> str:
    capsys.readouterr()
    ip.run_cell(line)
    err = capsys.readouterr().err.strip()
    assert err.startswith("UsageError: "), err
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_load_ext_prints_one_line_naming_the_journal(
    shell: Any, journal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_line_magic("load_ext", "loom_nb")
    try:
        out = capsys.readouterr().out.strip().splitlines()
        assert out == [
            f"loom_nb: journal {journal} is open: a new journal, from $LOOM_JOURNAL "
            "(%loom status, %loom runs, %loom pending)"
        ]
        assert loom.default_runtime().journal.location == str(journal)
        assert extension.show_run in RUN_HOOKS
    finally:
        shell.run_line_magic("unload_ext", "loom_nb")
    assert extension.show_run not in RUN_HOOKS
    assert extension.current_runtime() is None


def test_load_ext_reports_runs_left_running_and_open_gates(
    shell: Any, journal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with loom.Runtime.open(journal) as rt:
        TidyAgent("leftover").agent.start("Remove the stale files", runtime=rt)
        rt.journal.append(
            [
                Event(
                    "crashed-1",
                    1,
                    "execution_started",
                    None,
                    1.0,
                    {"flow": "agent:leftover", "input": "hi", "principal": {}},
                )
            ]
        )
    capsys.readouterr()
    shell.run_line_magic("load_ext", "loom_nb")
    try:
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 3, out
        assert "1 execution(s) left running by a crash or restart (crashed-1): run %loom recover" in out[1]
        assert "1 gate(s) open in 1 execution(s): run %loom pending" in out[2]
    finally:
        shell.run_line_magic("unload_ext", "loom_nb")


def test_a_locked_journal_is_a_one_line_message(shell: Any, journal: Path, capsys: pytest.CaptureFixture[str]) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time\n"
            f"c = duckdb.connect({str(journal)!r})\nprint('ready', flush=True)\nsys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        capsys.readouterr()
        shell.run_line_magic("load_ext", "loom_nb")
        captured = capsys.readouterr()
        err = captured.err.strip()
        assert "\n" not in err and "Traceback" not in err, err
        assert err.startswith(f"loom_nb: the journal {journal} is held by process {holder.pid}")
        assert err.endswith("(%loom open PATH opens another file)")
        assert captured.out == ""
        # what needs the journal next repeats the cause, never "run %load_ext" or "no journal" alone
        with pytest.raises(loom.UsageError, match=f"could not open the journal: the journal {journal} is held by"):
            loom.frames()
        shell.run_cell("%%loom_sql\nSELECT 1")
        err = capsys.readouterr().err.strip()
        assert f"no journal is open: the journal {journal} is held by process {holder.pid}" in err, err
        assert "snapshot" not in err and "PostgreSQL" not in err  # the fix is said once, by %load_ext
        # the magics are there to open another file; opening the locked one is one line too
        shell.run_cell(f"%loom open {journal}")
        err = capsys.readouterr().err.strip()
        assert err.startswith("UsageError: the journal") and "held by process" in err and "\n" not in err
        shell.run_line_magic("loom", f"open {journal.parent / 'other.duckdb'}")
        assert "other.duckdb is open" in capsys.readouterr().out
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()
        shell.run_line_magic("unload_ext", "loom_nb")


def test_starting_a_run_displays_its_live_view(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    _, run = suspended_run(ip)
    out = capsys.readouterr().out
    assert f"loom run {run.id} (agent:tidy): running" in out  # the view's text, shown as the run starts


def test_open_switches_the_journal(ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = loom.default_runtime()
    ip.run_line_magic("loom", f"open {tmp_path / 'second.duckdb'}")
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith("second.duckdb is open: a new journal (%loom status, %loom runs, %loom pending)")
    )
    assert loom.default_runtime().journal.location == str(tmp_path / "second.duckdb")
    assert first.closed


def test_open_removes_the_empty_journal_load_ext_just_created(
    ip: Any, journal: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert journal.exists()  # %load_ext created it: nothing is recorded there yet
    ip.run_line_magic("loom", f"open {tmp_path / 'other.duckdb'}")
    assert not journal.exists() and not Path(f"{journal}.wal").exists()
    suspended_run(ip)  # something is recorded in other.duckdb: switching away keeps it
    ip.run_line_magic("loom", f"open {tmp_path / 'third.duckdb'}")
    assert (tmp_path / "other.duckdb").exists()
    ip.run_line_magic("loom", f"open {journal}")
    assert (tmp_path / "third.duckdb").exists() is False  # created by `open`, empty, replaced
    assert journal.exists()
    capsys.readouterr()


def test_a_journal_that_existed_before_load_ext_stays_when_another_is_opened(
    shell: Any, journal: Path, tmp_path: Path
) -> None:
    loom.Runtime.open(str(journal)).close()  # made before the notebook opened it (empty)
    shell.run_line_magic("load_ext", "loom_nb")
    try:
        shell.run_line_magic("loom", f"open {tmp_path / 'other.duckdb'}")
        assert journal.exists()
    finally:
        shell.run_line_magic("unload_ext", "loom_nb")


def test_runs_status_and_sql(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    suspended_run(ip)
    TidyAgent("other").agent.start("Remove the stale files")
    df = ip.run_line_magic("loom", "runs")
    assert list(df.columns) == ["execution_id", "flow", "status", "created_at", "updated_at"]
    assert sorted(df["flow"]) == ["agent:other", "agent:tidy"] and set(df["status"]) == {"suspended"}
    assert list(ip.run_line_magic("loom", "runs --last 1")["flow"]) == ["agent:other"]
    assert ip.run_line_magic("loom", "runs --status completed").empty
    capsys.readouterr()
    ip.run_line_magic("loom", "status")
    out = capsys.readouterr().out.strip()
    assert out.endswith("2 execution(s) (2 suspended); 2 open gate(s); 0 running in this kernel"), out
    df = ip.run_cell_magic("loom_sql", "-o counts", "SELECT status, count(*) AS n FROM executions GROUP BY status")
    assert df.to_dict("records") == [{"status": "suspended", "n": 2}]
    assert ip.user_ns.pop("counts") is df


def test_snapshot_writes_a_copy_of_the_journal_in_use(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, run = suspended_run(ip)
    target = tmp_path / "copy.duckdb"
    capsys.readouterr()
    ip.run_line_magic("loom", f"snapshot {target}")
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"loom_nb: wrote {target}: ") and "1 executions" in out, out
    assert out.endswith(f"open it anywhere with loom.Runtime.open({str(target)!r})")
    with loom.Runtime.open(target, read_only=True) as copy:
        assert copy.journal.read(run.id) == loom.default_runtime().journal.read(run.id)
    err = one_line_error(ip, capsys, f"%loom snapshot {target}")
    assert f"{target} already exists" in err and "overwrite" in err
    ip.run_line_magic("loom", f"snapshot {target} --overwrite")
    assert capsys.readouterr().out.startswith(f"loom_nb: wrote {target}: ")


def test_loom_sql_refuses_a_write_and_a_file_read(ip: Any) -> None:
    suspended_run(ip)
    from IPython.core.error import UsageError as IPythonUsageError

    for cell, refused in [
        ("DELETE FROM events", "refused DELETE"),
        ("SELECT * FROM read_text('/etc/passwd')", "no file"),
    ]:
        with pytest.raises(IPythonUsageError, match=refused):
            ip.run_cell_magic("loom_sql", "", cell)
    assert ip.run_cell_magic("loom_sql", "", "SELECT count(*) AS n FROM events")["n"][0] > 0


def test_pending_shows_a_card_per_open_gate_and_a_click_resumes(
    ip: Any, displayed: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    t, run = suspended_run(ip)
    capsys.readouterr()
    ip.run_line_magic("loom", "pending")
    out = capsys.readouterr().out
    assert "loom_nb: 1 gate(s) open when this cell ran, in 1 execution(s); the views below stay live" in out
    assert f"%loom resume {run.id} '{GATE}' --approve | --refuse [--reason R]" in out
    (view,) = displayed
    assert isinstance(view, RunView) and view.run is run  # the kernel's own Run, not a copy
    card = view.cards[GATE]
    assert isinstance(card, ApprovalCard) and card.problem is None
    card.approve.click()
    assert run.status == "completed" and t.deleted == ["/tmp/x/stale.log"]
    assert card.approve.disabled and card.refuse.disabled and card.decision is not None
    assert card.decision.startswith("approved at ")


def test_show_returns_the_view(ip: Any) -> None:
    _, run = suspended_run(ip)
    view = ip.run_line_magic("loom", f"show {run.id}")
    assert isinstance(view, RunView) and GATE in view.cards
    assert f"loom run {run.id} (agent:tidy): suspended, turn 2/20" in view.text()


def test_resume_approve_and_refuse(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    t, run = suspended_run(ip)
    resumed = ip.run_line_magic("loom", f"resume {run.id} {GATE} --approve --reason 'looks stale'")
    assert resumed is run and run.status == "completed"
    assert f"gate {GATE} of execution {run.id} approved; the run goes on (now completed)" in capsys.readouterr().out
    assert t.deleted == ["/tmp/x/stale.log"]

    t2, run2 = suspended_run(ip, "tidy2")
    ip.run_line_magic("loom", f"resume {run2.id} 0 --refuse --reason 'keep it for now'")
    assert run2.status == "completed" and t2.deleted == []
    assert run2.result is not None
    assert run2.result.output == "Understood: The user refused to run delete_file. Reason: keep it for now"
    resolved = [e.data["payload"] for e in run2.runtime.journal.read(run2.id) if e.kind == "gate_resolved"]
    assert resolved == [{"approved": False, "reason": "keep it for now"}]


def test_resume_approve_with_edited_arguments(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    t, run = suspended_run(ip)
    err = one_line_error(ip, capsys, f"%loom resume {run.id} 0 --approve --arguments '[1]'")
    assert "--arguments must be a JSON object" in err
    err = one_line_error(ip, capsys, f"%loom resume {run.id} 0 --refuse --arguments '{{}}'")
    assert "--arguments goes with --approve" in err
    edited = '{"path": "/tmp/x/other.log"}'
    ip.run_line_magic("loom", f"resume {run.id} 0 --approve --arguments '{edited}'")
    assert "approved with edited arguments; the run goes on (now completed)" in capsys.readouterr().out
    assert t.deleted == ["/tmp/x/other.log"]


def test_unknown_ids_and_gates_are_one_line_errors(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, run = suspended_run(ip)
    for line in (
        "%loom show nope",
        "%loom replay nope",
        "%loom resume nope 0 --approve",
        "%loom timeline nope",
    ):
        err = one_line_error(ip, capsys, line)
        assert "no execution 'nope' in the journal" in err and "%loom runs" in err
    err = one_line_error(ip, capsys, f"%loom resume {run.id} '#turn:9:tool:0:approval' --approve")
    assert f"has no open gate '#turn:9:tool:0:approval' (open gates: {GATE})" in err
    err = one_line_error(ip, capsys, f"%loom resume {run.id} 0 --happened 1")
    assert "is a AgentToolApproval gate: --happened/--run-again/--fail answer in-doubt steps" in err
    err = one_line_error(ip, capsys, f"%loom resume {run.id} 0")
    assert "one of the arguments --approve --refuse --happened --run-again --fail is required" in err
    assert "invalid choice: 'bogus'" in one_line_error(ip, capsys, "%loom bogus")
    ip.run_line_magic("loom", f"resume {run.id} 0 --approve")
    err = one_line_error(ip, capsys, f"%loom resume {run.id} {GATE} --approve")
    assert f"has no open gate '{GATE}' (open gates: none: the run is completed)" in err


def test_help_on_each_command(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert ip.run_line_magic("loom", "--help") is None
    out = capsys.readouterr().out
    for command in ("open", "runs", "pending", "show", "resume", "recover", "replay", "status", "timeline"):
        assert f"    {command} " in out
    ip.run_line_magic("loom", "")
    assert "usage: %loom" in capsys.readouterr().out
    for command, expected in [
        ("open", "PATH"),
        ("runs", "--status"),
        ("pending", "usage: %loom pending"),
        ("show", "ID"),
        ("resume", "--reason REASON"),
        ("recover", "usage"),
        ("replay", "ID"),
        ("status", "usage"),
        ("timeline", "ID"),
    ]:
        ip.run_line_magic("loom", f"{command} --help")
        out = capsys.readouterr().out
        assert f"usage: %loom {command}" in out and expected in out, (command, out)
    ip.run_cell_magic("loom_sql", "--help", "SELECT 1")
    assert "usage: %%loom_sql" in capsys.readouterr().out


def test_recover_finishes_what_a_crash_left_running(
    ip: Any, displayed: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rt = loom.default_runtime()
    for eid, flow in (("crashed-2", "agent:rec"), ("crashed-3", "agent:ghost")):
        started = {"flow": flow, "input": "Remove the stale files", "principal": {}}
        rt.journal.append([Event(eid, 1, "execution_started", None, 1.0, started)])
    capsys.readouterr()
    err = one_line_error(ip, capsys, "%loom recover")
    assert "cannot recover execution 'crashed-2' (and 1 more)" in err and "no flow named 'agent:rec'" in err
    t = TidyAgent("rec")
    define(ip, "agent", t.agent)  # the notebook re-ran the cell defining one of the agents
    ip.run_line_magic("loom", "recover")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("loom_nb: cannot recover execution crashed-3 yet: no flow named 'agent:ghost'")
    assert out[1] == "loom_nb: recovering 1 execution(s): crashed-2"
    (view,) = displayed
    assert list(view.not_recovered) == ["crashed-3"]
    assert view.not_recovered["crashed-3"].startswith("FlowNotFoundError: no flow named 'agent:ghost'")
    assert view.text().startswith("loom run crashed-2 (agent:rec): suspended, turn 2/20"), view.text()
    (card_view,) = view.views
    assert card_view.run.status == "suspended" and GATE in card_view.cards
    card_view.cards[GATE].approve.click()
    assert card_view.run.status == "completed" and t.deleted == ["/tmp/x/stale.log"]
    err = one_line_error(ip, capsys, "%loom recover")  # only the execution nobody can run is left
    assert "cannot recover execution 'crashed-3'" in err and "(and" not in err
    rt.journal.append([Event("crashed-3", 2, "execution_failed", None, 2.0, {"error": {"type": "x", "message": ""}})])
    ip.run_line_magic("loom", "recover")
    assert "nothing to recover" in capsys.readouterr().out


def test_replay(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, run = suspended_run(ip)
    ip.run_line_magic("loom", f"resume {run.id} 0 --approve")
    capsys.readouterr()
    ip.run_line_magic("loom", f"replay {run.id}")
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"loom_nb: replay of {run.id}: reproduced (") and "recorded completed" in out


def test_check_lists_a_parked_run_an_unpatched_prompt_edit_would_break(ip: Any) -> None:
    t, run = suspended_run(ip, "checked")
    report = ip.run_line_magic("loom", "check")
    assert report.ok and run.id in str(report)
    t.agent.patch("fast", system="You tidy, fast.")  # a patch: the parked run keeps its prompt
    assert ip.run_line_magic("loom", f"check {run.id}").ok
    edited = TidyAgent("checked")  # the cell edited without a patch (the same name replaces the agent)
    edited.agent.config = dataclasses.replace(edited.agent.config, system="Something else.")
    edited.agent.register(loom.default_runtime())
    report = ip.run_line_magic("loom", f"check {run.id}")
    (c,) = report.diverging
    assert c.execution_id == run.id and c.step == "#turn:0" and "system prompt changed" in str(report)


def test_pending_with_the_agent_undefined_shows_which_flow_is_missing(
    ip: Any, displayed: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    t, run = suspended_run(ip, "lost")
    # as after a kernel restart: no cell has defined the agent, so its flow is unknown
    del FLOWS._flows["agent:lost"]
    ip.user_ns.pop("agent_lost")
    loom.default_runtime().agents.pop("agent:lost", None)
    loom.default_runtime().runs.pop(run.id)
    ip.run_line_magic("loom", "pending")
    (view,) = displayed
    card = view.cards[GATE]
    assert card.problem is not None and "no flow named 'agent:lost' is registered" in card.problem
    assert "no flow named 'agent:lost'" in card.text()
    assert "enables itself once the cell that defines the agent has run" in card.problem_box.value
    assert card.approve.disabled and card.refuse.disabled  # nothing a click could do yet
    assert view.progress.layout.display == "none" and view.turn_label.value == "turn 2"  # no "100 %"
    card.approve.click()  # a click that gets through anyway: no crash, the card says what is missing
    assert card.decision is None and view.run.status == "suspended"
    err = one_line_error(ip, capsys, f"%loom resume {run.id} 0 --approve")
    assert "no flow named 'agent:lost'" in err
    define(ip, "agent", t.agent)  # re-run the cell that defines the agent ...
    ip.events.trigger("post_run_cell", None)  # ... after which the card looks again and enables itself
    assert card.problem is None and card.problem_box.value == "" and not card.approve.disabled
    card.approve.click()
    assert view.run.status == "completed" and t.deleted == ["/tmp/x/stale.log"]
    assert card.problem is None and card.decision is not None


def test_pending_finds_an_agent_that_no_variable_holds(
    ip: Any, displayed: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    t, run = suspended_run(ip, "held")
    agent = t.agent
    del FLOWS._flows["agent:held"]  # the flow is gone (as after a restart) ...
    ip.user_ns.pop("agent_held")  # ... and no notebook variable holds the agent; it lives elsewhere
    loom.default_runtime().runs.pop(run.id)
    ip.run_line_magic("loom", "pending")
    (view,) = displayed
    card = view.cards[GATE]
    assert card.problem is None
    card.approve.click()
    assert view.run.status == "completed" and t.deleted == ["/tmp/x/stale.log"]
    assert agent is t.agent


def test_load_ext_after_a_restart_opens_the_journal_this_notebook_used(
    shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LOOM_JOURNAL", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "work.ipynb"))  # what Jupyter's server sets
    suffix = "(%loom status, %loom runs, %loom pending)"
    shell.run_line_magic("load_ext", "loom_nb")
    try:
        assert capsys.readouterr().out.strip() == f"loom_nb: journal loom.duckdb is open: a new journal {suffix}"
        shell.run_line_magic("loom", "open mine.duckdb")
        assert capsys.readouterr().out.strip() == f"loom_nb: journal mine.duckdb is open: a new journal {suffix}"
        TidyAgent().agent.start(TASK, execution_id="kept-1", view=False)
    finally:
        shell.run_line_magic("unload_ext", "loom_nb")
    record = json.loads((tmp_path / ".loom-journals.json").read_text())
    assert record == {"journals": {"work.ipynb": "mine.duckdb"}}
    capsys.readouterr()
    shell.run_line_magic("load_ext", "loom_nb")  # the kernel restarted
    try:
        lines = capsys.readouterr().out.strip().splitlines()
        assert lines[0] == (
            f"loom_nb: journal {tmp_path / 'mine.duckdb'} is open: 1 execution(s), "
            f"the one this notebook used before (.loom-journals.json) {suffix}"
        )
        assert lines[1] == "loom_nb: 1 gate(s) open in 1 execution(s): run %loom pending to show them"
    finally:
        shell.run_line_magic("unload_ext", "loom_nb")


def test_cancel_stops_a_suspended_run_and_says_so(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, run = suspended_run(ip)
    capsys.readouterr()
    assert ip.run_line_magic("loom", f"cancel {run.id} --reason 'no longer needed'") is run
    out = capsys.readouterr().out.splitlines()
    assert f"loom_nb: execution {run.id} cancelled (it was suspended)" in out
    assert f"loom run {run.id} (agent:tidy): cancelled, turn 2/20" in out  # the view's display, updated
    assert run.status == "cancelled" and run.gates == []
    assert rt_events(run)[-1].data == {"reason": "no longer needed"}
    ip.run_line_magic("loom", f"cancel {run.id}")
    assert capsys.readouterr().out.strip() == f"loom_nb: execution {run.id} was already cancelled"
    df = ip.run_line_magic("loom", "runs --status cancelled")
    assert df.execution_id.tolist() == [run.id]
    err = one_line_error(ip, capsys, f"%loom resume {run.id} 0 --approve")
    assert "has no open gate '0' (open gates: none: the run is cancelled)" in err


def rt_events(run: loom.Run) -> list[Event]:
    return run.runtime.journal.read(run.id)


def test_load_ext_opens_a_postgresql_journal(
    shell: Any, _postgres_server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests import stores

    url = stores.new_schema("notebook")
    monkeypatch.setenv("LOOM_JOURNAL", url)
    capsys.readouterr()
    shell.run_line_magic("load_ext", "loom_nb")
    try:
        out = capsys.readouterr().out
        assert f"loom_nb: journal {url} is open: 0 execution(s), from $LOOM_JOURNAL" in out, out
        rt = loom.default_runtime()
        assert type(rt.journal).__name__ == "PostgresJournal"
        assert list(loom.frames().steps().columns)  # the frames read it (as Arrow, into DuckDB)
        shell.run_cell("%%loom_sql -o n\nSELECT count(*) AS n FROM events")
        assert int(shell.user_ns["n"]["n"][0]) == 0
    finally:
        shell.run_line_magic("unload_ext", "loom_nb")
        stores.drop_schemas()
