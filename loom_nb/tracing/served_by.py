"""Who serves a model effect, for its spans: the provider's model, its name in the GenAI semantic
conventions and the server it calls, read from the providers the runtime's agents registered.

The journal names a model step by its effect id (``model.weather``) and holds the request's own
``model`` only when the request set one: the provider's configured model (``gpt-4o-mini``) and its
server live on the provider. A trace exported in the process that ran the agent (or one where the
agent's cell ran again) names them; one exported where no such agent is registered falls back to
the effect id, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from loom_nb.journal.events import Event, EventKind

#: A provider's ``name`` -> ``gen_ai.provider.name`` (the conventions' well-known values).
PROVIDER_NAMES: Final = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic"}


@dataclass(frozen=True)
class ServedBy:
    """What serves one model effect.

    Attributes:
        model: The model the provider asks for when the request names none.
        provider: ``gen_ai.provider.name`` (None when the provider has no conventions name).
        address: The server's host (``server.address``).
        port: The server's port (``server.port``), the scheme's default when the URL names none.
    """

    model: str
    provider: str | None
    address: str | None
    port: int | None


def served_by(provider: Any) -> ServedBy | None:
    """What ``provider`` serves, for an HTTP provider (one with a ``model`` and a ``base_url``);
    None for any other (``ScriptedModel`` calls no server and names no model)."""
    model, base_url = getattr(provider, "model", None), getattr(provider, "base_url", None)
    if not isinstance(model, str) or not model or not isinstance(base_url, str):
        return None
    url = urlsplit(base_url)
    port = url.port if url.port is not None else {"https": 443, "http": 80}.get(url.scheme)
    return ServedBy(model, PROVIDER_NAMES.get(str(getattr(provider, "name", ""))), url.hostname, port)


def served_for(agents: Mapping[str, Any], events: Sequence[Event]) -> dict[str, ServedBy]:
    """The model effects of the execution ``events`` belong to, by effect id, as the agent
    registered for its flow serves them (empty when none is registered here)."""
    started = next((e for e in events if e.kind == EventKind.EXECUTION_STARTED), None)
    agent = agents.get(str(started.data.get("flow", ""))) if started is not None else None
    providers = getattr(agent, "providers", None)
    if not isinstance(providers, Mapping):
        return {}
    found = {effect: served_by(p) for effect, p in providers.items()}
    return {effect: s for effect, s in found.items() if s is not None}
