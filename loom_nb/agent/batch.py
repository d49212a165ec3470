"""``Agent.map``: one agent over many inputs, concurrently, on one runtime, resumable.

Each input is its own execution, with an id derived from the input (``map:<agent>:<16 hex>``,
``journal/step_ids.batch_execution_id``) unless ``ids`` are given. So running the same ``map`` again
(the cell re-run after a crash or a kernel restart) finds the executions the journal already holds:
a finished item (completed, failed, or waiting at a gate) is not run again, an item a crash left
``running`` is recovered (``Engine.recover(execution_ids=[id])``), and the rest start. At most
``concurrency`` runs move at once, resumes after an answer included (each item's ``Run.limit``). A
failed item never stops the others: its failure is its ``Run``'s.

``Batch`` is the handle: per-item ``BatchItem`` (input, execution id, ``Run``, status), counts kept
up to date item by item (never a rescan), ``on_change`` listeners (what the notebook's batch view
subscribes), every open gate of the batch (``gates``), ``approve_all`` / ``refuse_all``, and the
results as a DataFrame (``frame()``: built by ``loom_nb.analysis.batch``, which registers itself
through ``set_frame_builder``: this layer never imports pandas). In a script (no event loop)
``map`` returns once no item moves, after a text progress line and the DataFrame
(``progress=False``: silent).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TextIO

from loom_nb.agent.config import APPROVAL_GATE, AgentResult
from loom_nb.agent.gate import Gate
from loom_nb.agent.run import Run
from loom_nb.errors import LoomError, UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.events import TERMINAL_STATUSES
from loom_nb.kernel.async_bridge import in_running_loop, run_or_schedule
from loom_nb.kernel.engine import ExecutionResult, require_execution_id
from loom_nb.runtime import Runtime

if TYPE_CHECKING:  # the agent's ``map`` calls this module; the batch only names the agent
    from loom_nb.agent.agent import Agent

log = logging.getLogger("loom_nb")

#: An item's status: not started yet (waiting for a slot), running, waiting at a gate, or settled.
ItemStatus = Literal["queued", "running", "suspended", "completed", "failed"]
STATUSES: tuple[ItemStatus, ...] = ("queued", "running", "suspended", "completed", "failed")

#: Called with every ``Batch`` that ``Agent.map`` creates in a running loop (the notebook extension
#: shows its batch view). Global for the reason ``RUN_HOOKS`` is.
BATCH_HOOKS: list[Callable[[Batch], None]] = []

_frame_builder: Callable[[Batch], Any] | None = None
_text_builder: Callable[[Batch], str] | None = None


def set_frame_builder(builder: Callable[[Batch], Any] | None, text: Callable[[Batch], str] | None = None) -> None:
    """Register what ``Batch.frame()`` calls (``loom_nb.analysis.batch.batch_frame``) and what a
    script prints after its progress line (``batch_text``): the layer above provides the DataFrame,
    this one never imports pandas."""
    global _frame_builder, _text_builder
    _frame_builder, _text_builder = builder, text


class Limiter:
    """At most ``concurrency`` coroutines passed through it run at once (a semaphore of the running
    loop: a script's later ``asyncio.run`` gets a fresh one).

    Args:
        concurrency: How many may run at once (at least 1).
    """

    def __init__(self, concurrency: int) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise UsageError(f"concurrency must be a whole number of at least 1, not {concurrency!r}")
        self.concurrency = concurrency
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None
        #: How many hold a slot now, and the most that ever did at once.
        self.active = 0
        self.peak = 0

    def _slot(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._loop, self._semaphore = loop, asyncio.Semaphore(self.concurrency)
        return self._semaphore

    def __call__(
        self, make: Callable[[], Coroutine[Any, Any, ExecutionResult]]
    ) -> Coroutine[Any, Any, ExecutionResult]:
        """A coroutine that waits for a free slot, then makes ``make()`` and awaits it (a ``Run.limit``:
        nothing is made while it waits, so a cancelled wait leaves no coroutine unawaited)."""
        return self._bounded(make)

    async def _bounded(self, make: Callable[[], Coroutine[Any, Any, ExecutionResult]]) -> ExecutionResult:
        slot = self._slot()
        await slot.acquire()
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            return await make()
        finally:
            self.active -= 1
            slot.release()


class BatchItem:
    """One input of a batch and its execution.

    Attributes:
        index: Its position in the inputs.
        input: The input (the user's message).
        execution_id: Its execution.
        run: Its ``Run``.
        status: ``queued``, ``running``, ``suspended`` (waiting at a gate), ``completed`` or ``failed``.
        resumed: True when the journal held its execution before this ``map`` (a re-run batch).
        started: False until the batch drives it (it waits for a slot), True for an execution
            found finished, waiting, or driven already.
    """

    def __init__(self, index: int, input: Any, run: Run, *, resumed: bool, queued: bool) -> None:
        self.index = index
        self.input = input
        self.execution_id = run.id
        self.run = run
        self.resumed = resumed
        self.started = not queued
        self.status: ItemStatus = "queued"

    def current_status(self) -> ItemStatus:
        """The status read from the ``Run`` now (``status`` is what the batch last counted)."""
        status = self.run.status
        if status == "running" and not self.started:
            return "queued"
        return status  # type: ignore[return-value]

    @property
    def gates(self) -> list[Gate]:
        """Its open gates (empty unless suspended)."""
        return self.run.gates

    @property
    def result(self) -> AgentResult | None:
        """Its result once completed."""
        return self.run.result

    def __repr__(self) -> str:
        return f"<BatchItem {self.index} {self.execution_id} {self.status}>"


class Batch:
    """The handle ``Agent.map`` returns: the items, their counts, their gates, their results.

    Await it (``await batch``) or ``await batch.wait()`` until no item moves; ``frame()`` for the
    results as a DataFrame.

    Attributes:
        agent: The agent.
        runtime: The runtime.
        items: One ``BatchItem`` per input, in input order.
        limiter: Bounds how many of its runs move at once (starts, recoveries and resumes).
    """

    def __init__(self, agent: Agent, runtime: Runtime, items: list[BatchItem], limiter: Limiter) -> None:
        self.agent = agent
        self.runtime = runtime
        self.items = items
        self.limiter = limiter
        self._counts: Counter[str] = Counter()
        self._listeners: list[Callable[[Batch, BatchItem], None]] = []
        self._changed: asyncio.Event | None = None
        self._changed_loop: asyncio.AbstractEventLoop | None = None
        self._unsubscribes: list[Callable[[], None]] = []
        #: The task driving the batch in a running loop (None in a script, once it returned).
        self.task: asyncio.Future[None] | None = None
        for item in items:
            item.status = item.current_status()
            self._counts[item.status] += 1
            self._unsubscribes.append(item.run.on_change(self._listener_for(item)))

    # -- counts ---------------------------------------------------------------------------------
    def _listener_for(self, item: BatchItem) -> Callable[[Run], None]:
        def changed(_run: Run) -> None:
            self._item_changed(item)

        return changed

    def _item_changed(self, item: BatchItem) -> None:
        new = item.current_status()
        if new != item.status:
            self._counts[item.status] -= 1
            self._counts[new] += 1
            item.status = new
        if self._changed is not None:
            self._changed.set()
        for listener in list(self._listeners):
            try:
                listener(self, item)
            except Exception:  # a listener (a view) must never stop the batch
                log.exception("loom_nb: a batch listener failed on item %s", item.execution_id)

    def refresh(self) -> None:
        """Read every item not moving in this process from the journal (a batch the workers run:
        ``map(on="workers")``), updating the counts."""
        for item in self.items:
            if not item.run.moving:
                item.run.refresh()

    @property
    def counts(self) -> dict[str, int]:
        """How many items are ``queued``, ``running``, ``suspended``, ``completed`` and ``failed``."""
        return {s: self._counts[s] for s in STATUSES}

    @property
    def done(self) -> int:
        """Items completed."""
        return self._counts["completed"]

    @property
    def failed(self) -> int:
        """Items failed."""
        return self._counts["failed"]

    @property
    def waiting(self) -> int:
        """Items waiting at a gate."""
        return self._counts["suspended"]

    @property
    def moving(self) -> int:
        """Items queued or running."""
        return self._counts["queued"] + self._counts["running"]

    def progress_line(self) -> str:
        """The counts as one line: ``batch agent:x: 7/10 done, 1 failed, 2 waiting at a gate, ...``."""
        c = self.counts
        parts = [f"{c['completed']}/{len(self.items)} done", f"{c['failed']} failed"]
        parts.append(f"{c['suspended']} waiting at a gate")
        if c["running"] or c["queued"]:
            parts.append(f"{c['running']} running, {c['queued']} queued")
        return f"batch {self.agent.flow_name}: " + ", ".join(parts)

    def __repr__(self) -> str:
        return f"<Batch {self.progress_line().removeprefix('batch ')}>"

    def __len__(self) -> int:
        return len(self.items)

    def on_change(self, listener: Callable[[Batch, BatchItem], None]) -> Callable[[], None]:
        """Call ``listener(batch, item)`` whenever an item's status or gates change; returns a
        function that stops it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def close(self) -> None:
        """Stop watching the items' runs (the runs go on)."""
        for unsubscribe in self._unsubscribes:
            unsubscribe()
        self._unsubscribes.clear()
        self._listeners.clear()

    # -- results --------------------------------------------------------------------------------
    @property
    def results(self) -> list[AgentResult | None]:
        """Each item's result (None unless completed), in input order."""
        return [item.result for item in self.items]

    def frame(self) -> Any:
        """The results as a pandas DataFrame: input, output, status, turns, tokens, duration,
        execution id (``loom_nb.analysis.batch.BATCH_COLUMNS``)."""
        if _frame_builder is None:
            raise UsageError("Batch.frame() needs loom_nb.analysis: import loom_nb (or loom_nb.analysis) first")
        return _frame_builder(self)

    async def wait(self, *, until: Literal["paused", "settled"] = "paused") -> Batch:
        """Wait until no item is queued or running (``paused``: some may wait at a gate) or until
        every item completed or failed (``settled``)."""
        loop = asyncio.get_running_loop()
        if self._changed is None or self._changed_loop is not loop:  # a script's next asyncio.run
            self._changed, self._changed_loop = asyncio.Event(), loop
        for item in self.items:  # once: a finished task's callback may not have run yet
            if item.status in ("running", "queued"):
                self._item_changed(item)
        while self.moving or (until == "settled" and self.waiting):
            self._changed.clear()
            await self._changed.wait()  # every item's change sets it (counts are kept per change)
        return self

    def __await__(self) -> Generator[Any, None, Batch]:
        return self.wait().__await__()

    # -- gates ----------------------------------------------------------------------------------
    @property
    def gates(self) -> list[Gate]:
        """Every open gate of the batch, item by item."""
        return [g for item in self.items if item.status == "suspended" for g in item.gates]

    def approve_all(self, reason: str | None = None) -> Any:
        """Approve every open tool-approval gate of the batch (``Gate.approve``); the runs go on,
        at most ``concurrency`` at once. In a script, returns once no item moves."""
        return self._answer_all(lambda gate: gate.approve(reason))

    def refuse_all(self, reason: str | None = None) -> Any:
        """Refuse every open tool-approval gate of the batch (``Gate.refuse``): each model is told
        and its run goes on. In a script, returns once no item moves."""
        return self._answer_all(lambda gate: gate.refuse(reason))

    def _answer_all(self, act: Callable[[Gate], Any]) -> Any:
        def answer_each() -> list[Gate]:
            errors: list[str] = []
            answered: list[Gate] = []
            for gate in self.gates:
                if gate.kind != APPROVAL_GATE or gate.resolved:
                    continue
                try:
                    act(gate)
                    answered.append(gate)
                except LoomError as exc:  # one refused answer never stops the others
                    errors.append(f"{gate.run.id} {gate.gate_id}: {exc}")
            if errors:
                raise UsageError(f"{len(errors)} answer(s) were refused (the others went on): " + "; ".join(errors))
            return answered

        if in_running_loop():
            return answer_each()

        async def in_a_loop() -> list[Gate]:
            answered = answer_each()
            await self.wait()
            return answered

        return run_or_schedule(in_a_loop())

    # -- driving --------------------------------------------------------------------------------
    def _first_for(self, item: BatchItem) -> Callable[[], Coroutine[Any, Any, ExecutionResult]]:
        def make() -> Coroutine[Any, Any, ExecutionResult]:
            return self._first(item)

        return make

    async def _first(self, item: BatchItem) -> ExecutionResult:
        # Holds a slot (the limiter): start the execution, or recover one a crash left running.
        item.started = True
        self._item_changed(item)
        rt, eid = self.runtime, item.execution_id
        record = rt.journal.get_execution(eid)
        if record is None:
            return await rt.start(self.agent.flow_name, item.input, execution_id=eid)
        if record.status == "running" and not rt.is_active(eid):
            for recovered in await rt.recover(execution_ids=[eid]):
                exc = recovered.exception()
                if recovered.status == "running" and exc is not None:
                    raise exc  # could not be driven on (logged by recover): this item failed here
        return rt.result(eid)

    def _launch(self) -> list[asyncio.Future[ExecutionResult]]:
        tasks: list[asyncio.Future[ExecutionResult]] = []
        for item in self.items:
            if item.started:
                continue
            try:
                outcome = item.run.drive(self.limiter(self._first_for(item)))
            except Exception:  # drive recorded it on the run: this item failed, the others go on
                continue
            if isinstance(outcome, asyncio.Future):
                tasks.append(outcome)
        return tasks

    async def drive(self) -> None:
        """Drive every queued item (at most ``concurrency`` at once), then wait until none moves."""
        tasks = self._launch()
        if tasks:
            await asyncio.wait(tasks)
        await self.wait()


def _item_ids(agent_name: str, inputs: Sequence[Any], ids: Sequence[str] | None) -> list[str]:
    if ids is not None:
        if len(ids) != len(inputs):
            raise UsageError(f"ids holds {len(ids)} id(s) for {len(inputs)} input(s): give one id per input")
        out = [require_execution_id(i, "ids") for i in ids]
        dupes = sorted({i for i in out if out.count(i) > 1})
        if dupes:
            raise UsageError(f"ids must be distinct; repeated: {', '.join(dupes[:5])}")
        return out
    seen: Counter[str] = Counter()
    out = []
    for value in inputs:
        base = step_ids.batch_execution_id(agent_name, value)
        seen[base] += 1
        out.append(step_ids.batch_execution_id(agent_name, value, seen[base]))
    return out


class TextProgress:
    """The script form of a batch's progress: one line, rewritten in place on a terminal (at most
    every ``interval`` seconds), printed once more when the batch stops moving.

    Args:
        batch: The batch.
        stream: Where to write (stdout by default).
        interval: The least time between two rewrites, in seconds.
    """

    def __init__(self, batch: Batch, *, stream: TextIO | None = None, interval: float = 0.2) -> None:
        self.batch = batch
        self.stream = stream or sys.stdout
        self.interval = interval
        self._last = float("-inf")
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._unsubscribe = batch.on_change(self._on_change) if self._tty else None

    def _on_change(self, batch: Batch, item: BatchItem) -> None:
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            self.stream.write("\r" + batch.progress_line())
            self.stream.flush()

    def finish(self) -> None:
        """Print the final line (ending the rewritten one) and stop watching."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.stream.write(("\r" if self._tty else "") + self.batch.progress_line() + "\n")
        self.stream.flush()


def map_agent(
    agent: Agent,
    inputs: Iterable[Any],
    *,
    concurrency: int = 16,
    ids: Sequence[str] | None = None,
    runtime: Runtime | None = None,
    view: bool = True,
    progress: bool = True,
    on: Literal["here", "workers"] = "here",
    deps: Any = None,
) -> Batch:
    """``Agent.map``'s body (documented there)."""
    if on not in ("here", "workers"):
        raise UsageError(f"map(on=...) is 'here' (this process runs the batch) or 'workers', not {on!r}")
    if on == "workers" and deps is not None:
        raise UsageError("map(on='workers', deps=...): deps live in this process only, workers cannot get them")

    limiter = Limiter(concurrency)
    values = list(inputs)
    rt = runtime
    if rt is None:
        from loom_nb.runtime import default_runtime

        rt = default_runtime()
    agent.register(rt)
    items: list[BatchItem] = []
    item_ids = _item_ids(agent.name, values, ids)
    # One query for what the journal holds (not one per item): a re-run batch reads it once.
    wanted = set(item_ids)
    known = {rec.execution_id: rec for rec in rt.journal.list_executions() if rec.execution_id in wanted}
    for index, (value, eid) in enumerate(zip(values, item_ids, strict=True)):
        record = known.get(eid)
        if record is not None and record.flow != agent.flow_name:
            raise UsageError(
                f"execution {eid!r} already exists and runs flow {record.flow!r}, not {agent.flow_name!r}: "
                "give this batch other ids"
            )
        live = rt.runs.get(eid)
        queued = False
        if on == "workers":
            run = agent.submit(value, eid, runtime=rt, view=False)  # recorded for a worker: nothing runs here
            items.append(BatchItem(index, value, run, resumed=record is not None, queued=False))
            continue
        if live is not None and live.status == "running" and (live.limit is not None or rt.is_active(eid)):
            run = live  # this process drives it, or an earlier batch will (the cell ran again meanwhile)
        elif record is not None and record.status != "running":
            run = Run.attach(rt, eid, agent=agent)  # finished or waiting at a gate: not run again
        else:
            run, queued = Run.of(rt, eid, agent=agent), True  # new, or left running by a crash
        run.limit = limiter
        rt.runs[eid] = run
        if deps is not None and (record is None or record.status not in TERMINAL_STATUSES):
            rt.deps[eid] = deps  # every item's tools get them (Agent.start's deps)
        items.append(BatchItem(index, value, run, resumed=record is not None, queued=queued))
    batch = Batch(agent, rt, items, limiter)
    if on == "workers":
        return batch
    if in_running_loop():
        for hook in list(BATCH_HOOKS) if view else ():
            hook(batch)
        batch.task = asyncio.ensure_future(batch.drive())
        return batch
    reporter = TextProgress(batch) if progress else None
    run_or_schedule(batch.drive())
    if reporter is not None:
        reporter.finish()
        if _text_builder is not None:
            print(_text_builder(batch))
    return batch
