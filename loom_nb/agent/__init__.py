"""The durable agent loop (its rules: ``docs/design.md``, section 6) and its friendly facade."""

from loom_nb.agent.agent import Agent, InputIgnoredWarning
from loom_nb.agent.batch import Batch, BatchItem
from loom_nb.agent.chunking import DeltaChunker, chunk_deltas
from loom_nb.agent.config import (
    APPROVAL_GATE,
    AgentConfig,
    AgentResult,
    ApprovalDecision,
    Compaction,
    Routes,
    Skill,
)
from loom_nb.agent.gate import Gate
from loom_nb.agent.llm import llm_effect, summarizer_effect
from loom_nb.agent.loop import TranscriptGrowthWarning, agent_loop
from loom_nb.agent.memory import TieredMemory
from loom_nb.agent.output import OutputSpec
from loom_nb.agent.run import Run
from loom_nb.agent.session import Session
from loom_nb.agent.subagent_tool import AgentTool
from loom_nb.agent.transcript import RebuiltRequest, rebuild_requests

__all__ = [
    "APPROVAL_GATE",
    "Agent",
    "AgentConfig",
    "AgentResult",
    "AgentTool",
    "ApprovalDecision",
    "Batch",
    "BatchItem",
    "Compaction",
    "DeltaChunker",
    "Gate",
    "InputIgnoredWarning",
    "OutputSpec",
    "RebuiltRequest",
    "Routes",
    "Run",
    "Session",
    "Skill",
    "TieredMemory",
    "TranscriptGrowthWarning",
    "agent_loop",
    "chunk_deltas",
    "llm_effect",
    "rebuild_requests",
    "summarizer_effect",
]
