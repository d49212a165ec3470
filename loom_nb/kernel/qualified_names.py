"""Persisted ``module:qualname`` names (error types, resume schemas), looked back up in this process.

Nothing read from a journal imports a module: a name is found only in a module this process has
already loaded, so a crafted journal that names ``this:Zen`` or any other module runs none of its
code. A type whose module is not loaded decodes to a generic record (errors) or asks the user to
define it first (gate schemas).
"""

from __future__ import annotations

import sys
from typing import Any


def find_loaded(name: str) -> Any:
    """The object a persisted ``module:qualname`` names, from a module this process already loaded.

    Raises:
        LookupError: the module is not loaded (it is never imported here), or has no such attribute.
    """
    module_name, _, qualname = name.partition(":")
    module = sys.modules.get(module_name)
    if module is None or not qualname:
        raise LookupError(name)
    obj: Any = module
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise LookupError(name) from None
    return obj
