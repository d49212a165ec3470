"""Versioned agents: ``Agent.patch`` and the agent's check of recorded runs against its config.

``agent.patch("short-prompt", system="...")`` adds a version of the agent's configuration behind a
``ctx.patched("short-prompt")`` marker: a new run records the marker at its start and runs with the
newest version; a run recorded before the patch (no marker) replays and resumes with the version it
started with. ``Engine.check`` calls ``check_hook`` for every unfinished run of the agent: it compares
the system prompt and the tool schemas the run journaled on its first model turn with the ones the
run would send now, and names the change and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from loom_nb.agent.config import AgentConfig
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import canonical_json
from loom_nb.journal.events import EventKind
from loom_nb.kernel.check import CheckFinding
from loom_nb.kernel.flow_context import FlowContext
from loom_nb.kernel.history import History

#: The fix the agent's check suggests for a changed system prompt or tool schema.
AGENT_PATCH_FIX = (
    "restore the old {what}, or put the change behind a patch so recorded runs keep the old one and new "
    "runs take the new one: agent.patch('<change>', {option}=...); or fork the run before {step} (or "
    "start a new one)"
)


def effect_owner(flow_name: str, version: int) -> str:
    """The owner (``EffectSpec.owner``) of an agent version's effects: ``<flow>@<version>`` (0 is the
    agent as built). Never journaled: a step names its effect id; this only picks the body."""
    return f"{flow_name}@{version}"


class AgentVersions:
    """The configurations an agent has had, oldest first, each after the first behind a patch marker.

    Each version's configuration owns its effects (``AgentConfig.owner``, ``effect_owner``): a run
    calls the tool bodies of the version it runs with, never another version's of the same name.

    Args:
        base: The agent as built.
        flow_name: The agent's flow (``None``: the configurations keep the owner they have).

    Attributes:
        versions: ``(change, config)`` pairs; the first change is None (the agent as built).
    """

    def __init__(self, base: AgentConfig, flow_name: str | None = None) -> None:
        self.flow_name = flow_name
        self.versions: list[tuple[str | None, AgentConfig]] = [(None, self._owned(base, 0))]

    def _owned(self, config: AgentConfig, version: int) -> AgentConfig:
        if self.flow_name is None:
            return config
        owner = effect_owner(self.flow_name, version)
        # AgentConfig derives fields (an index of the tools) in __post_init__: rebuild, not copy.
        return config if config.owner == owner else replace(config, owner=owner)

    def replace_latest(self, config: AgentConfig) -> None:
        """Put ``config`` in place of the newest version (keeping that version's owner)."""
        change, _ = self.versions[-1]
        self.versions[-1] = (change, self._owned(config, len(self.versions) - 1))

    @property
    def latest(self) -> AgentConfig:
        """The configuration new runs use."""
        return self.versions[-1][1]

    @property
    def configs(self) -> list[AgentConfig]:
        """Every version's configuration (to register every tool a recorded run may call)."""
        return [c for _, c in self.versions]

    def add(self, change: str, **options: Any) -> AgentConfig:
        """Add a version: the newest configuration with ``options`` replaced, behind ``change``."""
        if any(change == c for c, _ in self.versions):
            raise ValueError(change)
        # AgentConfig derives fields (an index of the tools) in __post_init__: rebuild, not copy.
        config = self._owned(replace(self.latest, **options), len(self.versions))
        self.versions.append((change, config))
        return config

    def for_run(self, ctx: FlowContext) -> AgentConfig:
        """The configuration this run uses: each patch's marker asked in order (``ctx.patched``), so
        a new run records every marker and a recorded run keeps the version it started with."""
        config = self.versions[0][1]
        for change, patched in self.versions[1:]:
            assert change is not None
            if ctx.patched(change):
                config = patched
        return config

    def for_history(self, history: History) -> AgentConfig:
        """The configuration a re-run of ``history`` would use (what ``for_run`` gives it)."""
        if history.served_count() == 0 and all(s.settled for s in history.steps.values()):
            return self.latest  # nothing recorded to serve yet: every patch point is reached live
        config = self.versions[0][1]
        for change, patched in self.versions[1:]:
            assert change is not None
            if step_ids.patch_marker_id(change) in history.values:
                config = patched
        return config

    def check_hook(self, history: History) -> Sequence[CheckFinding]:
        """``Engine.check_hooks`` entry: a changed system prompt or tool schema, per recorded run."""
        nodes = [
            e
            for e in history.events
            if e.kind == EventKind.STEP_STARTED
            and step_ids.is_transcript_node(e.step_id or "")
            and isinstance(e.data.get("input"), dict)
        ]
        # The system prompt is in the first node (a compaction may come first); the tools are
        # journaled with the first model node.
        first = next((e for e in nodes if "tools" in e.data["input"]), None)
        if first is None:
            return []
        config = self.for_history(history)
        record = first.data["input"]
        step = first.step_id or ""
        findings: list[CheckFinding] = []
        recorded_system = _recorded_system(nodes[0].data["input"].get("add") or ())
        if recorded_system != config.system:
            findings.append(
                CheckFinding(
                    nodes[0].step_id,
                    f"the system prompt changed since the run started (recorded {_short(recorded_system)}, "
                    f"now {_short(config.system)})",
                    AGENT_PATCH_FIX.format(what="system prompt", option="system", step=nodes[0].step_id),
                )
            )
        recorded_tools = {t.get("name"): t for t in record.get("tools") or () if isinstance(t, dict)}
        specs = [t.spec for t in config.tools]
        output = config.output
        if output is not None and output.tool_spec is not None:
            specs.append(output.tool_spec)  # a typed answer's final_result tool is journaled with the tools
        now_tools = {s.name: s.model_dump(mode="json") for s in specs}
        changes = [f"{name!r} removed" for name in recorded_tools if name not in now_tools]
        changes += [f"{name!r} added" for name in now_tools if name not in recorded_tools]
        changes += [
            f"{name!r} has another schema or description"
            for name, spec in now_tools.items()
            if name in recorded_tools and canonical_json(spec) != canonical_json(recorded_tools[name])
        ]
        if changes:
            findings.append(
                CheckFinding(
                    step,
                    "the tools changed since the run started: " + "; ".join(changes),
                    AGENT_PATCH_FIX.format(what="tools", option="tools", step=step),
                )
            )
        recorded_output = record.get("output")
        now_output = output.record() if output is not None else None
        if canonical_json(recorded_output) != canonical_json(now_output):
            was = recorded_output.get("type") if isinstance(recorded_output, dict) else "str"
            now = now_output["type"] if now_output is not None else "str"
            detail = f"{was} -> {now}" if was != now else f"{now}, another mode or schema"
            findings.append(
                CheckFinding(
                    step,
                    f"the output type changed since the run started ({detail})",
                    AGENT_PATCH_FIX.format(what="output type", option="output_type", step=step),
                )
            )
        return findings


def _recorded_system(add: Sequence[Any]) -> str | None:
    for item in add:
        if isinstance(item, dict) and isinstance(item.get("msg"), dict):
            msg = item["msg"]
            return str(msg.get("text", "")) if msg.get("role") == "system" else None
    return None


def _short(text: str | None) -> str:
    if text is None:
        return "none"
    return repr(text if len(text) <= 60 else text[:57] + "...")
