"""Model providers: the ``ModelProvider`` protocol, ``ScriptedModel`` and the HTTP clients."""

from loom_nb.providers.anthropic import AnthropicMessages
from loom_nb.providers.base import DeltaSink, ModelProvider
from loom_nb.providers.openai import OpenAIChat
from loom_nb.providers.responses import OpenAIResponses
from loom_nb.providers.scripted import ScriptedModel

__all__ = ["AnthropicMessages", "DeltaSink", "ModelProvider", "OpenAIChat", "OpenAIResponses", "ScriptedModel"]
