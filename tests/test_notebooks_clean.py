"""The committed tutorials are clean: what ``pytest --nbval`` cannot see is checked here, from the files alone.

nbval re-runs each notebook and compares text outputs, but it does not look at error outputs of cells it
skips, images, widget state, metadata, or outputs it is told to ignore. So a tutorial could be committed
half-run, run out of order, run with an API key (real-model outputs in the file), with a plot that no
longer renders, or with widgets that JupyterLab cannot draw ("model not found"), and nbval would pass.
After editing a tutorial, run ``make notebooks`` (re-executes them in place, offline) and commit the result.

What nbval is told about a cell (skip it, ignore its output) is a tag in the cell's metadata, never a
``# NBVAL_...`` comment in the code a learner reads.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
import pytest

import loom_nb

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
TUTORIALS = sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
FIX = "re-run `make notebooks` and commit the notebooks it rewrites"
#: The cell tags nbval reads (``nbval.plugin.metadata_tags``) that the tutorials use: a misspelt one
#: would be ignored by nbval without a word.
NBVAL_TAGS = frozenset({"nbval-ignore-output", "nbval-skip", "nbval-raises-exception", "nbval-check-output"})


def load(path: Path) -> Any:
    return nbformat.read(path, as_version=4)


def code_cells(nb: Any) -> list[Any]:
    return [c for c in nb.cells if c.cell_type == "code"]


def tags(cell: Any) -> list[str]:
    return list(cell.metadata.get("tags", []))


def output_text(output: Any) -> str:
    if output.output_type == "stream":
        return str(output.text)
    if output.output_type in ("display_data", "execute_result"):
        return str(output.get("data", {}).get("text/plain", ""))
    if output.output_type == "error":
        return f"{output.ename}: {output.evalue}"
    return ""


def all_text(nb: Any) -> str:
    return "\n".join(output_text(o) for c in code_cells(nb) for o in c.outputs)


def test_the_tutorials_are_there() -> None:
    names = [p.name for p in TUTORIALS]
    assert names[:8] == [
        "01-quickstart.ipynb",
        "02-approval-gates.ipynb",
        "03-crash-and-recovery.ipynb",
        "04-decisions-and-replay.ipynb",
        "05-long-conversations.ipynb",
        "06-real-models.ipynb",
        "07-mcp-and-traces.ipynb",
        "08-batch-runs.ipynb",
    ]
    assert "09a-typed-output.ipynb" in names
    assert "09b-sub-agents.ipynb" in names
    assert "10-sessions-and-versioned-flows.ipynb" in names
    assert "11-shared-journal.ipynb" in names


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_a_tutorial_is_valid_and_runs_on_the_python3_kernel(path: Path) -> None:
    nb = load(path)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", f"{path.name}: kernel spec is not python3"
    assert nb.metadata.get("language_info", {}).get("name") == "python"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_every_code_cell_ran_once_in_order_without_errors(path: Path) -> None:
    cells = code_cells(load(path))
    assert all(c.source.strip() for c in cells), f"{path.name}: an empty code cell"
    counts = [c.execution_count for c in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{path.name}: execution counts {counts} are not 1..{len(cells)} (run out of order, or not run): {FIX}"
    )
    errors = [
        f"cell {i}: {o.ename}: {o.evalue}"
        for i, c in enumerate(cells, 1)
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert not errors, f"{path.name} holds error outputs: {errors}: {FIX}"
    stderr = [
        f"cell {i}: {o.text[:200]!r}"
        for i, c in enumerate(cells, 1)
        for o in c.outputs
        if o.output_type == "stream" and o.name == "stderr"
    ]
    assert not stderr, f"{path.name} shows warnings or errors on stderr: {stderr}"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_the_extension_is_loaded_at_most_once_on_a_journal_of_its_own(path: Path) -> None:
    """Two ``%load_ext loom_nb`` print "already loaded" and break nbval; two notebooks on one journal file
    would lock each other out (DuckDB allows one process per file). A tutorial on the shared PostgreSQL
    journal works in a schema of its own, ``tutorial_NN``, so it never reads another one's runs."""
    sources = "\n".join(c.source for c in code_cells(load(path)))
    assert len(re.findall(r"^%load_ext loom_nb\s*$", sources, flags=re.M)) <= 1, f"{path.name}: loaded twice"
    if "postgresql://" in sources:
        number = path.stem.split("-")[0]
        assert f'schema = "tutorial_{number}"' in sources and "DROP SCHEMA IF EXISTS" in sources, (
            f"{path.name}: work in a schema of its own, tutorial_{number}, emptied at the start"
        )
    elif "%load_ext loom_nb" in sources:
        assert f'Path(".journals/{path.stem}.duckdb")' in sources, (
            f"{path.name}: load the extension on its own journal, .journals/{path.stem}.duckdb"
        )


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_skipped_cells_were_stored_offline(path: Path) -> None:
    """nbval never runs a cell tagged ``nbval-skip``, so its stored output is never compared: it must be the
    offline one ("...: skipped"), never the answer of a real model run with a key set."""
    for i, cell in enumerate(code_cells(load(path)), 1):
        if "nbval-skip" not in tags(cell):
            continue
        text = "".join(output_text(o) for o in cell.outputs)
        kinds = {o.output_type for o in cell.outputs}
        assert kinds == {"stream"} and text.strip().endswith(": skipped"), (
            f"{path.name} cell {i} was stored with {text[:200]!r}, not skipped offline: {FIX} (it unsets the keys)"
        )


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_nbval_markers_are_cell_tags_not_comments(path: Path) -> None:
    """A ``# NBVAL_IGNORE_OUTPUT`` line is test noise in the code a learner reads: nbval reads the same
    marker from the cell's metadata (``"tags": ["nbval-ignore-output"]``), which JupyterLab keeps out of
    sight. A tag that looks like nbval's but is not one of its own would be ignored."""
    for i, cell in enumerate(code_cells(load(path)), 1):
        comments = re.findall(r"^\s*#\s*(NBVAL_[A-Z_]+|PYTEST_VALIDATE_[A-Z_]+)", cell.source, flags=re.M)
        assert not comments, f"{path.name} cell {i}: {comments} in the code: make it a tag in the cell's metadata"
        unknown = [t for t in tags(cell) if t.startswith("nbval") and t not in NBVAL_TAGS]
        assert not unknown, f"{path.name} cell {i}: nbval knows no tag {unknown} (it knows {sorted(NBVAL_TAGS)})"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_outputs_nbval_does_not_compare_are_current(path: Path) -> None:
    """Images and widgets are not compared by nbval: a figure must carry its PNG (else the notebook shows
    only ``<Figure size ...>``), and every widget output its state (else JupyterLab shows "model not
    found" until the notebook is run again)."""
    nb = load(path)
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for i, cell in enumerate(code_cells(nb), 1):
        for output in cell.outputs:
            data = output.get("data", {})
            if str(data.get("text/plain", "")).startswith("<Figure size"):
                assert "image/png" in data, f"{path.name} cell {i}: a figure stored without its image"
            if WIDGET_VIEW in data:
                model_id = data[WIDGET_VIEW]["model_id"]
                assert model_id in state, f"{path.name} cell {i}: widget {model_id} has no stored state: {FIX}"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_outputs_name_this_version_and_no_local_path(path: Path) -> None:
    text = all_text(load(path))
    for found in re.findall(r"loom[_-]nb(?: version|==| v)\s*(\d+\.\d+\.\d+\S*)", text):
        assert found == loom_nb.__version__, f"{path.name} was stored by loom_nb {found}: {FIX}"
    for local in (str(REPO), "/tmp/", "/home/"):
        assert local not in text, f"{path.name}: an output shows the local path {local!r} of the machine that ran it"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_links_between_tutorials_resolve(path: Path) -> None:
    for cell in load(path).cells:
        if cell.cell_type != "markdown":
            continue
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", cell.source):
            if "://" in target:
                continue
            assert (path.parent / target).exists(), f"{path.name}: the link {target!r} leads nowhere"


def test_the_sanitize_file_is_pairs_of_valid_regexes() -> None:
    text = (NOTEBOOKS / "sanitize.cfg").read_text()
    pairs = re.findall(r"^regex: (.*)$\n^replace: (.*)$", text, flags=re.M)
    regex_lines = re.findall(r"^regex: ", text, flags=re.M)
    assert pairs and len(pairs) == len(regex_lines), "every 'regex:' line needs a 'replace:' line right after it"
    for pattern, _ in pairs:
        re.compile(pattern)
    assert re.sub(pairs[0][0], pairs[0][1], "0f8fad5b-d9cb-469f-a165-70867728950e") == "UUID"
