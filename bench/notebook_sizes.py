"""Saved tutorial sizes: each executed tutorial's file size, the size of its saved widget state, and
how many widget models it holds, of which how many no displayed output reaches (left behind by a
view that removed a widget without closing it).

Usage: ``.venv/bin/python bench/notebook_sizes.py [NOTEBOOK ...]`` (default: every tutorial).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sizes(path: Path) -> dict[str, int]:
    """The file's bytes, its widget state's bytes, its models, and the unreached models and bytes."""
    raw = path.read_bytes()
    nb = json.loads(raw)
    saved = nb.get("metadata", {}).get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    state = saved.get("state", {})
    roots = [
        o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
        for c in nb["cells"]
        for o in c.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    reached: set[str] = set()
    stack = [r for r in roots if r in state]
    while stack:
        model = stack.pop()
        if model not in reached:
            reached.add(model)
            stack += [m for m in re.findall(r"IPY_MODEL_([0-9a-f]+)", json.dumps(state[model])) if m in state]
    unreached = [m for m in state if m not in reached]
    return {
        "file": len(raw),
        "widget_state": len(json.dumps(saved).encode()),
        "models": len(state),
        "unreached": len(unreached),
        "unreached_bytes": sum(len(json.dumps(state[m]).encode()) for m in unreached),
    }


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]] or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    print(f"{'notebook':45} {'file':>9} {'widgets':>9} {'models':>7} {'unreached':>10}")
    for path in paths:
        s = sizes(path)
        print(
            f"{path.name:45} {s['file']:>9,} {s['widget_state']:>9,} {s['models']:>7} "
            f"{s['unreached']:>4} ({s['unreached_bytes']:,} B)"
        )


if __name__ == "__main__":
    main()
