"""The ``%loom`` line magic and the ``%%loom_sql`` cell magic.

``%loom open PATH | runs | pending | show ID | resume ID GATE --approve/--refuse [--reason R]
[--arguments JSON] | cancel ID [--reason R] | recover | replay ID | check [ID...] | status | timeline ID |
trace on|off | snapshot PATH``; ``%loom --help`` and ``%loom SUBCOMMAND --help`` explain each.
``%%loom_sql`` runs its cell as SQL over the journal's views and returns a DataFrame. Mistakes (an
unknown execution or gate, a journal held by another process) are one-line errors.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from IPython.core.error import UsageError as IPythonUsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from loom_nb.agent.config import APPROVAL_GATE
from loom_nb.agent.run import Run
from loom_nb.errors import FlowNotFoundError, LoomError
from loom_nb.journal import step_ids
from loom_nb.kernel.async_bridge import run_blocking, run_or_schedule
from loom_nb.kernel.check import CheckReport
from loom_nb.kernel.context import IN_DOUBT_GATE
from loom_nb.notebook import extension
from loom_nb.notebook.runs import display, ensure_registered, find_agent, flow_of, run_for
from loom_nb.runtime import Runtime

if TYPE_CHECKING:
    from loom_nb.tracing import TraceExport

T = TypeVar("T")


def _edited_arguments(text: str | None) -> dict[str, Any] | None:
    """``--arguments``: a JSON object, or None when not given."""
    if text is None:
        return None
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise IPythonUsageError(f"--arguments is not valid JSON ({exc}): give a JSON object") from None
    if not isinstance(value, dict):
        raise IPythonUsageError("--arguments must be a JSON object of the tool's arguments")
    return value


class _HelpShown(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise IPythonUsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            print(message, file=sys.stderr)
        raise _HelpShown


def _loom_parser() -> _Parser:
    p = _Parser(prog="%loom", description="Look at and drive the durable runs in this kernel's journal.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    o = sub.add_parser("open", help="open PATH as this kernel's journal (a DuckDB file)")
    o.add_argument("path", metavar="PATH", help="the DuckDB file (created if missing)")
    r = sub.add_parser("runs", help="list the executions in the journal (a DataFrame)")
    r.add_argument(
        "--status", choices=["running", "suspended", "completed", "failed", "cancelled"], help="only this status"
    )
    r.add_argument("--last", type=int, metavar="N", help="only the N most recent")
    sub.add_parser("pending", help="show a card for every open gate (after a restart too)")
    s = sub.add_parser("show", help="show the live view of an execution")
    s.add_argument("id", metavar="ID", help="the execution id")
    rs = sub.add_parser("resume", help="resolve an open gate; the run goes on")
    rs.add_argument("id", metavar="ID", help="the execution id")
    rs.add_argument(
        "gate",
        metavar="GATE",
        help=f"the gate id (e.g. {step_ids.approval_gate_id(1, 0)!r}), or its position (0, 1...)",
    )
    act = rs.add_mutually_exclusive_group(required=True)
    act.add_argument("--approve", action="store_true", help="approve a tool call")
    act.add_argument("--refuse", action="store_true", help="refuse a tool call (the model is told)")
    act.add_argument("--happened", metavar="OUTPUT", help="in doubt: it happened, with this output (JSON or text)")
    act.add_argument("--run-again", action="store_true", help="in doubt: run the step again")
    act.add_argument("--fail", action="store_true", help="in doubt: record the step as failed")
    rs.add_argument("--reason", help="why (the model sees it on refusal)")
    rs.add_argument(
        "--arguments",
        metavar="JSON",
        help="with --approve: run these edited arguments (a JSON object; the model is told)",
    )
    c = sub.add_parser("cancel", help="stop a run for good (recorded as cancelled)")
    c.add_argument("id", metavar="ID", help="the execution id")
    c.add_argument("--reason", help="why (recorded with the cancel)")
    sub.add_parser("recover", help="finish the executions a crash or restart left running")
    rp = sub.add_parser("replay", help="re-run an execution from its log only and say if it reproduces")
    rp.add_argument("id", metavar="ID", help="the execution id")
    ck = sub.add_parser(
        "check", help="replay every running or suspended run against the code now loaded: which would diverge, where"
    )
    ck.add_argument("ids", metavar="ID", nargs="*", help="only these executions")
    sub.add_parser("status", help="which journal is open, and what it holds")
    t = sub.add_parser("timeline", help="show the live step timeline of an execution")
    t.add_argument("id", metavar="ID", help="the execution id")
    tr = sub.add_parser("trace", help="export each run as an OpenTelemetry trace when it settles (on / off)")
    tr.add_argument("state", choices=["on", "off"], help="start or stop exporting")
    tr.add_argument("--suspended", action="store_true", help="also export a run each time it waits at a gate")
    sn = sub.add_parser("snapshot", help="write a consistent single-file copy of the journal, while runs go on")
    sn.add_argument("path", metavar="PATH", help="the copy to write (a new file)")
    sn.add_argument("--overwrite", action="store_true", help="replace PATH if it exists")
    return p


def _sql_parser() -> _Parser:
    p = _Parser(
        prog="%%loom_sql",
        description="Run the cell as SQL over the journal's views (events, executions, steps, tool_calls, "
        "gates, decisions, usage, streams) and return a DataFrame.",
    )
    p.add_argument("-o", "--output", metavar="NAME", help="also store the DataFrame in the variable NAME")
    return p


def _guard(fn: Callable[..., T], *args: Any) -> T | None:
    """Call ``fn``: loom errors become IPython's one-line UsageError, and --help returns quietly."""
    try:
        return fn(*args)
    except _HelpShown:
        return None
    except LoomError as exc:
        raise IPythonUsageError(str(exc)) from None


@magics_class
class LoomMagics(Magics):
    """``%loom`` (subcommands: open, runs, pending, show, resume, cancel, recover, replay, check, status,
    timeline, trace, snapshot) and ``%%loom_sql``. Run ``%loom --help`` for the list."""

    #: The live OpenTelemetry export ``%loom trace on`` started, until ``%loom trace off``.
    _trace: TraceExport | None = None

    @line_magic("loom")  # type: ignore[arg-type]
    def loom(self, line: str) -> Any:
        """Look at and drive durable runs: ``%loom open PATH | runs | pending | show ID |
        resume ID GATE --approve/--refuse [--reason R] | cancel ID | recover | replay ID | check [ID...] |
        status | timeline ID | trace on|off | snapshot PATH``.

        ``%loom --help`` lists them; ``%loom COMMAND --help`` explains one.
        """
        return _guard(self._loom, line)

    def _loom(self, line: str) -> Any:
        parser = _loom_parser()
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise IPythonUsageError(f"%loom: {exc}") from None
        args = parser.parse_args(words)
        if args.command is None:
            parser.print_help()
            return None
        handler: Callable[[argparse.Namespace], Any] = getattr(self, f"_cmd_{args.command}")
        return handler(args)

    @cell_magic("loom_sql")  # type: ignore[arg-type]
    def loom_sql(self, line: str, cell: str) -> Any:
        """Run the cell as SQL over the journal's views and return a DataFrame
        (``%%loom_sql -o df`` also stores it in ``df``)."""
        return _guard(self._loom_sql, line, cell)

    def _loom_sql(self, line: str, cell: str) -> Any:
        args = _sql_parser().parse_args(shlex.split(line))
        from loom_nb.analysis import frames

        df = frames(self._runtime()).sql(cell)
        if args.output and self.shell is not None:
            self.shell.user_ns[args.output] = df
        return df

    # -- helpers --------------------------------------------------------------------------------
    def _runtime(self) -> Runtime:
        runtime = extension.current_runtime()
        if runtime is None:
            from loom_nb.runtime import open_failure

            failure = open_failure()
            if failure is not None:
                raise IPythonUsageError(
                    f"no journal is open: {failure} (what to do is in the output of %load_ext loom_nb; "
                    "%loom open PATH opens another file)"
                )
            raise IPythonUsageError("no journal is open: run %load_ext loom_nb or %loom open PATH")
        return runtime

    # -- subcommands ----------------------------------------------------------------------------
    def _cmd_open(self, args: argparse.Namespace) -> None:
        extension.open_journal(args.path)

    def _cmd_runs(self, args: argparse.Namespace) -> Any:
        import pandas as pd

        records = self._runtime().journal.list_executions(args.status)
        if args.last:
            records = records[-args.last :]
        df = pd.DataFrame(
            [(r.execution_id, r.flow, r.status, r.created_at, r.updated_at) for r in records],
            columns=["execution_id", "flow", "status", "created_at", "updated_at"],
        )
        for col in ("created_at", "updated_at"):
            df[col] = pd.to_datetime(df[col], unit="s")
        return df

    def _cmd_pending(self, args: argparse.Namespace) -> None:
        from loom_nb.notebook.run_view import RunView

        runtime = self._runtime()
        gates = runtime.open_gates()
        left = extension.left_running(runtime)
        if left:
            shown = ", ".join(left)
            print(f"loom_nb: {len(left)} execution(s) left running ({shown}): %loom recover finishes them")
        if not gates:
            print(f"loom_nb: no open gates in {runtime.journal.location}")
            return
        executions = list(dict.fromkeys(g.execution_id for g in gates))
        print(
            f"loom_nb: {len(gates)} gate(s) open when this cell ran, in {len(executions)} execution(s); "
            "the views below stay live"
        )
        for eid in executions:
            display(RunView(run_for(runtime, eid)))

    def _cmd_show(self, args: argparse.Namespace) -> Any:
        from loom_nb.notebook.run_view import RunView

        return RunView(run_for(self._runtime(), args.id))

    def _cmd_timeline(self, args: argparse.Namespace) -> Any:
        from loom_nb.notebook.timeline import timeline

        runtime = self._runtime()
        flow_of(runtime, args.id)
        return timeline(args.id, runtime=runtime)

    def _cmd_resume(self, args: argparse.Namespace) -> Run:
        runtime = self._runtime()
        run = run_for(runtime, args.id)
        status = run.status
        if status == "running":
            raise IPythonUsageError(f"run {run.id} is running; resume it once it waits at a gate")
        gates = run.gates
        gate = next((g for g in gates if g.gate_id == args.gate), None)
        if gate is None and args.gate.isdigit() and int(args.gate) < len(gates):
            gate = gates[int(args.gate)]
        if gate is None:
            known = ", ".join(g.gate_id for g in gates) or f"none: the run is {status}"
            raise IPythonUsageError(f"execution {run.id!r} has no open gate {args.gate!r} (open gates: {known})")
        problem = ensure_registered(run)
        if problem is not None:
            raise IPythonUsageError(problem)
        if args.approve or args.refuse:
            if gate.kind != APPROVAL_GATE:
                raise IPythonUsageError(
                    f"gate {gate.gate_id!r} is a {gate.kind} gate: --approve/--refuse answer tool approvals"
                )
            if args.arguments is not None and not args.approve:
                raise IPythonUsageError("--arguments goes with --approve (edited arguments to run)")
            if args.approve:
                gate.approve(args.reason, arguments=_edited_arguments(args.arguments))
            else:
                gate.refuse(args.reason)
            done = "approved" if args.approve else "refused"
            if args.arguments is not None:
                done += " with edited arguments"
        else:
            if gate.kind != IN_DOUBT_GATE:
                raise IPythonUsageError(
                    f"gate {gate.gate_id!r} is a {gate.kind} gate: --happened/--run-again/--fail answer in-doubt steps"
                )
            if args.happened is not None:
                from loom_nb.notebook.formatting import parse_json_or_text

                gate.happened(parse_json_or_text(args.happened))
                done = "marked as happened"
            elif args.run_again:
                gate.run_again()
                done = "set to run again"
            else:
                gate.fail(args.reason)
                done = "marked as failed"
        print(f"loom_nb: gate {gate.gate_id} of execution {run.id} {done}; the run goes on (now {run.status})")
        return run

    def _cmd_cancel(self, args: argparse.Namespace) -> Run:
        run = run_for(self._runtime(), args.id)
        status = run.status
        if status == "cancelled":
            print(f"loom_nb: execution {run.id} was already cancelled")
            return run
        outcome = run.cancel(args.reason)
        if isinstance(outcome, asyncio.Future):
            print(f"loom_nb: cancelling execution {run.id} (it was {status}); its view shows when it stops")
        else:
            print(f"loom_nb: execution {run.id} cancelled (it was {status})")
        return run

    def _cmd_recover(self, args: argparse.Namespace) -> None:
        from loom_nb.notebook.run_view import RecoveryView

        runtime = self._runtime()
        left = extension.left_running(runtime)
        if not left:
            print(f"loom_nb: nothing to recover in {runtime.journal.location}")
            return
        missing: dict[str, str] = {}
        for eid in left:
            flow = flow_of(runtime, eid)
            agent = find_agent(runtime, flow)
            if agent is not None:
                agent.register(runtime)
                continue
            try:
                runtime.flows.get(flow)
            except FlowNotFoundError as exc:
                missing[eid] = str(exc)
        if len(missing) == len(left):
            eid, problem = next(iter(missing.items()))
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise IPythonUsageError(f"cannot recover execution {eid!r}{more}: {problem}")
        for eid, problem in missing.items():
            print(f"loom_nb: cannot recover execution {eid} yet: {problem}")
        print(
            f"loom_nb: recovering {len(left) - len(missing)} execution(s): "
            f"{', '.join(e for e in left if e not in missing)}"
        )
        view = RecoveryView(runtime, left)
        outcome = run_or_schedule(runtime.recover())
        if isinstance(outcome, asyncio.Future):
            display(view)
            view.task = outcome
            view.task.add_done_callback(view.finished)
        else:
            view.done(outcome)
            display(view)

    def _cmd_replay(self, args: argparse.Namespace) -> None:
        runtime = self._runtime()
        flow = flow_of(runtime, args.id)
        agent = find_agent(runtime, flow)
        if agent is not None:
            agent.register(runtime)
        report = run_blocking(runtime.replay(args.id))
        if report.reproduced:
            children = f", {len(report.children)} child execution(s) replayed too" if report.children else ""
            print(
                f"loom_nb: replay of {args.id}: reproduced ({report.served} recorded outcome(s) served, "
                f"recorded {report.recorded_status}, replayed {report.replayed_status}{children})"
            )
        else:
            print(f"loom_nb: replay of {args.id}: DIVERGED ({report.replayed_status}): {report.message}")

    def _cmd_check(self, args: argparse.Namespace) -> CheckReport:
        runtime = self._runtime()
        # Shown through its _repr_pretty_; ``report = %loom check`` keeps it.
        return run_blocking(runtime.check(args.ids or None))

    def _cmd_status(self, args: argparse.Namespace) -> None:
        runtime = self._runtime()
        records = runtime.journal.list_executions()
        counts: dict[str, int] = {}
        for r in records:
            counts[r.status] = counts.get(r.status, 0) + 1
        by_status = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"
        active = [r.execution_id for r in records if runtime.is_active(r.execution_id)]
        gates = runtime.open_gates()
        print(
            f"loom_nb: journal {runtime.journal.location}: {len(records)} execution(s) ({by_status}); "
            f"{len(gates)} open gate(s); {len(active)} running in this kernel"
        )
        for line in extension.crash_report(runtime):
            if "left running" in line:
                print(line)

    def _cmd_trace(self, args: argparse.Namespace) -> None:
        import loom_nb.tracing as tracing

        if self._trace is not None:
            self._trace.stop()
            self._trace = None
        if args.state == "off":
            print("loom_nb: OpenTelemetry export off")
            return
        runtime = self._runtime()
        self._trace = tracing.export(runtime, on_suspend=args.suspended)
        when = "completes, fails or suspends" if args.suspended else "completes or fails"
        print(f"loom_nb: OpenTelemetry export on: each run in {runtime.journal.location} is exported when it {when}")

    def _cmd_snapshot(self, args: argparse.Namespace) -> None:
        info = self._runtime().snapshot(args.path, overwrite=args.overwrite)
        print(f"loom_nb: {info}; open it anywhere with loom.Runtime.open({str(info.path)!r})")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext loom_nb``: register ``%loom`` / ``%%loom_sql``, open the default runtime, and show
    runs live (``extension.start``)."""
    ipython.register_magics(LoomMagics(ipython))
    extension.start(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext loom_nb``: stop showing runs and close the runtime the extension opened."""
    extension.stop(ipython)
