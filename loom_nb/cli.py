"""The ``loom-nb`` command: ``loom-nb demo`` runs a scripted agent end to end in the terminal;
``loom-nb journal snapshot SRC DST`` writes a consistent single-file copy of a journal."""

from __future__ import annotations

import argparse
import os
import select
import sys
from pathlib import Path

from loom_nb.agent import Agent, AgentResult, ApprovalDecision
from loom_nb.effects import tool
from loom_nb.errors import JournalLockedError, LoomError
from loom_nb.journal import DuckDBJournal, step_ids
from loom_nb.journal.events import Event, EventKind
from loom_nb.journal.run_state import GateState, RunState, StepState
from loom_nb.kernel.engine import ExecutionResult
from loom_nb.kernel.gates import OpenGate
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime

DEMO_FLOW = step_ids.agent_flow_name("demo")
STALE = ("old-report.log", "cache.tmp")
FRESH = ("notes.md",)


def _sandbox(root: Path) -> Path:
    folder = root / "loom-demo-files"
    folder.mkdir(exist_ok=True)
    if not any(folder.iterdir()):
        for name in (*STALE, *FRESH):
            (folder / name).write_text(f"demo file {name}\n")
    return folder


def build_demo_agent(folder: Path, *, delta_delay: float = 0.02) -> Agent:
    """The demo agent: it lists a folder and asks to delete the stale files in it."""

    @tool(idempotent=True)
    def list_files(folder: str) -> list[str]:
        """List the files in a folder.

        Args:
            folder: The folder to list.
        """
        return sorted(p.name for p in Path(folder).iterdir())

    @tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete one file (asks for approval first).

        Args:
            path: The file to delete.
        """
        Path(path).unlink(missing_ok=True)
        return f"deleted {path}"

    def respond(request: ModelRequest) -> ModelResponse:
        turns = sum(1 for m in request.messages if m.role == "assistant")
        if turns == 0:
            return ModelResponse.tool_calls(
                [("list_files", {"folder": str(folder)})],
                text="I'll start by looking at what is in the folder. ",
            )
        if turns == 1:
            calls = [("delete_file", {"path": str(folder / name)}) for name in STALE]
            return ModelResponse.tool_calls(
                calls, text="Two files look stale: an old log and a temporary cache. I'll ask before deleting them. "
            )
        results = [m for m in request.messages if m.role == "tool" and m.name == "delete_file"]
        done = [m.text.removeprefix("deleted ") for m in results if not m.is_error]
        kept = len(results) - len(done)
        summary = f"I deleted {len(done)} file(s)" + (f" and kept {kept} you refused" if kept else "")
        return ModelResponse.text(summary + f". {FRESH[0]} stays: it is recent and not a cache. The folder is tidy.")

    return Agent(
        model=ScriptedModel(respond, name="demo-model", delta_delay=delta_delay),
        tools=[list_files, delete_file],
        system="You tidy folders. Delete only files that are stale, and ask first.",
        name="demo",
    )


class _Printer:
    """Shows a run in the terminal: streamed text, tool calls, gate outcomes."""

    def __init__(self) -> None:
        self.states: dict[str, RunState] = {}

    def delta(self, execution_id: str, step_id: str, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def event(self, e: Event) -> None:
        state = self.states.setdefault(e.execution_id, RunState(execution_id=e.execution_id))
        step = state.apply(e)
        if not isinstance(step, StepState):
            return
        if e.kind == EventKind.STEP_STARTED and step.kind == step_ids.TOOL_KIND:
            args = ", ".join(f"{k}={v!r}" for k, v in (step.input or {}).items())
            print(f"\n  -> {step.tool or step.effect}({args})", end="", flush=True)
        elif e.kind == EventKind.STEP_COMPLETED and step.kind == step_ids.TOOL_KIND:
            print(f"  [done: {str(step.output)[:70]}]", flush=True)
        elif e.kind == EventKind.STEP_STARTED and step_ids.is_turn_start(step.step_id):
            print(f"\n[{step.step_id.removeprefix('#')}] ", end="", flush=True)


def _ask(gate: OpenGate, assume: bool | None) -> ApprovalDecision:
    payload = gate.payload if isinstance(gate.payload, dict) else {}
    args = ", ".join(f"{k}={v!r}" for k, v in (payload.get("arguments") or {}).items())
    prompt = f"\nApprove {payload.get('tool')}({args})? [y/N] "
    if assume is not None:
        print(prompt + ("y (--yes)" if assume else "n (--no)"))
        return ApprovalDecision(approved=assume, reason=None if assume else "refused with --no")
    answer = _read_answer(prompt).strip().lower()
    if answer in ("y", "yes"):
        return ApprovalDecision(approved=True)
    return ApprovalDecision(approved=False, reason="refused at the terminal")


def _read_answer(prompt: str) -> str:
    """``input()`` that Ctrl-C always interrupts: DuckDB's threads may receive the SIGINT, which
    would leave a blocking read in the main thread waiting for Enter; polling lets Python run its
    handler within a quarter second."""
    sys.stdout.write(prompt)
    sys.stdout.flush()
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.25)
        if ready:
            line = sys.stdin.readline()
            if not line:
                raise EOFError("stdin closed at the approval prompt")
            return line


def _steps_table(runtime: Runtime, execution_id: str) -> str:
    state = RunState(execution_id=execution_id)
    rows: dict[tuple[str, str], StepState | GateState] = {}  # steps once started, gates once resolved
    for e in runtime.journal.read(execution_id):
        touched = state.apply(e)
        if isinstance(touched, StepState) and touched.attempts:
            rows.setdefault(("step", touched.step_id), touched)
        elif isinstance(touched, GateState) and touched.resolved:
            rows.setdefault(("gate", touched.gate_id), touched)
    lines = [f"{'step':<28} {'effect':<20} {'status':<10} {'attempts':>8} {'ms':>8}"]
    for (_, sid), row in rows.items():
        if isinstance(row, StepState):
            effect, status, attempts, ms = row.effect, row.status, str(row.attempts), ""
            if row.ended_at is not None and row.started_at is not None:
                ms = f"{(row.ended_at - row.started_at) * 1000:.1f}"
        else:
            approved = (row.resolution or {}).get("approved") if isinstance(row.resolution, dict) else None
            effect, status, attempts, ms = "approval", "approved" if approved else "refused", "", ""
        lines.append(f"{sid:<28} {effect:<20} {status:<10} {attempts:>8} {ms:>8}")
    return "\n".join(lines)


def _demo(journal: str, assume: bool | None) -> int:
    runtime = Runtime.open(journal)
    with runtime:
        folder = _sandbox(Path(journal).resolve().parent)
        agent = build_demo_agent(folder)
        agent.register(runtime)
        printer = _Printer()
        runtime.observe(printer.event, on_delta=printer.delta)
        unfinished = [
            r for r in runtime.journal.list_executions() if r.flow == DEMO_FLOW and r.status in ("running", "suspended")
        ]
        state: ExecutionResult
        if unfinished:
            rec = unfinished[-1]
            done = sum(1 for s in runtime.history(rec.execution_id).steps.values() if s.settled)
            print(f"Resuming run {rec.execution_id} from {journal}: {done} completed step(s) will not run again.")
            if rec.status == "running":
                results = [r for r in runtime.recover_sync() if r.execution_id == rec.execution_id]
                state = results[0] if results else runtime.result(rec.execution_id)
            else:
                state = runtime.result(rec.execution_id)
        else:
            count = sum(1 for r in runtime.journal.list_executions() if r.flow == DEMO_FLOW)
            execution_id = f"demo-{count + 1}"
            print(f"Starting run {execution_id} on {journal} (files in {folder}).")
            state = runtime.start_sync(DEMO_FLOW, "Remove the stale files in the folder.", execution_id=execution_id)
        while state.status == "suspended":
            for gate in state.gates:
                decision = _ask(gate, assume)
                state = runtime.resume_sync(state.execution_id, gate.gate_id, decision)
        print()
        if state.status == "failed":
            print(f"\nThe run failed: {state.error}")
            return 1
        result = AgentResult[str].model_validate(state.output)
        print(f"\nAnswer: {result.output}\n({result.turns} turns, stop reason: {result.stop_reason})\n")
        print(_steps_table(runtime, state.execution_id))
        print(f"\nThe journal is {journal}; run `make lab` to analyse it in JupyterLab.")
    return 0


def _snapshot(src: str, dst: str, overwrite: bool) -> int:
    """``loom-nb journal snapshot``: open SRC read-only, write DST, say what it holds."""
    prog = "loom-nb journal snapshot"
    if not Path(src).is_file():
        print(f"{prog}: there is no journal file {src}", file=sys.stderr)
        return 2
    try:
        journal = DuckDBJournal(src, read_only=True)
    except JournalLockedError as exc:
        print(
            f"{prog}: {exc}\nThe copy must be made by the process that holds it: run runtime.snapshot({dst!r}) in it "
            f"(or %loom snapshot {dst} in its notebook), then open {dst}.",
            file=sys.stderr,
        )
        return 1
    try:
        print(journal.snapshot(dst, overwrite=overwrite))
    except LoomError as exc:
        print(f"{prog}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        journal.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``loom-nb``."""
    parser = argparse.ArgumentParser(prog="loom-nb", description="Durable AI agent loops, journaled in DuckDB.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a scripted agent end to end (Ctrl-C, then run again: it resumes)")
    demo.add_argument("--journal", default=os.environ.get("LOOM_JOURNAL", "loom.duckdb"), help="journal file")
    answer = demo.add_mutually_exclusive_group()
    answer.add_argument("--yes", action="store_true", help="approve every gate (for no TTY)")
    answer.add_argument("--no", action="store_true", help="refuse every gate")
    journal = sub.add_parser("journal", help="work with a journal file").add_subparsers(dest="action", required=True)
    snap = journal.add_parser(
        "snapshot", help="write a consistent single-file copy of a journal (nobody may hold it read-write)"
    )
    snap.add_argument("src", metavar="SRC", help="the journal file")
    snap.add_argument("dst", metavar="DST", help="the copy to write (a new file)")
    snap.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    work = sub.add_parser("worker", help="run the executions submitted to a shared PostgreSQL journal")
    work.add_argument("--journal", required=True, help="postgresql://user@host:port/db")
    work.add_argument(
        "--import",
        dest="modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module defining the agents and flows to run (repeatable)",
    )
    work.add_argument("--concurrency", type=int, default=16, help="executions driven at once (16)")
    work.add_argument("--lease-seconds", type=float, default=None, help="lease without a heartbeat (30)")
    work.add_argument("--until-idle", action="store_true", help="exit once the queue is empty and nothing runs")
    args = parser.parse_args(argv)
    if args.command == "worker":
        from loom_nb.worker import run_worker

        sys.path.insert(0, os.getcwd())
        try:
            run_worker(
                args.journal,
                args.modules,
                concurrency=args.concurrency,
                lease_seconds=args.lease_seconds,
                until_idle=args.until_idle,
            )
        except KeyboardInterrupt:
            return 130
        except LoomError as exc:
            print(f"loom-nb worker: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.command == "journal":
        return _snapshot(args.src, args.dst, args.overwrite)
    assume = True if args.yes else False if args.no else None
    if assume is None and not sys.stdin.isatty():
        print(
            "loom-nb demo: stdin is not a terminal, so nobody can answer the approval prompt; "
            "pass --yes to approve or --no to refuse.",
            file=sys.stderr,
        )
        return 2
    try:
        return _demo(args.journal, assume)
    except KeyboardInterrupt:
        print("\nInterrupted. Everything done so far is in the journal: run the demo again to resume this run.")
        return 130
    except JournalLockedError as exc:
        print(f"loom-nb demo: {exc}", file=sys.stderr)
        return 1
    except LoomError as exc:
        print(f"loom-nb demo: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
