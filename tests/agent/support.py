"""Helpers for the agent-loop tests (import as ``from tests.agent.support import ...``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import loom_nb as loom
from loom_nb.agent import AgentConfig, agent_loop, llm_effect, rebuild_requests, summarizer_effect
from loom_nb.effects.guard import guard_request
from loom_nb.journal import ContentBlob, Event, EventKind, InMemoryJournal
from loom_nb.journal.store import JournalStore
from loom_nb.kernel import ExecutionContext, ExecutionResult, FlowRegistry
from loom_nb.messages import Message, ModelRequest, ModelResponse, ToolCall
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime
from loom_nb.testing import FakeClock, SequentialIds
from tests import stores

MODEL = "model.main"
SUMMARIZER = "model.summarizer"
FLOW = "agent"


def make_runtime(journal: JournalStore | None = None, **kwargs: Any) -> Runtime:
    """The assembled runtime (the effect ring) on a fake clock, sequential ids and a private flow
    registry, so tests never touch the process-wide one."""
    kwargs.setdefault("clock", FakeClock(tick=0.001))
    kwargs.setdefault("ids", SequentialIds())
    kwargs.setdefault("flows", FlowRegistry())
    return Runtime(journal if journal is not None else stores.default_journal(), **kwargs)


def register_model(rt: Runtime, model: Any, effect_id: str = MODEL, *, kind: str = "model", **options: Any) -> None:
    """Register ``model`` (a ``ScriptedModel``) as a model effect, as ``loom.Agent`` does."""
    make = summarizer_effect if kind == "summarizer" else llm_effect
    rt.effects.register(effect_id, make(model), kind=kind, idempotent=True, **options)


def install(rt: Runtime, config: AgentConfig, *, name: str = FLOW) -> str:
    """Register ``config``'s tools and a flow that runs ``agent_loop`` with it; returns the flow name."""
    for t in config.tools:
        t.register(rt.effects)

    async def body(ctx: ExecutionContext, input: Any) -> Any:
        return await agent_loop(ctx, config, input)

    return rt.flows.register(body, name)


async def run_agent(
    config: AgentConfig,
    model: Any,
    input: Any = "hello",
    *,
    rt: Runtime | None = None,
    summarizer: Any = None,
) -> tuple[Runtime, ExecutionResult]:
    """Register everything on a (new) runtime and start one run of ``config``."""
    rt = rt or make_runtime()
    if config.model is not None and config.model not in rt.effects:
        register_model(rt, model, config.model)
    if summarizer is not None and config.compaction is not None:
        register_model(rt, summarizer, config.compaction.effect_id, kind="summarizer")
    flow = install(rt, config)
    result = await rt.start(flow, input)
    return rt, result


# -- scripted models -------------------------------------------------------------------------------
def turn_of(request: ModelRequest) -> int:
    """How many assistant messages the request holds: the turn it is (without compaction)."""
    return sum(1 for m in request.messages if m.role == "assistant")


def calls(*pairs: tuple[str, dict[str, Any]], text: str = "") -> ModelResponse:
    """A response calling tools (ids ``call_<j>``)."""
    return ModelResponse.tool_calls(list(pairs), text=text)


def raw_call(name: str, raw: str, call_id: str = "call_0") -> ToolCall:
    """A tool call whose arguments did not parse as a JSON object."""
    return ToolCall(id=call_id, name=name, raw_arguments=raw)


class Counter:
    """A callable that counts its calls (for selectors, policies, summarizers)."""

    def __init__(self, answers: Sequence[Any]) -> None:
        self.answers = list(answers)
        self.calls: list[Any] = []

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args)
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


def summarizer_model(prefix: str = "SUMMARY") -> ScriptedModel:
    """A summarizer whose n-th summary is ``<prefix>-<n>: <k> messages`` (drifts on every call)."""
    count = [0]

    def summarize(request: ModelRequest) -> ModelResponse:
        count[0] += 1
        folded = [m for m in request.messages if m.role != "system"]
        return ModelResponse.text(f"{prefix}-{count[0]}: {len(folded)} messages")

    return ScriptedModel(summarize, name="summarizer")


# -- journal ---------------------------------------------------------------------------------------
def events(rt: Runtime, execution_id: str, kind: str | None = None) -> list[Event]:
    """The events of one execution (of one kind)."""
    return [e for e in rt.journal.read(execution_id) if kind is None or e.kind == kind]


def step_ids(rt: Runtime, execution_id: str, kind: str = EventKind.STEP_STARTED) -> list[str]:
    """Step ids of the events of ``kind``, in journal order (repeats kept)."""
    return [e.step_id or "" for e in events(rt, execution_id, kind)]


def first_started(rt: Runtime, execution_id: str, step_id: str) -> Event:
    """The first ``step_started`` of one step."""
    for e in events(rt, execution_id, EventKind.STEP_STARTED):
        if e.step_id == step_id:
            return e
    raise AssertionError(f"no step_started for {step_id!r}; steps: {step_ids(rt, execution_id)}")


def decisions(rt: Runtime, execution_id: str) -> dict[str, dict[str, Any]]:
    """Recorded decisions by id."""
    return {e.step_id or "": e.data for e in events(rt, execution_id, EventKind.DECISION_RECORDED)}


def data_bytes(evs: Iterable[Event]) -> int:
    """Journal payload size: the sum of each event's data as JSON."""
    return sum(len(json.dumps(e.data, separators=(",", ":"))) for e in evs)


def assert_rebuilt_matches(rt: Runtime, execution_id: str, model: ScriptedModel, *, guarded: bool = False) -> None:
    """Every model request, rebuilt from the journal alone, is what the model received, turn by turn.

    ``guarded``: compare after the prompt guard (the provider sees fenced tainted text).
    """
    rebuilt = rebuild_requests(rt.journal.read(execution_id))
    nodes = [sid for sid in step_ids(rt, execution_id) if sid in rebuilt]
    nodes = list(dict.fromkeys(nodes))
    assert len(nodes) == len(model.history), (nodes, len(model.history))
    for i, (sid, sent) in enumerate(zip(nodes, model.history, strict=True)):
        messages = rebuilt[sid].messages
        if guarded:
            messages = guard_request(ModelRequest(messages=messages)).messages
        assert messages == sent.messages, f"request {i} ({sid}) differs from what the model received"
        assert rebuilt[sid].tools == sent.tools, f"request {i} ({sid}) tools differ"


@dataclass
class BatchJournal:
    """An in-memory journal that remembers where each commit ended (event counts per execution),
    so a test can cut the log exactly where a crash after that commit would have left it."""

    inner: InMemoryJournal = field(default_factory=InMemoryJournal)
    boundaries: list[int] = field(default_factory=list)
    location: str = ":batches:"

    def append(self, evs: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        self.inner.append(evs, contents)
        if evs:
            self.boundaries.append(evs[-1].seq)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def prefix_journal(source: JournalStore, execution_id: str, upto_seq: int) -> InMemoryJournal:
    """A fresh journal holding the first ``upto_seq`` events of one execution (and every content
    blob the source holds, since blobs commit with or before the events that refer to them)."""
    journal = InMemoryJournal()
    evs = [e for e in source.read(execution_id) if e.seq <= upto_seq]
    blobs: list[ContentBlob] = []
    for digest in _content_digests(source):
        data = source.get_content(digest)
        info = source.content_info(digest)
        assert data is not None and info is not None
        blobs.append(ContentBlob(digest, data, info[1], info[2]))
    journal.append(evs, blobs)
    return journal


def _content_digests(source: JournalStore) -> list[str]:
    inner = getattr(source, "inner", source)
    if hasattr(inner, "pool"):  # a PostgresJournal
        with inner.pool.connection() as conn:
            return [row[0] for row in conn.execute("SELECT digest FROM content ORDER BY digest").fetchall()]
    assert isinstance(inner, InMemoryJournal), "prefix_journal copies content from an in-memory or PostgreSQL journal"
    return list(inner._content)


def user_texts(messages: Sequence[Message]) -> list[str]:
    """Texts of the user messages."""
    return [m.text for m in messages if m.role == "user"]


Responder = Callable[[ModelRequest], ModelResponse]


def tidy_tools(deleted: list[str]) -> tuple[loom.Tool, loom.Tool]:
    """The tools of the tidy agents (analysis and notebook tests): ``search`` finds
    ``/tmp/x/<query>.log``; ``delete_file`` needs approval and appends its path to ``deleted``."""

    @loom.tool
    def search(query: str) -> list[str]:
        """Search the files.

        Args:
            query: What to look for.
        """
        return [f"/tmp/x/{query}.log"]

    @loom.tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        deleted.append(path)
        return f"deleted {path}"

    return search, delete_file


def lookup_tool(seen: list[Any]) -> loom.Tool:
    """A ``lookup(city)`` tool that records every city it is called with ("Atlantis" raises)."""

    @loom.tool
    def lookup(city: str) -> str:
        """Look up the weather of a city.

        Args:
            city: The city.
        """
        seen.append(city)
        if city == "Atlantis":
            raise ValueError("no such city")
        return f"{city}: sunny"

    return lookup


def golden_runtime(journal: JournalStore, agent: loom.Agent[Any], event_format: int | None = None) -> Runtime:
    """The deterministic runtime every golden agent journal is recorded and replayed on (fake clock,
    sequential ids, seeded randomness), with ``agent`` registered, writing ``event_format`` (the
    runtime's default when None)."""
    from loom_nb.testing import SeededRandom

    rt = Runtime(journal, clock=FakeClock(tick=1.0), ids=SequentialIds(), random=SeededRandom(7), flows=FlowRegistry())
    if event_format is not None:
        rt.event_format = event_format
    agent.register(rt)
    return rt
