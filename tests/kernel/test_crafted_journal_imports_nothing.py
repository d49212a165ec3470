"""Reading a journal never imports a module it names: a crafted error type or gate schema runs no code."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loom_nb.errors import RecordedError, UsageError
from loom_nb.journal import Event, EventKind, InMemoryJournal
from loom_nb.kernel.errors_codec import error_from_data
from tests.kernel.support import make_runtime

MODULE = "loom_crafted_payload"


@pytest.fixture
def booby_trapped(tmp_path: Path) -> Iterator[Path]:
    """An importable module that, if imported, writes a marker file (proof that its code ran)."""
    marker = tmp_path / "imported"
    (tmp_path / f"{MODULE}.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\nclass Schema:\n    pass\n"
    )
    sys.path.insert(0, str(tmp_path))
    yield marker
    sys.path.remove(str(tmp_path))
    sys.modules.pop(MODULE, None)


def test_a_recorded_error_type_of_an_unloaded_module_decodes_without_importing_it(booby_trapped: Path) -> None:
    exc = error_from_data({"type": f"{MODULE}:Schema", "message": "boom", "args": ["boom"], "attrs": {}})
    assert isinstance(exc, RecordedError) and exc.type_name == f"{MODULE}:Schema" and "boom" in str(exc)
    assert not booby_trapped.exists() and MODULE not in sys.modules
    # A type this process has loaded still comes back as itself.
    assert type(error_from_data({"type": "builtins:ValueError", "message": "x", "args": ["x"]})) is ValueError


async def test_answering_a_gate_whose_schema_names_an_unloaded_module_imports_nothing(booby_trapped: Path) -> None:
    journal = InMemoryJournal()
    opened = {"kind": "Custom", "payload": {}, "schema": f"{MODULE}:Schema"}
    journal.append(
        [
            Event("x", 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": "f", "input": None, "principal": None}),
            Event("x", 2, EventKind.GATE_OPENED, "g", 2.0, opened),
            Event("x", 3, EventKind.EXECUTION_SUSPENDED, None, 3.0, {"gates": ["g"]}),
        ]
    )
    rt = make_runtime(journal)
    with pytest.raises(UsageError, match="is not defined in this process"):
        await rt.resume("x", "g", {"anything": 1})
    assert not booby_trapped.exists() and MODULE not in sys.modules
    assert len(journal.read("x")) == 3  # nothing recorded
