"""``%load_ext loom_nb``: open the kernel's journal, register the magics, show every run live.

The journal is ``$LOOM_JOURNAL`` or ``./loom.duckdb`` (``%loom open PATH`` switches). Loading
prints one line naming the journal, then what a crash left behind: executions left running (``%loom
recover``) and open gates (``%loom pending``). A journal held by another process is reported in
one line, not a traceback; the magics stay available to open another file.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from loom_nb.agent.agent import RUN_HOOKS, Run
from loom_nb.agent.batch import BATCH_HOOKS
from loom_nb.errors import LoomError
from loom_nb.journal import step_ids
from loom_nb.runtime import Runtime, default_runtime, set_default_runtime

log = logging.getLogger("loom_nb")

DEFAULT_JOURNAL = "loom.duckdb"
ENV_VAR = "LOOM_JOURNAL"

#: The runtime this extension opened (and will close), if any. Global because IPython loads and
#: unloads an extension through module functions: the module is the extension's one owner.
_opened: Runtime | None = None


def journal_path() -> str:
    """The journal ``%load_ext loom_nb`` opens: ``$LOOM_JOURNAL`` or ``loom.duckdb``."""
    return os.environ.get(ENV_VAR) or DEFAULT_JOURNAL


def current_runtime() -> Runtime | None:
    """The default runtime if one is open, else None."""
    try:
        return default_runtime()
    except LoomError:
        return None


def crash_report(runtime: Runtime) -> list[str]:
    """Lines about what a crash left: executions left running and gates left open."""
    lines: list[str] = []
    running = [eid for eid in runtime.executions("running") if not runtime.is_active(eid)]
    if running:
        shown = ", ".join(running[:5]) + (", ..." if len(running) > 5 else "")
        lines.append(
            f"loom_nb: {len(running)} execution(s) left running by a crash or restart ({shown}): "
            "run %loom recover to finish them"
        )
        batches = sorted({name for eid in running if (name := step_ids.batch_agent_name(eid)) is not None})
        if batches:
            lines.append(
                f"loom_nb: some belong to batches of {', '.join(batches)} (agent.map): running their map "
                "cell again finishes them too, at the batch's concurrency"
            )
    gates = runtime.open_gates()
    if gates:
        executions = {g.execution_id for g in gates}
        lines.append(
            f"loom_nb: {len(gates)} gate(s) open in {len(executions)} execution(s): run %loom pending to show them"
        )
    return lines


def _same_file(a: str, b: str) -> bool:
    return a != ":memory:" and os.path.realpath(a) == os.path.realpath(b)


def open_journal(path: str, *, quiet: bool = False) -> Runtime:
    """Open ``path`` as the kernel's default runtime (closing the one this extension opened).

    Prints one line naming the journal, then the crash report.

    Raises:
        JournalLockedError: another process holds the file.
        UsageError: runs of the current runtime are still running in this kernel.
    """
    global _opened
    old = _opened
    if old is not None and not old.closed:
        active = [eid for eid in old.executions("running") if old.is_active(eid)]
        if active:
            from loom_nb.errors import UsageError

            raise UsageError(
                f"runs are still running on {old.journal.location} ({', '.join(active)}): "
                "await them (await run) before opening another journal"
            )
    if old is not None and not old.closed and _same_file(old.journal.location, path):
        old.close()  # one read-write journal per file in a process: reopening it replaces it
    runtime = Runtime.open(path)
    if old is not None:
        old.close()
    _opened = runtime
    set_default_runtime(runtime)
    if not quiet:
        print(f"loom_nb: journal {path} is open (%loom status, %loom runs, %loom pending)")
        for line in crash_report(runtime):
            print(line)
    return runtime


def show_run(run: Run) -> None:
    """The ``RUN_HOOKS`` entry: remember ``run`` and display its live view in the current cell."""
    try:
        from loom_nb.notebook.run_view import RunView
        from loom_nb.notebook.runs import display, remember

        remember(run)
        display(RunView(run))
    except Exception:  # a view must never stop a run
        log.exception("loom_nb could not display the live view of run %s", run.id)


def load_ipython_extension(ipython: Any) -> None:
    """Open the default runtime, register ``%loom`` / ``%%loom_sql``, and show runs live."""
    from loom_nb.notebook.magics import LoomMagics

    ipython.register_magics(LoomMagics(ipython))
    if show_run not in RUN_HOOKS:
        RUN_HOOKS.append(show_run)
    from loom_nb.notebook.batch_view import show_batch

    if show_batch not in BATCH_HOOKS:
        BATCH_HOOKS.append(show_batch)
    existing = current_runtime()
    if existing is not None and existing is not _opened:
        print(f"loom_nb: using the default runtime already set, journal {existing.journal.location}")
        for line in crash_report(existing):
            print(line)
        return
    path = journal_path()
    try:
        open_journal(path)
    except LoomError as exc:
        print(f"loom_nb: {exc} (%loom open PATH opens another file)", file=sys.stderr)


def unload_ipython_extension(ipython: Any) -> None:
    """Stop showing runs and close the runtime this extension opened."""
    global _opened
    while show_run in RUN_HOOKS:
        RUN_HOOKS.remove(show_run)
    from loom_nb.notebook.batch_view import show_batch

    while show_batch in BATCH_HOOKS:
        BATCH_HOOKS.remove(show_batch)
    runtime, _opened = _opened, None
    if runtime is not None:
        if current_runtime() is runtime:
            set_default_runtime(None)
        runtime.close()
