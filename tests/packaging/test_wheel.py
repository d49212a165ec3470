"""The wheel a user installs: built from the repository, installed into a fresh venv with its base
dependencies alone (pinned by ``constraints.txt``), it carries ``py.typed`` and the view's page
scripts, imports without any extra, and runs a scripted agent to an approved answer on a DuckDB
file."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import loom_nb as loom

@loom.tool(needs_approval=True)
def greet(name: str) -> str:
    \"\"\"Greet someone.\"\"\"
    return f"hello {name}"

answers = [loom.ModelResponse.tool_calls([("greet", {"name": "Ana"})]), loom.ModelResponse.text("Greeted.")]
agent = loom.Agent(model=loom.ScriptedModel(answers), tools=[greet], name="greeter")
rt = loom.Runtime.open(sys.argv[1])
run = agent.start("Greet Ana", runtime=rt)
run.gates[0].approve()
print(loom.__file__, run.status, run.result.output)
rt.close()
"""


def run(*argv: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, timeout=600)
    assert done.returncode == 0, f"{argv[:4]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.mark.slow
def test_the_wheel_installs_with_its_base_dependencies_and_runs_a_scripted_agent(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, REPO)
    (wheel,) = wheels.glob("loom_nb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"loom_nb/py.typed", "loom_nb/_widgets/view_page.js", "loom_nb/_widgets/timeline.js"} <= names
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "-c", REPO / "constraints.txt", wheel)
    out = run(python, "-c", SCRIPT, tmp_path / "wheel.duckdb", cwd=tmp_path).split()
    assert out[0].startswith(str(venv)), out  # the installed wheel, not the repository's code
    assert out[1:] == ["completed", "Greeted."], out
