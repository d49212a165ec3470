"""The documentation site builds with ``mkdocs build --strict`` (mkdocs.yml): a broken link between
pages, a link to a file that exists neither in the site nor in the repository, a docstring griffe
cannot read (an Args entry the signature does not have) or an unresolved cross-reference fails it.
The site holds the README as its home page, the guides, every tutorial with its stored outputs
(a live view as its text form), and the API reference of each ``__all__``."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: The packages whose ``__all__`` the API reference renders, and the page of each.
REFERENCE = {
    "loom_nb": "docs/reference/index.html",
    "loom_nb.testing": "docs/reference/testing/index.html",
    "loom_nb.analysis": "docs/reference/analysis/index.html",
    "loom_nb.effects": "docs/reference/effects/index.html",
    "loom_nb.journal": "docs/reference/journal/index.html",
    "loom_nb.tracing": "docs/reference/tracing/index.html",
}
#: Exported names the reference renders under another id, and why: griffe reads a name that shadows
#: a module of the same name in its package as that module, so the page renders the object itself.
RENDERED_AS = {
    "loom_nb.tool": ("loom_nb.effects.tool.tool", "docs/reference/index.html"),
    "loom_nb.effects.tool": ("loom_nb.effects.tool.tool", "docs/reference/index.html"),
    "loom_nb.analysis.frames": ("loom_nb.analysis.frames.frames", "docs/reference/analysis/index.html"),
    "loom_nb.tracing": ("loom_nb.tracing", "docs/reference/tracing/index.html"),  # a module: its page
}


@pytest.mark.slow
def test_the_site_builds_strict_with_every_page(tmp_path: Path) -> None:
    site = tmp_path / "site"
    mkdocs = Path(sys.executable).with_name("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr

    home = (site / "index.html").read_text()
    assert "Durable AI agent loops inside Jupyter." in home
    assert 'href="docs/design/"' in home  # README.md's link to docs/design.md, as a page of the site
    for guide in ("design", "effects", "providers", "analysis", "performance"):
        assert (site / "docs" / guide / "index.html").is_file()
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        page = (site / "notebooks" / notebook.stem / "index.html").read_text()
        assert "jp-OutputArea" in page, notebook.name  # rendered with its stored outputs
        # a live view shows its text form, not a widget that needs JavaScript from a CDN
        assert "widget-view+json" not in page and "unpkg.com" not in page, notebook.name
    quickstart = (site / "notebooks" / "01-quickstart" / "index.html").read_text()
    assert "loom run quickstart-1 (agent:tidy): completed" in quickstart
    # A repository file that is not a page links to the repository.
    assert "/blob/main/tests/README.md" in (site / "CONTRIBUTING" / "index.html").read_text()

    for package, page in REFERENCE.items():
        for name in importlib.import_module(package).__all__:
            anchor, where = RENDERED_AS.get(f"{package}.{name}", (f"{package}.{name}", page))
            assert f'id="{anchor}"' in (site / where).read_text(), f"{package}.{name} is not in {where}"
