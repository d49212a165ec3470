"""The repository stands alone: no text file cites a design record or a document kept outside it.

Every rule the code relies on is stated in the repository's own words (``docs/design.md``). A
numbered decision record of another project, the original design map, or a path into the shared
folder beside the repository means to a reader here: "the rule is somewhere you cannot see".
This test scans every text file git knows (tracked, or new and not ignored) and names each
citation by file and line.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

# Built from pieces so that this file does not match its own patterns.
_RECORD = "A" + "DR"
_MAP = "DE" + "SIGN"
_SHARED = "sha" + "red"
CITATIONS: dict[str, re.Pattern[str]] = {
    "a numbered outside decision record": re.compile(rf"\b{_RECORD}[ -]?\d+"),
    "the outside design map": re.compile(rf"\b{_MAP}\b"),
    "a path into the outside shared folder": re.compile(rf"/work/{_SHARED}\b|\.\./{_SHARED}\b"),
}
TEXT_SUFFIXES = frozenset({".py", ".md", ".ipynb", ".cfg", ".toml", ".sh", ".txt"})
TEXT_NAMES = frozenset({"Makefile"})
SCRIPT_DIRS = (".ci/",)  # extensionless scripts


def _repository_root() -> Path:
    here = Path(__file__).resolve().parent
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    proc = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=here, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        pytest.skip("not a git checkout")
    return Path(proc.stdout.strip())


def text_files(root: Path) -> list[str]:
    """Paths (relative to ``root``) of the text files git tracks, or would track if added."""
    proc = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        check=True,
    )
    paths = sorted({p for p in proc.stdout.decode("utf-8").split("\0") if p})
    return [
        p
        for p in paths
        if (Path(p).suffix in TEXT_SUFFIXES or Path(p).name in TEXT_NAMES or p.startswith(SCRIPT_DIRS))
        and (root / p).is_file()
    ]


def citations(root: Path, paths: list[str]) -> list[str]:
    """``file:line: what (the line)`` for every citation of something outside the repository."""
    found: list[str] = []
    for rel in paths:
        text = (root / rel).read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), start=1):
            for what, pattern in CITATIONS.items():
                if pattern.search(line):
                    found.append(f"{rel}:{n}: {what}: {line.strip()[:160]}")
    return found


def test_the_scan_sees_the_files_that_matter() -> None:
    root = _repository_root()
    paths = text_files(root)
    for expected in ("README.md", "docs/design.md", "Makefile", "pyproject.toml", "loom_nb/__init__.py"):
        assert expected in paths
    assert any(p.endswith(".ipynb") for p in paths)


@pytest.mark.parametrize(
    "line",
    [
        "The loop follows " + _RECORD + " 0087 D4.",
        "see " + _RECORD + "-61",
        "The map is in `" + _MAP + ".md` (shared).",
        "Linear log growth (" + _MAP + " section 5)",
        "Read /work/" + _SHARED + "/STYLE.md first.",
        "in `../" + _SHARED + "/seeds/record.txt`",
    ],
)
def test_each_kind_of_citation_is_caught(line: str) -> None:
    assert any(p.search(line) for p in CITATIONS.values())


@pytest.mark.parametrize(
    "line", ["see docs/design.md, section 5", "a Design note", "ADDRESS 12", "the shared message types"]
)
def test_the_repositorys_own_references_are_not_citations(line: str) -> None:
    assert not any(p.search(line) for p in CITATIONS.values())


def test_no_file_cites_a_design_record_or_document_outside_the_repository() -> None:
    root = _repository_root()
    found = citations(root, text_files(root))
    assert not found, (
        "these lines cite documents outside the repository; state the rule in the repository's own "
        "words (docs/design.md) and cite that instead:\n" + "\n".join(found)
    )
