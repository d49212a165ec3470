"""One owner for the step-id grammar: no module but ``loom_nb/journal/step_ids.py`` spells an id.

Every string constant and f-string in the package's code (docstrings excluded: prose may mention
an id) is checked for fragments of the step-id / gate-id / effect-id / flow-name grammar. A hit
names the file and line: build or parse the id with ``loom_nb.journal.step_ids`` instead.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "loom_nb"
OWNER = PACKAGE / "journal" / "step_ids.py"

#: Fragments of the grammar; an f-string's replacement fields read as ``{}``.
FRAGMENTS = re.compile(
    r"#turn|:tool:|:approval\b|:in_doubt|:compact\b|:elevated?:|:route\b|:skills\b|:recall\b|#value"
    r"|(?<![\w.])tools\.(?:\w|\{\})|^tools\.$|(?<![\w.])model\.(?:\w|\{\})|(?<![\w.])agent:(?:\w|\{\})|agent_step\."
    r"|^#\{\}$|^(?:InDoubt|AgentToolApproval)$"
)


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _text(node: ast.JoinedStr) -> str:
    return "".join(str(part.value) if isinstance(part, ast.Constant) else "{}" for part in node.values)


def id_literals(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """``file:line: text`` (``file`` relative to ``root``) for every grammar fragment in the code
    strings of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstring_nodes(tree)
    inside_fstrings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    hits: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = _text(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docstrings or id(node) in inside_fstrings:
                continue
            text = node.value
        else:
            continue
        if FRAGMENTS.search(text):
            hits.append(f"{path.relative_to(root)}:{node.lineno}: {text!r}")
    return hits


def test_only_step_ids_spells_the_grammar() -> None:
    hits = [hit for path in sorted(PACKAGE.rglob("*.py")) if path != OWNER for hit in id_literals(path)]
    assert not hits, "step/gate/effect ids spelled outside loom_nb/journal/step_ids.py:\n" + "\n".join(hits)


def test_the_scan_finds_an_id_literal(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    source = (
        'def f(i):\n    """Mentions #turn:<i> in prose."""\n    return f"#turn:{i}:tool:0", "tools.x", "model.bot"\n'
    )
    sample.write_text(source, encoding="utf-8")
    assert [h.split(": ", 1)[0] for h in id_literals(sample, tmp_path)] == ["sample.py:3"] * 3


def test_the_owner_itself_spells_the_grammar() -> None:
    assert id_literals(OWNER), "the scan must recognise the owner's own id literals"
