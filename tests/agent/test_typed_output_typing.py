"""mypy knows the output type: ``typed_output_types.py`` type-checks in strict mode, and the same file
with one claim made wrong does not (so the check can fail)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

pytestmark = pytest.mark.slow

CHECKED = Path(__file__).with_name("typed_output_types.py")


def mypy(path: Path) -> tuple[str, int]:
    out, err, status = api.run(["--strict", "--no-incremental", "--python-version", "3.11", str(path)])
    return out + err, status


def test_the_output_type_reaches_run_and_result() -> None:
    report, status = mypy(CHECKED)
    assert status == 0, report


def test_a_wrong_claim_about_the_output_type_fails(tmp_path: Path) -> None:
    text = CHECKED.read_text(encoding="utf-8")
    wrong = text.replace("assert_type(result.output, City)", "assert_type(result.output, str)")
    assert wrong != text
    path = tmp_path / "wrong_claim.py"
    path.write_text(wrong, encoding="utf-8")
    report, status = mypy(path)
    assert status == 1
    assert 'Expression is of type "City", not "str"' in report
