"""Claim-check: a listed tool's result goes to the content store; the recorded and returned value
(what the model sees) is an envelope: a reference, a size, and a digest (by default a preview)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from loom_nb.errors import ClaimCheckError, UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import canonical_json, digest_bytes
from loom_nb.journal.events import ContentBlob
from loom_nb.journal.store import JournalStore
from loom_nb.kernel.effect_registry import EffectCall, EffectResult, EffectSpec, Next

ENVELOPE_KEY = "__loom_claim_check"
PREVIEW_CHARS = 256
_MODEL_KINDS = frozenset({"model", "summarizer"})


class ContentStore(Protocol):
    """Where claim-checked bytes go."""

    def put(self, data: bytes, *, media_type: str = "application/json", tainted: bool = False) -> str:
        """Store bytes durably; return their tagged digest."""
        ...

    def get(self, digest: str) -> bytes | None:
        """The bytes stored under ``digest``, or None."""
        ...


class JournalContentStore:
    """The journal's own ``content`` table as a ``ContentStore`` (each put is one commit)."""

    def __init__(self, journal: JournalStore) -> None:
        self.journal = journal

    def put(self, data: bytes, *, media_type: str = "application/json", tainted: bool = False) -> str:
        """Store bytes; return their digest."""
        digest = digest_bytes(data)
        self.journal.append([], [ContentBlob(digest, data, media_type, tainted)])
        return digest

    def get(self, digest: str) -> bytes | None:
        """Read bytes back."""
        return self.journal.get_content(digest)


def is_envelope(value: Any) -> bool:
    """True for a claim-check envelope."""
    return isinstance(value, Mapping) and value.get(ENVELOPE_KEY) is True


#: Leaves that are never an envelope nor hold one (checked before the slower ``Mapping`` test).
_LEAVES = frozenset({str, int, float, bool, type(None)})


def contains_envelope(value: Any) -> bool:
    """True when an envelope appears anywhere inside ``value``."""
    kind = type(value)
    if kind is dict:  # plain JSON (every journaled output): no ABC checks
        if value.get(ENVELOPE_KEY) is True:
            return True
        children: Any = value.values()
    elif kind is list:
        children = value
    elif kind in _LEAVES:
        return False
    elif is_envelope(value):
        return True
    elif isinstance(value, Mapping):
        children = value.values()
    elif isinstance(value, (list, tuple)):
        children = value
    else:
        return False
    # A leaf is skipped here, not in a call (a model result is checked at every turn: a call, or a
    # generator, per value cost more than the walk itself).
    for child in children:  # noqa: SIM110 (a generator is what this loop saves)
        if type(child) not in _LEAVES and contains_envelope(child):
            return True
    return False


def default_preview(text: str) -> dict[str, Any]:
    """The default digest: the first 256 characters of the result's JSON."""
    return {"preview": text[:PREVIEW_CHARS], "truncated": len(text) > PREVIEW_CHARS}


@dataclass(frozen=True, kw_only=True)
class ClaimCheck:
    """Offload the results of the listed tools to a content store (one-line opt-in on an agent).

    Attributes:
        tool_ids: Tool names or effect ids whose results are offloaded. List only tools whose
            output the model does not need in full: it sees the envelope, never the bytes.
        store: Where bytes go; None: the runtime's journal ``content`` table.
        digests: Per tool, a projection ``result -> JSON`` the model sees instead of the preview.
        preview: Give the default preview digest (False: a bare reference).
    """

    tool_ids: Iterable[str]
    store: ContentStore | None = None
    digests: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    preview: bool = True

    def covers(self, effect_id: str) -> bool:
        """True when ``effect_id`` (or its tool name) is listed."""
        ids = set(self.tool_ids)
        return effect_id in ids or step_ids.tool_name(effect_id) in ids

    def envelope(self, effect_id: str, output: Any, *, tainted: bool, store: ContentStore) -> dict[str, Any]:
        """Store ``output`` and build its envelope."""
        text = canonical_json(output)
        data = text.encode("utf-8")
        ref = store.put(data, media_type="application/json", tainted=tainted)
        env: dict[str, Any] = {ENVELOPE_KEY: True, "ref": ref, "size": len(data), "tool": effect_id}
        if tainted:
            env["tainted"] = True
            return env
        name = step_ids.tool_name(effect_id)
        project = self.digests.get(effect_id) or self.digests.get(name)
        if project is not None:
            env["digest"] = project(output)
        elif self.preview:
            env["digest"] = default_preview(text)
        return env


class ClaimCheckInterceptor:
    """The ring's claim-check link for one ``ClaimCheck`` configuration.

    Args:
        config: What to offload.
        store: The store to use when the config names none.
        owner: Acts only on the effects this owner registered (``EffectSpec.owner``: one agent's
            tools, never another agent's of the same name); None: on every effect.
    """

    def __init__(self, config: ClaimCheck, store: ContentStore, owner: str | None = None) -> None:
        self.config = config
        self.store = config.store or store
        self.owner = owner

    def acts_on(self, spec: EffectSpec) -> bool:
        """A model or compaction call is checked for envelopes; a tool only when the config lists it;
        either only when it is the owner's."""
        if self.owner is not None and spec.owner != self.owner:
            return False
        return spec.kind in _MODEL_KINDS or self.config.covers(spec.effect_id)

    async def __call__(self, call: EffectCall, next: Next) -> EffectResult:
        """Offload a listed tool's result; refuse an envelope as a model or compaction result."""
        if not self.acts_on(call.spec):  # a registry that binds every link calls it for every effect
            return await next(call)
        effect_id = call.spec.effect_id
        if call.spec.kind in _MODEL_KINDS and self.config.covers(effect_id):
            raise ClaimCheckError(
                f"claim_check.tool_ids lists {effect_id!r}, a {call.spec.kind} effect: a model or compaction "
                "result must reach the loop whole, never as an envelope. Remove it from claim_check.tool_ids "
                f"(now {sorted(self.config.tool_ids)})."
            )
        result = await next(call)
        if call.spec.kind in _MODEL_KINDS:
            if contains_envelope(result.output):
                raise ClaimCheckError(
                    f"the {call.spec.kind} effect {effect_id!r} returned a claim-check envelope; a model or "
                    "compaction result must be whole. Check claim_check.tool_ids "
                    f"(now {sorted(self.config.tool_ids)}): it may list only tools."
                )
            return result
        if not self.config.covers(effect_id):
            return result
        env = self.config.envelope(effect_id, result.output, tainted=result.tainted, store=self.store)
        return EffectResult(output=env, usage=result.usage, tainted=result.tainted)


def resolve(envelope: Mapping[str, Any], store: ContentStore | JournalStore) -> Any:
    """The value an envelope stands for (for analysis; never feed it back to the model)."""
    import json

    if not is_envelope(envelope):
        raise UsageError("resolve() takes a claim-check envelope (a dict with '__loom_claim_check': true)")
    ref = str(envelope["ref"])
    data = store.get_content(ref) if isinstance(store, JournalStore) else store.get(ref)
    if data is None:
        raise UsageError(f"the content {ref} is not in the store")
    return json.loads(data)
