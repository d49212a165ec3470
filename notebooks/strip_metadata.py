"""Drop run-varying metadata (cell execution timestamps) from executed tutorials, so that
re-executing them (`make notebooks`) changes only what the code changed, and drop the saved widget
models no output reaches (widgets a view closed: nbclient keeps the last state of every model it
saw, closed or not, where JupyterLab saves only the open ones)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import nbformat

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def drop_unreached_widgets(nb: Any) -> int:
    """Remove from ``nb``'s saved widget state every model that no displayed widget reaches (through
    the model ids its state holds, children, layout and style included). Returns how many went."""
    saved = nb.metadata.get("widgets", {}).get(WIDGET_STATE)
    if not saved or "state" not in saved:
        return 0
    state = saved["state"]
    stack = [
        o["data"][WIDGET_VIEW]["model_id"]
        for c in nb.cells
        for o in c.get("outputs", [])
        if WIDGET_VIEW in o.get("data", {})
    ]
    reached: set[str] = set()
    while stack:
        model = stack.pop()
        if model in state and model not in reached:
            reached.add(model)
            stack += re.findall(r"[0-9a-f]{32}", json.dumps(state[model]))
    unreached = [m for m in state if m not in reached]
    for m in unreached:
        del state[m]
    return len(unreached)


def strip(path: Path) -> None:
    """Remove every cell's ``metadata.execution`` block and the unreached widget models, in place."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    drop_unreached_widgets(nb)
    nbformat.write(nb, path)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        strip(Path(name))
