"""Model providers: the ``ModelProvider`` protocol, ``ScriptedModel`` and the HTTP clients."""

from loom_nb.providers.base import DeltaSink, ModelProvider
from loom_nb.providers.scripted import ScriptedModel

__all__ = ["DeltaSink", "ModelProvider", "ScriptedModel"]
