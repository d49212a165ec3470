"""The loom_nb error hierarchy, split by fault.

::

    LoomError
    ├── UsageError                 the developer's mistake; the message says the fix
    │   └── ResumeValidationError  a resume payload that fails the gate's schema
    │       └── StaleApprovalError  an approval bound to other arguments than the gate's
    ├── JournalError               the event log
    │   ├── JournalLockedError     another process holds the DuckDB file
    │   ├── JournalWriteError      a commit failed (full disk, I/O error, bad text); the run stops
    │   │   └── LeaseLostError     another process took the execution over (a shared journal)
    │   ├── JournalReadError       the file cannot be opened or read (closed, I/O error)
    │   │   ├── JournalCorruptError  the file is damaged: truncated, overwritten, not a journal
    │   │   └── JournalVersionError  written by a newer loom_nb (a migration or event format unknown here)
    │   ├── NonDeterminismError    a replayed step differs from the record
    │   └── ReplayDivergedError    a pure replay would have to run an effect
    ├── EffectError                raised around an effect call
    │   ├── EffectNotFoundError
    │   ├── NotAuthorizedError
    │   ├── QuotaExceededError
    │   ├── RetriesExhaustedError
    │   ├── InDoubtError
    │   ├── OutcomeUnknownError    an effect cannot tell if its call took effect (in doubt if not idempotent)
    │   │   └── EffectTimeout      a call ran past its timeout (retryable; in doubt if not idempotent)
    │   ├── PromptIntegrityError
    │   ├── ClaimCheckError
    │   ├── ToolArgumentsError
    │   └── McpError               an MCP server or one of its tools failed
    │       ├── McpToolError       the tool answered with isError (the model reads it)
    │       ├── McpServerGone      the server died mid-call (also an OutcomeUnknownError; retryable)
    │       │   └── McpTimeout     no answer within read_timeout
    │       └── McpToolsChangedError  the server's tool list changed since ``mcp_tools`` read it
    ├── ProviderError              a model provider's failure
    │   ├── ProviderHTTPError      status, body, retry_after
    │   ├── ProviderTimeout        no answer in time, or the connection failed (retryable)
    │   ├── ProviderProtocolError  a malformed response or stream
    │   │   └── ProviderStreamCut  a stream that ended cleanly before its last event (retryable)
    │   ├── AnswerTooLargeError    a model step's answer passed the agent's ``max_answer_chars``
    │   ├── AnswerCutError         the final answer was cut off (token limit, content filter), ``when_cut="fail"``
    │   └── OutputValidationError  the final answer failed the agent's output type on every retry
    ├── FlowNotFoundError          a flow name no cell has registered (also a UsageError)
    ├── RunCancelledError          awaiting a run that was cancelled (``execution_cancelled``)
    └── WaitInterrupted            an interrupt stopped ``await run`` (the run itself goes on)

``Suspend`` derives from ``BaseException`` so a user's ``except Exception`` cannot swallow it.
Every error keeps its constructor arguments in ``args`` so it pickles and can be rebuilt from
the journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

_T = TypeVar("_T")


class LoomError(Exception):
    """Root of every error loom_nb raises on purpose."""


class UsageError(LoomError):
    """A usage mistake by the developer. The message says what to change."""


class ResumeValidationError(UsageError):
    """A resume payload failed the gate's schema; nothing was recorded and the gate stays open."""

    def __init__(self, message: str, *, execution_id: str = "", gate_id: str = "") -> None:
        super().__init__(message)
        self.execution_id = execution_id
        self.gate_id = gate_id

    def __reduce__(self) -> Any:
        return (rebuild_error, (type(self), self.args, self.__dict__))


class StaleApprovalError(ResumeValidationError):
    """An approval's digest does not match the arguments it would run (the gate shows other
    arguments than the ones approved, or the edited ones changed after they were bound); nothing
    was recorded and the gate stays open."""


class FlowNotFoundError(UsageError):
    """A flow or effect is looked up by a name nothing registered in this process."""


class RunCancelledError(LoomError):
    """The run was cancelled (``run.cancel()``, ``%loom cancel``, the Stop button): it is recorded as
    ``cancelled`` and never goes on. Start a new run (another execution id) to try again."""


class ChildExecutionError(LoomError):
    """A child execution (``ctx.child``, ``Agent.as_tool``) failed or was cancelled; the message
    names the child's id (inspect it with ``runtime.result(child_id)``)."""


class WaitInterrupted(LoomError):
    """An interrupt (Kernel > Interrupt, a cancelled task) stopped waiting for a run; the run itself
    goes on in the background. In a notebook it shows as its one-line message, not a traceback."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows what this returns instead of a traceback: the message is the whole story.
        return [f"{type(self).__name__}: {self}"]


class JournalError(LoomError):
    """A problem with the event log."""


class JournalLockedError(JournalError):
    """Another process holds the DuckDB journal file."""


class JournalWriteError(JournalError):
    """A commit to the journal failed; nothing of it was written and the run stopped.

    The original error is ``__cause__`` (``cause_text`` names it). The execution stays ``running``:
    fix the cause (free space, close what holds the file...), then call ``runtime.recover()``.

    Attributes:
        location: The journal's file (or ``:memory:``).
        execution_id: The execution whose commit failed ("" when not known).
    """

    location: str = ""
    execution_id: str = ""

    @property
    def cause_text(self) -> str:
        """``"<type>: <message>"`` of the original error ("" when there is none)."""
        cause = self.__cause__
        return "" if cause is None else f"{type(cause).__name__}: {cause}"

    def __reduce__(self) -> Any:
        return (rebuild_error, (type(self), self.args, self.__dict__))


class LeaseLostError(JournalWriteError):
    """This process lost the lease of the execution it was driving (it expired, and another process
    of a shared journal took it over): the run stopped here, before its next commit, and the other
    owner goes on with it. Nothing of the refused commit was written.

    Attributes:
        execution_id: The execution.
        owner: Who holds the lease now ("" when nobody does).
    """

    owner: str = ""


class JournalReadError(JournalError):
    """The journal file cannot be opened or read; the message names the file and what to do."""


class JournalCorruptError(JournalReadError):
    """The journal file is damaged (truncated, overwritten, a checksum that does not match, not a
    DuckDB file): move it aside and open a new journal, or restore it from a copy."""


class JournalVersionError(JournalReadError):
    """The journal was written by a newer loom_nb: it holds a migration or an event format this code
    does not know. The message names what was found and says to upgrade loom_nb; nothing was changed."""


class NonDeterminismError(JournalError):
    """A replayed step's effect or input differs from what the journal recorded."""


class ReplayDivergedError(JournalError):
    """A pure replay reached a step the journal does not hold, so it would have to run an effect."""


class EffectError(LoomError):
    """Raised around an effect call by the runtime or an interceptor."""


class EffectNotFoundError(EffectError, UsageError):
    """No effect is registered under the requested id."""


class NotAuthorizedError(EffectError):
    """The principal lacks a scope the effect requires. The effect was not invoked."""


class QuotaExceededError(EffectError):
    """A call would exceed a quota. The effect was not invoked."""


class RetriesExhaustedError(EffectError):
    """Every attempt the retry policy allowed failed; ``__cause__`` holds the last failure."""


class InDoubtError(EffectError):
    """A non-idempotent effect was cut in flight and its outcome is unknown."""


class OutcomeUnknownError(EffectError):
    """Raised by an effect that cannot tell whether its call took effect (the connection or the
    server died mid-call). The kernel parks a non-idempotent step on an ``InDoubt`` gate, as after a
    crash, so a person decides (it happened / run it again / fail); an idempotent one fails (and is
    retried when its retry policy says so). Retryable."""

    retryable = True


class EffectTimeout(OutcomeUnknownError):
    """An effect call (a tool's) ran past its timeout (``@tool(timeout=...)``, ``Agent(tool_timeout=...)``).

    The call was abandoned, not stopped: it may still be running or may have taken effect. An
    idempotent step fails with it (one ``step_failed``) and is retried when its retry policy allows;
    a non-idempotent one parks on an ``InDoubt`` gate for a person, as any ``OutcomeUnknownError``
    does. Retryable. The message names the tool, the step and the timeout, and the fix.
    """

    retryable = True


class PromptIntegrityError(EffectError):
    """A model request would put tainted (untrusted) text where the model obeys it."""


class ClaimCheckError(EffectError):
    """A claim-check envelope turned up where a real value is needed."""


class ToolArgumentsError(EffectError):
    """A tool call's arguments are not JSON or fail the tool's schema (sent back to the model)."""


class McpError(EffectError):
    """An MCP server or one of its tools failed; the message names the server and the tool."""


class McpToolError(McpError):
    """An MCP tool answered with ``isError``: a tool failure whose text the model reads."""


class McpServerGone(McpError, OutcomeUnknownError):
    """An MCP server's process or connection died during a call (or could not be reached). Retryable:
    the next attempt starts the server again."""

    retryable = True


class McpTimeout(McpServerGone):
    """An MCP server did not answer a call within its ``read_timeout``; the message names the server
    and the tool. The outcome is unknown, as for ``McpServerGone``."""


class McpToolsChangedError(McpError):
    """An MCP server's tool list changed since ``mcp_tools`` read it: the tool the run was given is
    gone or no longer what the model was told."""


class ProviderError(LoomError):
    """A model provider failed."""

    retryable: bool = False


class ProviderHTTPError(ProviderError):
    """The provider answered with an error status."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int = 0,
        body: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.retry_after = retry_after
        self.retryable = status_code in (408, 429) or status_code >= 500

    def __reduce__(self) -> Any:
        return (rebuild_error, (type(self), self.args, self.__dict__))


class ProviderTimeout(ProviderError):
    """The provider did not answer in time, or the connection failed. Retryable."""

    retryable = True
    retry_after: float | None = None


class ProviderProtocolError(ProviderError):
    """The provider's response or stream was malformed."""


class ProviderStreamCut(ProviderProtocolError):
    """A stream closed cleanly before its terminal event (``message_stop``, ``data: [DONE]``). Retryable.

    A connection reset mid-stream is a ``ProviderTimeout``; an early clean end of the body is the same
    fault seen from the other side (a proxy or load balancer closing an idle or long stream), so it is
    retried the same way. The partial answer is discarded: the retry asks for the whole answer again.
    """

    retryable = True


class AnswerTooLargeError(ProviderError):
    """A model step's answer text passed the agent's ``max_answer_chars`` (``loom_nb.agent.bounds``):
    the step fails (not retried) and the run stops. The message names the execution, the step and
    the limit."""


class AnswerCutError(ProviderError):
    """The model's final answer was cut off (its output token limit, or the provider's content
    filter) and the agent says ``when_cut="fail"``: the run fails. The message names the execution,
    the step and what cut it."""


class OutputValidationError(ProviderError):
    """The model's final answer failed the agent's ``output_type`` on its first try and on every one of
    the ``output_retries`` retries (each error was sent back to the model), or it refused or ran out
    of turns where a typed answer was due. The message names the execution, the attempts and the
    last validation error."""


def rebuild_error(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """An exception of type ``cls`` with ``args`` and attributes ``state``, without calling its
    ``__init__`` (how errors unpickle, and how journaled failures are re-raised on replay)."""
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class RecordedError(LoomError):
    """A journaled failure whose original exception type could not be rebuilt in this process.

    Attributes:
        type_name: The original exception's ``module:qualname``.
    """

    def __init__(self, message: str, *, type_name: str = "") -> None:
        super().__init__(message)
        self.type_name = type_name

    def __reduce__(self) -> Any:
        return (rebuild_error, (type(self), self.args, self.__dict__))


def registered(items: Mapping[str, _T], name: str, error: type[LoomError], what: str, fix: str) -> _T:
    """``items[name]``, or the error for a flow or effect this process has not registered (yet).

    Args:
        items: What is registered, by name.
        name: The name looked up.
        error: The error type raised when it is missing (``FlowNotFoundError``, ``EffectNotFoundError``).
        what: What is missing, as the message names it (``effect 'tools.x'``).
        fix: What the module does with it (``registers it``, ``defines it``): the message says to
            run the cell or import the module that does, then resume or recover.
    """
    try:
        return items[name]
    except KeyError:
        known = ", ".join(sorted(items)) or "none"
        raise error(
            f"no {what} is registered in this process (registered: {known}). "
            f"Run the cell or import the module that {fix}, then resume or recover."
        ) from None
