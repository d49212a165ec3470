"""CHANGELOG.md names every persisted contract the code knows: each event format and each schema
migration (house rule 3), and the golden journal folders that must still replay."""

from __future__ import annotations

from pathlib import Path

from loom_nb.journal.event_format import CURRENT_FORMAT, FORMATS
from loom_nb.journal.migrations import MIGRATIONS

REPO = Path(__file__).resolve().parent.parent
CHANGELOG = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")


def test_every_event_format_has_a_row_and_the_current_one_says_so() -> None:
    rows = [line for line in CHANGELOG.splitlines() if line.startswith("| ")]
    for fmt in FORMATS:
        assert any(row.startswith(f"| {fmt} |") for row in rows), f"CHANGELOG.md has no row for event format {fmt}"
    (current,) = [row for row in rows if row.startswith(f"| {CURRENT_FORMAT} |")]
    assert "| current |" in current


def test_every_schema_migration_is_named() -> None:
    missing = [name for name, _ in MIGRATIONS if f"`{name}`" not in CHANGELOG]
    assert not missing, f"CHANGELOG.md does not name the schema migrations {missing}"


def test_the_golden_journal_folders_it_names_exist_and_hold_journals() -> None:
    for folder in ("tests/kernel/golden", "tests/agent/golden"):
        assert f"`{folder}/`" in CHANGELOG
        assert list((REPO / folder).glob("*.jsonl")), folder
