"""``%load_ext loom_nb``: open the kernel's journal, register the magics, show every run live.

The journal is ``$LOOM_JOURNAL``, else the one this notebook used before, else ``./loom.duckdb``
(``%loom open PATH`` switches). The journal a notebook opens is remembered beside it, in
``.loom-journals.json`` (notebook file name -> journal path), so ``%load_ext`` after a kernel restart
opens the same file even when it was chosen with ``%loom open`` or ``$LOOM_JOURNAL`` (the notebook is
known from ``$JPY_SESSION_NAME``, which Jupyter's server sets for a notebook's kernel; without it
nothing is read or written). Loading prints one line naming the journal, whether it is new and where
the choice came from, then what a crash left behind: executions left running (``%loom recover``) and
open gates (``%loom pending``). A journal held by another process is reported in one line, not a
traceback; the magics stay available to open another file.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from loom_nb.agent.agent import RUN_HOOKS
from loom_nb.agent.batch import BATCH_HOOKS
from loom_nb.agent.run import Run
from loom_nb.errors import LoomError
from loom_nb.journal import step_ids
from loom_nb.journal.postgres_store import is_postgres_url, redacted_url
from loom_nb.runtime import Runtime, default_runtime, note_open_failure, set_default_runtime

log = logging.getLogger("loom_nb")

DEFAULT_JOURNAL = "loom.duckdb"
ENV_VAR = "LOOM_JOURNAL"
#: The record of the journal each notebook of a folder used, kept in that folder.
RECORD_FILE = ".loom-journals.json"
#: The variable Jupyter's server sets to the path of the notebook a kernel runs for.
SESSION_VAR = "JPY_SESSION_NAME"

#: The runtime this extension opened (and will close), if any. Global because IPython loads and
#: unloads an extension through module functions: the module is the extension's one owner.
_opened: Runtime | None = None
_created: str | None = None  # the file ``_opened`` created when it opened (``drop_if_unused``)


def notebook() -> Path | None:
    """The notebook this kernel runs for (``$JPY_SESSION_NAME``; relative to the working directory,
    which is the notebook's folder in Jupyter), or None when not known (a console, nbclient)."""
    name = os.environ.get(SESSION_VAR)
    if not name or not name.endswith(".ipynb"):
        return None
    path = Path(name)
    return path if path.is_absolute() else Path.cwd() / path.name


def _read_record(record: Path) -> dict[str, str]:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    journals = data.get("journals") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in journals.items()} if isinstance(journals, dict) else {}


def remembered_journal() -> str | None:
    """The journal this notebook opened last (from ``.loom-journals.json`` beside it), if any."""
    nb = notebook()
    if nb is None:
        return None
    path = _read_record(nb.parent / RECORD_FILE).get(nb.name)
    if path is None:
        return None
    return path if os.path.isabs(path) or is_postgres_url(path) else str(nb.parent / path)


def remember_journal(path: str) -> None:
    """Record ``path`` as this notebook's journal in ``.loom-journals.json`` beside it (relative to
    the notebook's folder when inside it). Nothing happens when the notebook is not known."""
    nb = notebook()
    if nb is None or path == ":memory:":
        return
    record = nb.parent / RECORD_FILE
    journals = _read_record(record)
    if is_postgres_url(path):
        journals[nb.name] = redacted_url(path)  # never a password in a file beside the notebook
    else:
        target = os.path.abspath(path)
        relative = os.path.relpath(target, nb.parent)
        journals[nb.name] = target if relative.startswith("..") else relative
    try:
        record.write_text(json.dumps({"journals": journals}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:  # a read-only folder: the journal still opens, it is just not remembered
        log.warning("loom_nb: could not record the journal in %s: %s", record, exc)


def journal_choice() -> tuple[str, str]:
    """The journal ``%load_ext loom_nb`` opens and why: ``$LOOM_JOURNAL``, else the journal this
    notebook used before (``.loom-journals.json``), else ``loom.duckdb``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return env, f"from ${ENV_VAR}"
    remembered = remembered_journal()
    if remembered is not None:
        return remembered, f"the one this notebook used before ({RECORD_FILE})"
    return DEFAULT_JOURNAL, "the default"


def journal_path() -> str:
    """The journal ``%load_ext loom_nb`` opens (``journal_choice``)."""
    return journal_choice()[0]


def current_runtime() -> Runtime | None:
    """The default runtime if one is open, else None."""
    try:
        return default_runtime()
    except LoomError:
        return None


def left_running(runtime: Runtime) -> list[str]:
    """Executions a crash or restart left ``running``: not driven in this kernel, and, on a shared
    journal, without a live lease (a worker or another notebook that drives one holds its lease)."""
    journal: Any = runtime.journal
    held = getattr(journal, "lease_owner", None)
    return [
        eid
        for eid in runtime.executions("running")
        if not runtime.is_active(eid) and (held is None or held(eid) is None)
    ]


def crash_report(runtime: Runtime) -> list[str]:
    """Lines about what a crash left: executions left running and gates left open."""
    lines: list[str] = []
    running = left_running(runtime)
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


def open_journal(path: str, *, quiet: bool = False, why: str = "") -> Runtime:
    """Open ``path`` as the kernel's default runtime (closing the one this extension opened), and
    remember it as this notebook's journal.

    Prints one line naming the journal, whether it is new (and ``why`` it was chosen), then the crash
    report.

    Raises:
        JournalLockedError: another process holds the file.
        UsageError: runs of the current runtime are still running in this kernel.
    """
    global _opened, _created
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
    new = path == ":memory:" or (not is_postgres_url(path) and not os.path.exists(path))
    runtime = Runtime.open(path)
    if old is not None:
        unused = _created if _created is not None and not _same_file(_created, path) else None
        if unused is not None and (old.closed or old.journal.list_executions()):
            unused = None  # something may be recorded there (or it cannot be asked): it stays
        old.close()
        if unused is not None:
            drop_if_unused(unused)
    _created = os.path.abspath(path) if new and path != ":memory:" and not is_postgres_url(path) else None
    _opened = runtime
    set_default_runtime(runtime)
    remember_journal(path)
    if not quiet:
        count = len(runtime.journal.list_executions())
        what = "a new journal" if new else f"{count} execution(s)"
        what += f", {why}" if why else ""
        shown = runtime.journal.location if is_postgres_url(path) else path  # a URL without its password
        print(f"loom_nb: journal {shown} is open: {what} (%loom status, %loom runs, %loom pending)")
        for line in crash_report(runtime):
            print(line)
    return runtime


def drop_if_unused(path: str) -> None:
    """Remove the journal file ``path`` (and its write-ahead log) that this extension created a
    moment ago and nothing was recorded in, now that another journal replaced it: ``%load_ext``
    followed by ``%loom open OTHER`` leaves no stray ``loom.duckdb`` behind."""
    for name in (path, f"{path}.wal"):
        try:
            os.remove(name)
        except OSError:  # gone already, or not ours to remove: leave it
            continue


def show_run(run: Run) -> None:
    """The ``RUN_HOOKS`` entry: remember ``run`` and display its live view in the current cell."""
    try:
        from loom_nb.notebook.run_view import RunView
        from loom_nb.notebook.runs import display, remember

        remember(run)
        display(RunView(run))
    except Exception:  # a view must never stop a run
        log.exception("loom_nb could not display the live view of run %s", run.id)


def start(ipython: Any) -> None:
    """Open the default runtime and show runs live (``%load_ext loom_nb`` runs it after registering
    the magics, ``loom_nb.notebook.magics.load_ipython_extension``: the magics sit on top of this module)."""
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
    path, why = journal_choice()
    try:
        open_journal(path, why="" if why == "the default" else why)
    except LoomError as exc:
        note_open_failure(str(exc))
        print(f"loom_nb: {exc} (%loom open PATH opens another file)", file=sys.stderr)


def stop(ipython: Any) -> None:
    """Stop showing runs and close the runtime this extension opened (``%unload_ext loom_nb``)."""
    global _opened
    while show_run in RUN_HOOKS:
        RUN_HOOKS.remove(show_run)
    from loom_nb.notebook.batch_view import show_batch

    while show_batch in BATCH_HOOKS:
        BATCH_HOOKS.remove(show_batch)
    note_open_failure(None)
    runtime, _opened = _opened, None
    if runtime is not None:
        if current_runtime() is runtime:
            set_default_runtime(None)
        runtime.close()
