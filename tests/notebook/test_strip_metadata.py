"""``notebooks/strip_metadata.py``: a saved tutorial keeps only the widget models its outputs reach
(nbclient saves every model it saw, closed ones too)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parents[2]


def strip_module() -> Any:
    spec = importlib.util.spec_from_file_location("strip_metadata", ROOT / "notebooks" / "strip_metadata.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model(n: int) -> str:
    return f"{n:032x}"


def test_models_no_output_reaches_are_dropped_and_the_rest_kept(tmp_path: Path) -> None:
    m = strip_module()
    state = {
        model(1): {
            "model_name": "VBoxModel",
            "state": {"children": [f"IPY_MODEL_{model(2)}"], "layout": f"IPY_MODEL_{model(3)}"},
        },
        model(2): {
            "model_name": "HTMLModel",
            "state": {"layout": f"IPY_MODEL_{model(3)}", "style": f"IPY_MODEL_{model(4)}"},
        },
        model(3): {"model_name": "LayoutModel", "state": {}},
        model(4): {"model_name": "HTMLStyleModel", "state": {}},
        model(5): {"model_name": "HTMLModel", "state": {"layout": f"IPY_MODEL_{model(6)}"}},  # a closed card
        model(6): {"model_name": "LayoutModel", "state": {}},
    }
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {m.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    out = nbformat.v4.new_output("display_data", data={m.WIDGET_VIEW: {"model_id": model(1)}, "text/plain": "v"})
    nb.cells.append(nbformat.v4.new_code_cell("v", outputs=[out], execution_count=1))
    nb.cells[0].metadata["execution"] = {"iopub.status.busy": "2026-12-03T14:00:00Z"}
    nb.cells[0].metadata["tags"] = ["nbval-ignore-output"]  # what nbval reads: kept
    path = tmp_path / "t.ipynb"
    nbformat.write(nb, path)
    m.strip(path)
    saved = nbformat.read(path, as_version=4)
    assert sorted(saved.metadata["widgets"][m.WIDGET_STATE]["state"]) == [model(1), model(2), model(3), model(4)]
    assert "execution" not in saved.cells[0].metadata
    assert saved.cells[0].metadata["tags"] == ["nbval-ignore-output"]
