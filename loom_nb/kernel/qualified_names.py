"""Persisted ``module:qualname`` names (error types, resume schemas), looked back up in this process."""

from __future__ import annotations

import importlib
from typing import Any


def import_qualified(name: str) -> Any:
    """The object a persisted ``module:qualname`` names, importing the module if needed.

    Raises:
        LookupError: the module or the attribute does not exist in this process.
    """
    module_name, _, qualname = name.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception as exc:
        raise LookupError(name) from exc
    return obj
