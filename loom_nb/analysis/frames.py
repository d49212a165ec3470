"""``Frames``: the journal as pandas DataFrames, computed in DuckDB SQL.

    import loom_nb as loom
    f = loom.frames()                   # the default runtime's journal (or loom.frames(rt))
    f.steps("exec-1")                   # one row per step, gate, decision and value
    f.gates()                           # who waited how long, and what they answered
    f.sql("SELECT kind, count(*) FROM steps GROUP BY kind")

A DuckDB journal is read through a cursor of the runtime's own connection (DuckDB allows one
process per file: the file is never opened again); the views are TEMP views of that cursor, so the
journal file's schema is left alone. An ``InMemoryJournal`` is copied into a private in-memory
DuckDB database (again whenever it has changed), so the same views answer.

Beside it: the private copy (``analysis/journal_copy.py``), the columns of the frames built in
Python (``analysis/frame_columns.py``) and the diff of two executions (``analysis/execution_diff.py``);
their public names are importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import duckdb
import pandas as pd

from loom_nb.agent.carry import journal_carry, session_of
from loom_nb.agent.output import recorded_output
from loom_nb.agent.transcript import rebuild_requests
from loom_nb.analysis.execution_diff import DIFF_COLUMNS, ExecutionDiff, diff_executions
from loom_nb.analysis.frame_columns import (
    OUTPUT_COLUMNS,
    REPLAY_COLUMNS,
    SESSION_COLUMNS,
    TRANSCRIPT_COLUMNS,
    empty_frame,
    typed_frame,
)
from loom_nb.analysis.journal_copy import copy_server_journal, load_events, private_database
from loom_nb.analysis.read_only_sql import reading_statements
from loom_nb.analysis.sql_views import COLUMNS, DECODED, ORDER, VIEW_ORDER, create_views
from loom_nb.errors import FlowNotFoundError, UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import canonical_json
from loom_nb.journal.duckdb_store import DuckDBJournal
from loom_nb.journal.ids import journal_id
from loom_nb.journal.run_state import RunState
from loom_nb.kernel.async_bridge import run_sync
from loom_nb.kernel.engine import ExecutionResult, ReplayReport
from loom_nb.runtime import Runtime

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from loom_nb.analysis.ope import PolicyEstimate, Reward, TargetPolicy

DataFrame = Any  # pandas is untyped here

__all__ = [
    "DIFF_COLUMNS",
    "OUTPUT_COLUMNS",
    "PLOTS",
    "REPLAY_COLUMNS",
    "SESSION_COLUMNS",
    "TRANSCRIPT_COLUMNS",
    "DataFrame",
    "ExecutionDiff",
    "Frames",
    "diff",
    "frames",
    "log_growth",
]


def _descend(report: ReplayReport) -> list[ReplayReport]:
    """A replay's report, then its children's (depth first)."""
    return [report, *(r for c in report.children for r in _descend(c))]


def _replay_row(report: ReplayReport) -> dict[str, Any]:
    """One row of ``Frames.replay``: the report's fields and its children's outcomes."""
    row: dict[str, Any] = {c: getattr(report, c) for c in REPLAY_COLUMNS if c != "children"}
    row["children"] = "; ".join(
        f"{r.execution_id}: {r.replayed_status}" + ("" if r.reproduced else " (not reproduced)")
        for r in _descend(report)[1:]
    )
    return row


#: The plots ``Frames.plot_*`` draw, by name: ``loom_nb.analysis.plots`` fills it when it is imported
#: (the ``loom_nb.analysis`` package imports it first), so plots import frames and never the reverse.
PLOTS: dict[str, Callable[..., Figure]] = {}


class Frames:
    """The journal of one runtime as pandas DataFrames (one method per SQL view).

    Every frame method takes an optional ``execution_id`` filter, returns a fresh DataFrame with the
    documented columns and dtypes (``docs/analysis.md``), and reads what is committed now.

    Args:
        runtime: The runtime whose journal to read.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._con: Any = None
        self._version: Any = None
        self._last_seqs: dict[str, int] | None = None  # each execution's last seq in a server journal's copy
        self._content_rows = 0
        #: The frames read from that copy under the change marker ``_results_version`` (view, filter).
        self._results: dict[tuple[str, str | None], DataFrame] = {}
        self._results_version: Any = None

    def __repr__(self) -> str:
        return f"Frames(journal={self.runtime.journal.location!r}, views={list(VIEW_ORDER)})"

    # -- connection -------------------------------------------------------------------------------
    @property
    def views(self) -> tuple[str, ...]:
        """The names ``sql()`` queries may use (and the raw ``content`` table)."""
        return VIEW_ORDER

    def _connection(self) -> Any:
        if self.runtime.closed:
            raise UsageError(f"the runtime of {self!r} is closed: open it again and call loom.frames(runtime)")
        journal = self.runtime.journal
        connection = getattr(journal, "connection", None)
        if isinstance(journal, DuckDBJournal) or isinstance(connection, duckdb.DuckDBPyConnection):
            if self._con is None:
                assert connection is not None
                self._con = connection.cursor()
                create_views(self._con)
            return self._con
        if hasattr(journal, "arrow_tables"):
            return self._arrow_connection(journal)
        if not hasattr(journal, "all_events"):
            raise UsageError(
                f"frames cannot read a {type(journal).__name__}: use a DuckDB journal "
                "(loom.Runtime.open(path)) or an InMemoryJournal"
            )
        version = getattr(journal, "commits", None)
        if self._con is None:
            self._con = private_database()
        if version is None or version != self._version:
            load_events(self._con, journal.all_events())
            self._version = version
        return self._con

    def _arrow_connection(self, journal: Any) -> Any:
        """A private in-memory DuckDB holding a copy of a server journal's tables (PostgreSQL),
        moved as Arrow: whole the first time (``arrow_tables``), then, whenever the change marker
        moved, only the events appended since (``arrow_changes``, after each execution's last seq
        in the copy) with the executions table again (``copy_server_journal``)."""
        version = journal.change_marker()
        if self._con is None:
            self._con = private_database(keys=False)
            self._last_seqs = None
        if version != self._version:
            last_seqs, content_rows = copy_server_journal(self._con, journal, self._last_seqs, self._content_rows)
            self._version, self._last_seqs, self._content_rows = version, last_seqs, content_rows
        return self._con

    def close(self) -> None:
        """Release the cursor (or the private database of an in-memory journal)."""
        if self._con is not None:
            con, self._con, self._version, self._last_seqs = self._con, None, None, None
            self._results, self._results_version = {}, None
            con.close()

    def __enter__(self) -> Frames:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------------------
    def _frame(self, view: str, execution_id: str | None = None) -> DataFrame:
        sql = f"SELECT * FROM {view}"
        params: list[Any] = []
        if execution_id is not None:
            sql += " WHERE execution_id = ?"
            params.append(journal_id(execution_id))  # a UsageError for an id no journal keys
        con = self._connection()
        # Over a server journal's copy, a frame read while the change marker has not moved is the
        # last one again (a copy; only frames of plain values: a decoded column holds mutable objects).
        kept = self._last_seqs is not None and not DECODED.get(view)
        if kept:
            if self._results_version != self._version:
                self._results, self._results_version = {}, self._version
            last = self._results.get((view, execution_id))
            if last is not None:
                return last.copy(deep=True)
        with self._parallel():
            df = con.execute(f"{sql} ORDER BY {ORDER[view]}", params).df()
        frame = typed_frame(df, COLUMNS[view], DECODED.get(view, ()))
        if kept:
            self._results[(view, execution_id)] = frame.copy(deep=True)
        return frame

    def _parallel(self) -> AbstractContextManager[None]:
        journal = self.runtime.journal
        return journal.parallel_reads() if isinstance(journal, DuckDBJournal) else nullcontext()

    def sql(self, query: str) -> DataFrame:
        """Run any SQL over the views (``events``, ``executions``, ``steps``, ``turns``,
        ``tool_calls``, ``gates``, ``decisions``, ``usage``, ``streams``, ``log_growth``; and the
        raw ``content`` table) and return the result as a DataFrame.

        JSON-valued columns are JSON text here (the frame methods decode them). Only reading
        statements run (``reading_statements``), in a read-only transaction, with no file access.

        Raises:
            UsageError: a statement that is not a read (``DELETE``, ``DROP``, ``COPY``, ``ATTACH``,
                ``SET``...) or a file access (``read_text``, ``read_csv``...): nothing changed.
        """
        reading_statements(query)
        con = self._connection()
        with self._parallel():
            con.execute("BEGIN TRANSACTION READ ONLY")
            try:
                return con.execute(query).df()
            except duckdb.Error as exc:  # a file access, or a mistake in the query
                raise UsageError(
                    f"analysis SQL failed (it reads the journal's tables and views only, no file and no write): {exc}"
                ) from exc
            finally:
                con.execute("ROLLBACK")

    def events(self, execution_id: str | None = None) -> DataFrame:
        """Every event: the journal's columns plus ``turn`` (carried forward) and ``bytes``."""
        return self._frame("events", execution_id)

    def executions(self) -> DataFrame:
        """One row per execution: flow, status, times, lineage (``forked_from``, ``at_step``; a child
        execution's ``parent_execution_id`` and ``parent_step``: the tree of sub-agents),
        turns, events, bytes, decoded input and output, and the error when failed."""
        return self._frame("executions")

    def steps(self, execution_id: str | None = None) -> DataFrame:
        """One row per step, gate, decision and value: kind, effect, status, attempts, timing,
        sizes, tokens and cost."""
        return self._frame("steps", execution_id)

    def turns(self, execution_id: str | None = None) -> DataFrame:
        """One row per agent turn: its final model node, timing, calls, tokens, finish reason, text."""
        return self._frame("turns", execution_id)

    def tool_calls(self, execution_id: str | None = None) -> DataFrame:
        """One row per tool call a model asked for: arguments, approval (null when no gate),
        reason, status, a preview of the result and the error, if any."""
        return self._frame("tool_calls", execution_id)

    def gates(self, execution_id: str | None = None) -> DataFrame:
        """One row per gate: kind, when it opened and was resolved, the wait, payload and answer."""
        return self._frame("gates", execution_id)

    def decisions(self, execution_id: str | None = None) -> DataFrame:
        """One row per decision: options, choice, probabilities, propensity and policy."""
        return self._frame("decisions", execution_id)

    def usage(self, execution_id: str | None = None) -> DataFrame:
        """Per execution: calls, model calls, tokens and cost (as ``Runtime.usage`` sums them)."""
        return self._frame("usage", execution_id)

    def streams(self, execution_id: str | None = None) -> DataFrame:
        """Every durable stream chunk: channel, text and the turn it belongs to."""
        return self._frame("streams", execution_id)

    def log_growth(self, execution_id: str | None = None) -> DataFrame:
        """Events and bytes journaled per turn, and their running totals (events before the first
        turn count toward turn 0)."""
        return self._frame("log_growth", execution_id)

    def sessions(self) -> DataFrame:
        """One row per run of an agent session, in session order: ``session_id``, ``index``,
        ``execution_id``, ``previous`` (the run it continues), ``flow``, ``status``, ``message``,
        ``output``, ``turns``, ``created_at``, ``updated_at``, ``bytes`` (its own events only: the
        conversation it continues is carried by reference)."""
        runs = self.executions()
        rows: list[dict[str, Any]] = []
        for row in runs.itertuples(index=False):
            session = session_of(row.input)
            if session is None:
                continue
            output = row.output if isinstance(row.output, dict) else None
            rows.append(
                {
                    "session_id": str(session.get("id")),
                    "index": int(session.get("index") or 0),
                    "execution_id": row.execution_id,
                    "previous": session.get("previous"),
                    "flow": row.flow,
                    "status": row.status,
                    "message": row.input.get("message"),
                    "output": None if output is None else output.get("output"),
                    "turns": row.turns,
                    "created_at": row.created_at,
                    "updated_at": row.updated_at,
                    "bytes": row.bytes,
                }
            )
        if not rows:
            return empty_frame(SESSION_COLUMNS)
        df = pd.DataFrame(rows, columns=list(SESSION_COLUMNS)).sort_values(["session_id", "index"])
        return typed_frame(df.reset_index(drop=True), SESSION_COLUMNS)

    def transcript(self, execution_id: str, turn: int) -> DataFrame:
        """The messages turn ``turn`` sent the model, rebuilt from the journal alone.

        Raises:
            UsageError: unknown execution, or no such turn.
        """
        events = self.runtime.journal.read(execution_id)
        if not events:
            raise UsageError(f"no execution {execution_id!r} in the journal {self.runtime.journal.location}")
        requests = rebuild_requests(events, carry=journal_carry(self.runtime.journal))
        request = requests.get(step_ids.turn_id(turn))
        if request is None:
            known = ", ".join(requests)
            raise UsageError(f"execution {execution_id!r} has no model turn {turn} (its turns: {known or 'none'})")
        rows = [
            {
                "role": m.role,
                "text": m.text,
                "tool_calls": [c.model_dump(mode="json") for c in m.tool_calls],
                "tool_call_id": m.tool_call_id,
                "name": m.name,
                "is_error": m.is_error,
                "tainted": m.tainted,
            }
            for m in request.messages
        ]
        if not rows:
            return empty_frame(TRANSCRIPT_COLUMNS)
        return typed_frame(pd.DataFrame(rows, columns=list(TRANSCRIPT_COLUMNS)), TRANSCRIPT_COLUMNS)

    def outputs(self, execution_id: str | None = None) -> DataFrame:
        """One row per run of a typed-output agent (``Agent(output_type=...)``): its type and mode,
        the final-answer attempts (and how many failed validation), the answer as canonical JSON
        (``output_json``) and decoded (``output``), then the answer flattened: one ``output.<field>``
        column per field of an object answer (a pydantic model, a dataclass, a ``TypedDict``),
        nested fields joined by ``.``. Text agents have no row."""
        ids = [execution_id] if execution_id is not None else list(self.executions()["execution_id"])
        rows = []
        for eid in ids:
            state = RunState.fold(self.runtime.journal.read(eid))
            recorded = recorded_output(state)
            if recorded is None:
                continue
            rows.append(
                {
                    "execution_id": eid,
                    "flow": state.flow,
                    "status": state.status,
                    "output_type": recorded.output_type,
                    "output_mode": recorded.mode,
                    "attempts": recorded.attempts,
                    "failed_attempts": recorded.failed_attempts,
                    "output_json": None if recorded.output is None else canonical_json(recorded.output),
                    "output": recorded.output,
                }
            )
        if not rows:
            return empty_frame(OUTPUT_COLUMNS)
        df = typed_frame(pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS)), OUTPUT_COLUMNS)
        objects = [o if isinstance(o, dict) else {} for o in df["output"]]
        if any(objects):
            flat = pd.json_normalize(objects, sep=".").add_prefix("output.")
            flat = flat[sorted(flat.columns)]  # the journal keeps sorted keys: the same order from every store
            df = pd.concat([df, flat.set_index(df.index)], axis=1)
        return df

    # -- replay analysis --------------------------------------------------------------------------
    async def replay(self, execution_id: str | Sequence[str] | None = None) -> DataFrame:
        """Replay executions purely from the log (``Runtime.replay``) and report, one row each,
        whether they reproduce (every execution when ``execution_id`` is None). An execution whose
        flow is not registered in this process gets ``replayed_status="flow_not_found"``.

        A replay descends into the child executions (sub-agents) it reaches: ``children`` lists
        each one's outcome (``<child id>: <replayed status>``, `` (not reproduced)`` when it did not,
        grandchildren too; ``""`` when none). A listed child its parent's replay reached is not
        replayed again: its row is the one its parent's replay found.

        Raises:
            UsageError: an unknown execution id.
        """
        if execution_id is None:
            ids = list(self.runtime.executions())
        elif isinstance(execution_id, str):
            ids = [execution_id]
        else:
            ids = list(execution_id)
        found: dict[str, dict[str, Any]] = {}
        # Parents before their children (a child's id is its parent's plus ``/<step>``), so a child
        # the parent's replay reached takes the parent's finding instead of a second replay.
        for eid in sorted(dict.fromkeys(ids), key=lambda e: e.count("/")):
            if eid in found:
                continue
            try:
                report = await self.runtime.replay(eid)
            except FlowNotFoundError as exc:  # one missing flow does not hide the other reports
                record = self.runtime.journal.get_execution(eid)
                found[eid] = {
                    "execution_id": eid,
                    "reproduced": False,
                    "recorded_status": record.status if record else "unknown",
                    "replayed_status": "flow_not_found",
                    "served": 0,
                    "message": str(exc),
                    "seconds": 0.0,
                    "children": "",
                }
                continue
            for r in _descend(report):
                found.setdefault(r.execution_id, _replay_row(r))
        rows = [found[eid] for eid in ids]
        if not rows:
            return empty_frame(REPLAY_COLUMNS)
        return typed_frame(pd.DataFrame(rows, columns=list(REPLAY_COLUMNS)), REPLAY_COLUMNS)

    def replay_sync(self, execution_id: str | Sequence[str] | None = None) -> DataFrame:
        """``replay`` for scripts without an event loop."""
        return run_sync(self.replay(execution_id), sync_name="replay_sync", await_hint="await frames.replay(...)")

    async def fork(self, execution_id: str, at_step: str, *, new_execution_id: str | None = None) -> ExecutionResult:
        """Fork ``execution_id`` at ``at_step`` (``Runtime.fork``): a new execution served the
        recorded prefix before ``at_step`` that runs live from there. ``executions()`` shows its
        ``forked_from`` and ``at_step``; ``diff`` compares it with the original."""
        return await self.runtime.fork(execution_id, at_step, new_execution_id=new_execution_id)

    def fork_sync(self, execution_id: str, at_step: str, *, new_execution_id: str | None = None) -> ExecutionResult:
        """``fork`` for scripts without an event loop."""
        fork = self.fork(execution_id, at_step, new_execution_id=new_execution_id)
        return run_sync(fork, sync_name="fork_sync", await_hint="await frames.fork(...)")

    def diff(self, a: str, b: str) -> ExecutionDiff:
        """Align executions ``a`` and ``b`` by step id and find where they diverge.

        Input digests of steps are the journaled ones (event format 2 journals none: the fold
        recomputes them from the input, a reference followed); other digests are ``sha256`` of the JSON
        text DuckDB renders (comparable with each other, not with ``digest_value``).

        Raises:
            UsageError: either execution is unknown.
        """
        con = self._connection()
        return diff_executions(con, self.runtime.journal, a, b)

    # -- off-policy evaluation and plots ----------------------------------------------------------
    def estimate_policy_value(
        self,
        target: TargetPolicy,
        reward: Reward,
        *,
        outcomes: DataFrame | None = None,
        decision_id: str | Callable[[str], bool] | None = None,
        n_bootstrap: int = 1000,
        confidence: float = 0.95,
        seed: int = 0,
    ) -> PolicyEstimate:
        """Off-policy value of ``target`` from this journal's logged decisions (IPS and SNIPS);
        see ``loom_nb.analysis.ope.estimate_policy_value``.

        Args:
            target: The policy to evaluate.
            reward: A column of ``outcomes``, or a function of the execution id.
            outcomes: The outcome DataFrame when ``reward`` names a column.
            decision_id: Only decisions with this id (or for which this predicate is true).
            n_bootstrap: Bootstrap resamples for the intervals.
            confidence: Interval coverage.
            seed: Bootstrap seed.
        """
        from loom_nb.analysis.ope import estimate_policy_value

        decisions = self.decisions()
        if isinstance(decision_id, str):
            decisions = decisions[decisions["decision_id"] == decision_id]
        elif decision_id is not None:
            decisions = decisions[decisions["decision_id"].map(decision_id).astype(bool)]
        return estimate_policy_value(
            decisions,
            target,
            reward,
            outcomes=outcomes,
            n_bootstrap=n_bootstrap,
            confidence=confidence,
            seed=seed,
        )

    def plot_timeline(self, execution_id: str) -> Figure:
        """A Gantt chart of one execution's steps, gates and decisions (see ``plots.plot_timeline``)."""
        return PLOTS["timeline"](execution_id, frames=self)

    def plot_log_growth(self, execution_id: str) -> Figure:
        """Bytes journaled per turn and cumulative (see ``plots.plot_log_growth``)."""
        return PLOTS["log_growth"](execution_id, frames=self)

    def plot_usage(self, execution_id: str | None = None) -> Figure:
        """Tokens and cost per execution, or per turn of one execution (see ``plots.plot_usage``)."""
        return PLOTS["usage"](execution_id, frames=self)


def frames(runtime: Runtime | None = None) -> Frames:
    """The journal of ``runtime`` (the default runtime when None) as DataFrames.

    Raises:
        UsageError: no runtime given and no default runtime set.
    """
    if runtime is None:
        from loom_nb.runtime import default_runtime

        runtime = default_runtime()
    return Frames(runtime)


def diff(a: str, b: str, *, runtime: Runtime | None = None) -> ExecutionDiff:
    """Align executions ``a`` and ``b`` by step id (``Frames.diff``)."""
    f = frames(runtime)
    try:
        return f.diff(a, b)
    finally:
        f.close()


def log_growth(execution_id: str | None = None, *, runtime: Runtime | None = None) -> DataFrame:
    """Events and bytes journaled per turn and cumulative (``Frames.log_growth``)."""
    f = frames(runtime)
    try:
        return f.log_growth(execution_id)
    finally:
        f.close()
