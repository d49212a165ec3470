"""loom_nb: durable AI agent loops inside Jupyter, journaled step by step in DuckDB.

    import loom_nb as loom
    rt = loom.Runtime.open("loom.duckdb")
    agent = loom.Agent(model=loom.ScriptedModel([...]), tools=[...], system="...")
    run = agent.start("question", runtime=rt)

``%load_ext loom_nb`` in a notebook opens the default runtime and the live views.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loom_nb import tracing  # OpenTelemetry itself is imported only when an export starts
from loom_nb.agent import (
    Agent,
    AgentConfig,
    AgentResult,
    AgentTool,
    ApprovalDecision,
    Batch,
    BatchItem,
    Compaction,
    Gate,
    InputIgnoredWarning,
    Routes,
    Run,
    Session,
    Skill,
    TieredMemory,
    TranscriptGrowthWarning,
    agent_loop,
    chunk_deltas,
    llm_effect,
    rebuild_requests,
    summarizer_effect,
)
from loom_nb.agent.batch import set_frame_builder
from loom_nb.agent.step import agent_step
from loom_nb.effects import ClaimCheck, EffectContext, Principal, Quota, RetryPolicy, Tool, tool
from loom_nb.effects.mcp import mcp_tools
from loom_nb.errors import (
    ChildExecutionError,
    ClaimCheckError,
    EffectError,
    EffectTimeout,
    FlowNotFoundError,
    InDoubtError,
    JournalCorruptError,
    JournalError,
    JournalLockedError,
    JournalReadError,
    JournalWriteError,
    LeaseLostError,
    LoomError,
    McpError,
    McpServerGone,
    McpToolError,
    McpToolsChangedError,
    NonDeterminismError,
    NotAuthorizedError,
    OutcomeUnknownError,
    OutputValidationError,
    PromptIntegrityError,
    ProviderError,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderStreamCut,
    ProviderTimeout,
    QuotaExceededError,
    ResumeValidationError,
    RetriesExhaustedError,
    RunCancelledError,
    StaleApprovalError,
    UsageError,
    WaitInterrupted,
)
from loom_nb.kernel import (
    CheckReport,
    Decision,
    ExecutionCheck,
    ExecutionContext,
    FlowContext,
    GateRequest,
    InDoubtResolution,
    flow,
)
from loom_nb.messages import ImageRef, Message, ModelRequest, ModelResponse, ReasoningBlock, ToolCall, Usage
from loom_nb.providers import LAZY as _LAZY_PROVIDERS
from loom_nb.providers import ModelProvider, ScriptedModel
from loom_nb.runtime import Runtime, default_runtime, set_default_runtime
from loom_nb.version import __version__
from loom_nb.worker import Worker

if TYPE_CHECKING:
    from loom_nb.providers.anthropic import AnthropicMessages
    from loom_nb.providers.openai import OpenAIChat
    from loom_nb.providers.responses import OpenAIResponses


def __getattr__(name: str) -> Any:
    # The HTTP providers (and httpx) load on first use of their name: a notebook on ScriptedModel
    # never pays for them (``loom_nb.providers.LAZY``).
    if name in _LAZY_PROVIDERS:
        from loom_nb import providers

        value = getattr(providers, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def frames(runtime: Runtime | None = None) -> Any:
    """The journal as pandas DataFrames (``steps``, ``gates``, ``decisions``...)."""
    from loom_nb.analysis import frames as _frames

    return _frames(runtime)


def _batch_frame(batch: Batch) -> Any:
    # Batch.frame()'s builder (and the text a script prints) until loom_nb.analysis is imported (it
    # registers its own): pandas is loaded only when a frame is asked for.
    from loom_nb.analysis.batch import batch_frame

    return batch_frame(batch)


def _batch_text(batch: Batch) -> str:
    from loom_nb.analysis.batch import batch_text

    return batch_text(batch)


set_frame_builder(_batch_frame, _batch_text)


def timeline(execution_id: str, *, runtime: Runtime | None = None) -> Any:
    """A live step timeline widget for one execution (in a notebook)."""
    from loom_nb.notebook.timeline import timeline as _timeline

    return _timeline(execution_id, runtime=runtime)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext loom_nb``: open the default runtime and register the magics."""
    from loom_nb.notebook.magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext loom_nb``: close the default runtime."""
    from loom_nb.notebook.magics import unload_ipython_extension as _unload

    _unload(ipython)


__all__ = [
    "Agent",
    "AgentConfig",
    "AgentResult",
    "AgentTool",
    "AnthropicMessages",
    "ApprovalDecision",
    "Batch",
    "BatchItem",
    "CheckReport",
    "ChildExecutionError",
    "ClaimCheck",
    "ClaimCheckError",
    "Compaction",
    "Decision",
    "EffectContext",
    "EffectError",
    "EffectTimeout",
    "ExecutionCheck",
    "ExecutionContext",
    "FlowContext",
    "FlowNotFoundError",
    "Gate",
    "GateRequest",
    "ImageRef",
    "InDoubtError",
    "InDoubtResolution",
    "InputIgnoredWarning",
    "JournalCorruptError",
    "JournalError",
    "JournalLockedError",
    "JournalReadError",
    "JournalWriteError",
    "LeaseLostError",
    "LoomError",
    "McpError",
    "McpServerGone",
    "McpToolError",
    "McpToolsChangedError",
    "Message",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "NonDeterminismError",
    "NotAuthorizedError",
    "OpenAIChat",
    "OpenAIResponses",
    "OutcomeUnknownError",
    "OutputValidationError",
    "Principal",
    "PromptIntegrityError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderProtocolError",
    "ProviderStreamCut",
    "ProviderTimeout",
    "Quota",
    "QuotaExceededError",
    "ReasoningBlock",
    "ResumeValidationError",
    "RetriesExhaustedError",
    "RetryPolicy",
    "Routes",
    "Run",
    "RunCancelledError",
    "Runtime",
    "ScriptedModel",
    "Session",
    "Skill",
    "StaleApprovalError",
    "TieredMemory",
    "Tool",
    "ToolCall",
    "TranscriptGrowthWarning",
    "Usage",
    "UsageError",
    "WaitInterrupted",
    "Worker",
    "__version__",
    "agent_loop",
    "agent_step",
    "chunk_deltas",
    "default_runtime",
    "flow",
    "frames",
    "llm_effect",
    "load_ipython_extension",
    "mcp_tools",
    "rebuild_requests",
    "set_default_runtime",
    "summarizer_effect",
    "timeline",
    "tool",
    "tracing",
    "unload_ipython_extension",
]
