"""Drop run-varying metadata (cell execution timestamps) from executed tutorials, so that
re-executing them (`make notebooks`) changes only what the code changed."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat


def strip(path: Path) -> None:
    """Remove every cell's ``metadata.execution`` block in place."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        strip(Path(name))
