"""``Session``: consecutive runs of one agent that continue one conversation.

``session = agent.session("thread-1")``; ``session.start("...")`` (or ``agent.start("...",
session="thread-1")``) starts the session's next run. Each run is its own execution, with the id
``session:<agent name>:<session id>:<index>`` (index 0, 1, 2...) and the input ``{"message": ...,
"session": {"id", "previous", "index"}}``; ``previous`` is the session's last completed run, whose
conversation the new run continues by reference (``loom_nb.agent.carry``). Everything a session
is can be read back from the journal (the ids are derived, the links are in the inputs), so a
session survives a kernel restart: ``agent.session("thread-1")`` in a new process finds its runs.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from loom_nb.agent.carry import conversation, last_model_node
from loom_nb.errors import UsageError
from loom_nb.journal.ids import journal_id
from loom_nb.kernel.async_bridge import caller_thread
from loom_nb.messages import Message
from loom_nb.runtime import Runtime, default_runtime

if TYPE_CHECKING:  # kept ring (tests/test_meta.py): the agent makes sessions; a session names its agent and runs
    from loom_nb.agent.agent import Agent
    from loom_nb.agent.config import AgentResult
    from loom_nb.agent.run import Run

#: The thread that started a session run on each runtime (its loop's thread in a notebook): a
#: runtime's journal connection and the locks of its runs serve one thread, so a ``start`` from
#: another thread is refused while that one lives.
_HOME_THREADS: weakref.WeakKeyDictionary[Runtime, Any] = weakref.WeakKeyDictionary()

#: The prefix of a session run's execution id: ``session:<agent name>:<session id>:<index>``.
SESSION_PREFIX = "session:"


def session_execution_id(agent_name: str, session_id: str, index: int) -> str:
    """The execution id of run ``index`` (from 0) of a session (a persisted contract)."""
    return f"{SESSION_PREFIX}{agent_name}:{session_id}:{index}"


def session_input(message: str, session_id: str, previous: str | None, index: int) -> dict[str, Any]:
    """The input of a session run: the message and where the run sits in its session."""
    return {"message": message, "session": {"id": session_id, "previous": previous, "index": index}}


class Session:
    """One conversation over consecutive runs of an agent (``Agent.session`` builds it).

    Attributes:
        id: The session id.
        agent: The agent.
        runtime: The runtime its runs are journaled in.
    """

    def __init__(self, agent: Agent, session_id: str, *, runtime: Runtime | None = None) -> None:
        if not isinstance(session_id, str) or not session_id.strip() or session_id != session_id.strip():
            raise UsageError(f"a session id must be a non-empty string without surrounding spaces, got {session_id!r}")
        journal_id(session_id, "session id")  # a key of its runs' ids: no NUL, no lone surrogate, not too long
        self.id = session_id
        self.agent = agent
        self.runtime = runtime or default_runtime()

    def __repr__(self) -> str:
        return f"<Session {self.id!r} of agent {self.agent.name!r}: {len(self)} run(s)>"

    def execution_id(self, index: int) -> str:
        """The execution id of run ``index`` of this session."""
        return session_execution_id(self.agent.name, self.id, index)

    def _exists(self, index: int) -> bool:
        return self.runtime.journal.get_execution(self.execution_id(index)) is not None

    def __len__(self) -> int:
        """How many runs the session has (its runs are indices 0..n-1: found in O(log n) lookups)."""
        if not self._exists(0):
            return 0
        low, high = 0, 1  # run ``low`` exists; find a ``high`` that does not, then bisect
        while self._exists(high):
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if self._exists(middle) else (low, middle)
        return high

    def execution_ids(self) -> list[str]:
        """The session's runs, in order, as the journal holds them."""
        return [self.execution_id(i) for i in range(len(self))]

    def runs(self) -> list[Run]:
        """A ``Run`` handle on each of the session's runs, in order."""
        return [self.agent.attach(eid, runtime=self.runtime) for eid in self.execution_ids()]

    def _previous(self, count: int, *, strict: bool = True) -> str | None:
        """The last completed run (the one the next run continues); ``strict`` refuses while the
        last run is unfinished (``start`` never starts a run while one is, so only the last can be)."""
        journal = self.runtime.journal
        for index in reversed(range(count)):
            eid = self.execution_id(index)
            record = journal.get_execution(eid)
            assert record is not None
            if strict and index == count - 1 and record.status in ("running", "suspended"):
                raise UsageError(
                    f"session {self.id!r}: run {eid!r} is {record.status}; a session continues one conversation, "
                    "so its next message waits until that run finishes (answer its gates, await it, or "
                    "runtime.recover() it), then start the next run"
                )
            if record.status == "completed":
                return eid
        return None

    def start(self, message: str, *, view: bool = True, deps: Any = None) -> Run:
        """Start the session's next run on ``message``; it continues the last completed run's
        conversation. Returns its ``Run`` (as ``Agent.start`` does); ``deps`` as for ``Agent.start``.

        Raises:
            UsageError: a run of the session is still running or waiting at a gate.
        """
        if not isinstance(message, str):
            raise UsageError(f"a session run's input is the user's message (a string), got {type(message).__name__}")
        self._on_home_thread()
        index = len(self)
        # A run started here that has not written its start yet (a task not run so far) is the
        # session's run ``index`` already: the journal does not show it, this kernel's Run does.
        live = self.runtime.runs.get(self.execution_id(index))
        if live is not None and live.status in ("running", "suspended"):
            raise UsageError(
                f"session {self.id!r}: run {live.id!r} is {live.status} (started and not finished); a session "
                "takes one message at a time: `await` that run before the next start, or send each message "
                "with `await session.run(message)`"
            )
        previous = self._previous(index)
        return self.agent.start(
            session_input(message, self.id, previous, index),
            runtime=self.runtime,
            execution_id=self.execution_id(index),
            view=view,
            deps=deps,
        )

    def _on_home_thread(self) -> None:
        """Refuse a start from another thread than the one that started this runtime's session runs."""
        here = caller_thread()
        home = _HOME_THREADS.get(self.runtime)
        if home is None or not home.is_alive():
            _HOME_THREADS[self.runtime] = here
        elif home is not here:
            raise UsageError(
                f"session {self.id!r}: start was called from thread {here.name!r}, but this runtime's runs "
                f"are driven on thread {home.name!r} (the kernel's loop): call it there, e.g. "
                "`loop.call_soon_threadsafe(...)` or `asyncio.run_coroutine_threadsafe(session.run(...), loop)`"
            )

    async def run(self, message: str, *, deps: Any = None) -> AgentResult:
        """Start the session's next run and wait for its result (approvals must come from elsewhere)."""
        return await self.start(message, deps=deps)

    def transcript(self) -> list[Message]:
        """The conversation so far (without the system prompt): the last completed run's, rebuilt
        from the journal. Empty before the first run completes."""
        previous = self._previous(len(self), strict=False)
        if previous is None:
            return []
        journal = self.runtime.journal
        node = last_model_node(journal.read(previous))
        return [] if node is None else conversation(journal, previous, node)
