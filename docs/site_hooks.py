"""MkDocs hooks for the documentation site (``mkdocs.yml`` names this file; it is not a page).

The guides are written to be read in the repository: README.md at the top, the guides under
``docs/``, the tutorials under ``notebooks/``, and their links are relative to those places. The
site keeps the same layout, so every such link resolves in the site exactly as in the repository:

- ``on_files`` places ``docs/*`` at ``docs/...`` (not at the site's root), and adds README.md (the
  home page), CONTRIBUTING.md, CHANGELOG.md and ``notebooks/*.ipynb`` from the repository root,
  read in place (no copy that could drift).
- A tutorial is rendered without its saved widget state (``metadata.widgets``, read from a copy
  made for the build and removed after it): each live view and card then shows the text form every
  loom widget output stores beside it (``text/plain``), where the state alone would need the
  widgets' JavaScript from a CDN, and loom's own, to show anything.
- A link to a file of the repository that is not a page of the site (``loom_nb/...``,
  ``tests/README.md``) becomes a link to that file in the repository (``repo_url``), when the file
  exists; a link to anything that exists neither in the site nor in the repository is left as
  written, so ``mkdocs build --strict`` still fails on it (``validation.links.not_found``).
"""

from __future__ import annotations

import json
import posixpath
import tempfile
import xml.etree.ElementTree as etree
from pathlib import Path
from typing import Any

from markdown import Extension, Markdown
from markdown.treeprocessors import Treeprocessor
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

REPO = Path(__file__).resolve().parent.parent
#: Files of the repository root that are pages of the site (README.md is the home page).
ROOT_PAGES = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")
#: Where the tutorials are, relative to the repository root.
NOTEBOOKS = "notebooks"
_SITE: dict[str, Any] = {"page": None, "files": None, "repo_url": "", "scratch": None}


def _without_widget_state(notebook: Path, copy: Path) -> None:
    """Writes ``notebook`` to ``copy`` without ``metadata.widgets``."""
    data = json.loads(notebook.read_text(encoding="utf-8"))
    data.get("metadata", {}).pop("widgets", None)
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(json.dumps(data), encoding="utf-8")


@event_priority(100)  # before mkdocs-jupyter's on_files, so that it sees the tutorials
def on_files(files: Files, config: MkDocsConfig) -> Files:
    """The site's files at their repository paths (see the module docstring)."""
    site_dir, urls = config.site_dir, config.use_directory_urls
    docs_dir = Path(config.docs_dir).resolve()
    placed = [
        File(f"docs/{file.src_uri}", str(REPO), site_dir, urls, inclusion=file.inclusion)
        if file.src_dir and Path(file.src_dir).resolve() == docs_dir
        else file  # the theme's assets
        for file in files
    ]
    placed += [File(name, str(REPO), site_dir, urls) for name in ROOT_PAGES]
    scratch = tempfile.TemporaryDirectory(prefix="loom-docs-")
    _SITE["scratch"] = scratch
    for nb in sorted((REPO / NOTEBOOKS).glob("*.ipynb")):
        _without_widget_state(nb, Path(scratch.name) / NOTEBOOKS / nb.name)
        placed.append(File(f"{NOTEBOOKS}/{nb.name}", scratch.name, site_dir, urls))
    _SITE["files"] = {file.src_uri for file in placed}
    _SITE["repo_url"] = (config.repo_url or "").rstrip("/")
    return Files(placed)


def on_post_build(config: MkDocsConfig) -> None:
    """Removes the tutorials' copies made for the build."""
    if _SITE["scratch"] is not None:
        _SITE["scratch"].cleanup()
        _SITE["scratch"] = None


def on_page_markdown(markdown: str, page: Page, **kwargs: Any) -> str:
    """Remember the page being rendered (its links are relative to it)."""
    _SITE["page"] = page
    return markdown


class _RepositoryLinks(Treeprocessor):
    """Points a link at a repository file that is not in the site to the file in the repository."""

    def run(self, root: etree.Element) -> None:
        page = _SITE["page"]
        if page is None or not _SITE["repo_url"]:
            return
        for element in root.iter():
            attribute = {"a": "href", "img": "src"}.get(element.tag)
            if attribute is None:
                continue
            target = element.get(attribute)
            if not target or "://" in target or target.startswith(("#", "/", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page.file.src_uri), path))
            if resolved in _SITE["files"] or resolved.startswith("..") or not (REPO / resolved).exists():
                continue  # a page or file of the site, or broken: mkdocs checks it
            kind = "tree" if (REPO / resolved).is_dir() else "blob"
            url = f"{_SITE['repo_url']}/{kind}/main/{resolved}" + (f"#{anchor}" if anchor else "")
            element.set(attribute, url)


class _RepositoryLinksExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:
        md.treeprocessors.register(_RepositoryLinks(md), "loom_repository_links", 1)  # before mkdocs' relpath (0)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Adds the repository-links step to every page's Markdown."""
    config.markdown_extensions.append(_RepositoryLinksExtension())
    return config
