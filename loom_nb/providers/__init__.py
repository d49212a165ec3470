"""Model providers: the ``ModelProvider`` protocol, ``ScriptedModel`` and the HTTP clients.

The HTTP clients (``OpenAIChat``, ``OpenAIResponses``, ``AnthropicMessages``) and httpx under them
are imported on first use of their name, so ``import loom_nb`` and a notebook that only runs
``ScriptedModel`` never load them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from loom_nb.providers.base import DeltaSink, ModelProvider
from loom_nb.providers.scripted import ScriptedModel

if TYPE_CHECKING:
    from loom_nb.providers.anthropic import AnthropicMessages
    from loom_nb.providers.openai import OpenAIChat
    from loom_nb.providers.responses import OpenAIResponses

#: The names imported on first use, by the module that defines each.
LAZY = {
    "AnthropicMessages": "loom_nb.providers.anthropic",
    "OpenAIChat": "loom_nb.providers.openai",
    "OpenAIResponses": "loom_nb.providers.responses",
}


def __getattr__(name: str) -> Any:
    module = LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["AnthropicMessages", "DeltaSink", "ModelProvider", "OpenAIChat", "OpenAIResponses", "ScriptedModel"]
