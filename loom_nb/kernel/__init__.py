"""The durable kernel: ``Engine``, flows, ``FlowContext`` / ``ExecutionContext``, gates, decisions, replay,
recovery.

The kernel never imports the agent, providers, the notebook layer, httpx, IPython or pandas.
"""

from loom_nb.kernel.check import CheckFinding, CheckReport, ExecutionCheck
from loom_nb.kernel.context import ExecutionContext, InDoubtResolution
from loom_nb.kernel.decisions import Decision
from loom_nb.kernel.effect_registry import (
    Durability,
    EffectCall,
    EffectContext,
    EffectRegistry,
    EffectResult,
    EffectSpec,
    Interceptor,
    Next,
    Principal,
)
from loom_nb.kernel.engine import Engine, ExecutionResult, GateAnswer, ReplayReport
from loom_nb.kernel.flow_context import FlowContext
from loom_nb.kernel.flows import FLOWS, FlowRegistry, flow
from loom_nb.kernel.gates import GateRequest, OpenGate, Suspend
from loom_nb.kernel.journal_writer import JournalWriter
from loom_nb.kernel.stream_commits import DEFERRED, PROMPT, StreamCommits

__all__ = [
    "DEFERRED",
    "FLOWS",
    "PROMPT",
    "CheckFinding",
    "CheckReport",
    "Decision",
    "Durability",
    "EffectCall",
    "EffectContext",
    "EffectRegistry",
    "EffectResult",
    "EffectSpec",
    "Engine",
    "ExecutionCheck",
    "ExecutionContext",
    "ExecutionResult",
    "FlowContext",
    "FlowRegistry",
    "GateAnswer",
    "GateRequest",
    "InDoubtResolution",
    "Interceptor",
    "JournalWriter",
    "Next",
    "OpenGate",
    "Principal",
    "ReplayReport",
    "StreamCommits",
    "Suspend",
    "flow",
]
