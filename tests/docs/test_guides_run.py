"""Every Python block of the guides (``docs/*.md``) runs as written, like the README's
(``tests/notebook/test_readme_runs.py``): jupytext reads each guide as a notebook and each block
runs in a real kernel (nbclient), in a folder of its own (each opens ``loom.duckdb`` afresh).

A guide's block is an example that takes some names from its prose (``search_fn``, "a run waiting
on an in-doubt gate"): ``GIVEN`` holds the code that makes them, run just before the block, and
``CHECK`` what the text around the block says came of it, run just after. A guide gains a block:
it runs (with no given names unless it is listed here), so the guides cannot drift from the code."""

from __future__ import annotations

import functools
from pathlib import Path

import jupytext
import pytest

from tests.notebook.support import REPO, KernelSession

#: Run before every block: a folder of its own, and the import every guide's first block shows.
BEFORE_EACH = """\
import os, tempfile
os.chdir(tempfile.mkdtemp(dir={root!r}))
import loom_nb as loom
"""

#: A scripted agent whose one tool call hangs past its timeout: a non-idempotent call abandoned in
#: flight is in doubt, so the run waits on an ``InDoubt`` gate for a person (docs/effects.md).
IN_DOUBT_RUN = """\
import threading
release = threading.Event()

@loom.tool
def charge(customer: str, amount: int) -> dict:
    \"\"\"Charge a customer.\"\"\"
    release.wait(10)
    return {"charged": amount}

def in_doubt_run(rt, execution_id):
    model = loom.ScriptedModel([
        loom.ModelResponse.tool_calls([("charge", {"customer": "acme", "amount": 42})]),
        loom.ModelResponse.text("Charged."),
    ])
    agent = loom.Agent(model=model, tools=[charge], tool_timeout=0.2, name="billing")
    return agent.start("Charge acme 42", runtime=rt, execution_id=execution_id, view=False)

rt = loom.Runtime.open("loom.duckdb")
run = in_doubt_run(rt, "pay-1")
await run.wait(until="paused", timeout=20)
"""

#: A scripted agent whose one call, of an MCP server's tool (``tests/effects/mcp_elicit_server.py``),
#: asks the user which day: the run waits on the server's question (docs/effects.md).
ELICITING_RUN = """\
import asyncio, os, sys
from mcp import StdioServerParameters

served = os.path.join(os.path.dirname(loom.__file__), "..", "tests", "effects", "mcp_elicit_server.py")
tools = loom.mcp_tools(StdioServerParameters(command=sys.executable, args=[served, os.getcwd()]), include=["book"])
model = loom.ScriptedModel([
    loom.ModelResponse.tool_calls([("book", {"room": "12"})]),
    loom.ModelResponse.text("Booked."),
])
rt = loom.Runtime.open("loom.duckdb")
run = loom.Agent(model=model, tools=tools, name="hotel").start("Book room 12", runtime=rt, view=False)
for _ in range(600):
    if run.gates:
        break
    await asyncio.sleep(0.05)
"""

#: Per block (its first line): the names its guide's prose takes as given.
GIVEN: dict[str, str] = {
    # docs/effects.md
    'rt = loom.Runtime.open("loom.duckdb")': """\
def search_fn(query: str) -> list[str]:
    return [f"a page about {query}"]
""",
    'rt = loom.Runtime.open("loom.duckdb", principal=loom.Principal.of("ana", scopes=["read"]))': """\
dropped = []
def drop(name: str) -> str:
    dropped.append(name)
    return f"dropped {name}"
""",
    'rt.effects.register("model.main", call_model, kind="model", idempotent=True,': """\
rt = loom.Runtime.open("loom.duckdb")
async def call_model(request):
    return {"text": "hello"}
""",
    'gate = run.gates[0]            # kind "InDoubt"; payload: effect, step_id, input, attempt, cause': IN_DOUBT_RUN,
    'gate = run.gates[0]                 # kind "McpElicitation", while the server\'s call waits': ELICITING_RUN,
    'agent = loom.Agent(model=..., tools=[fetch_page], claim_check=loom.ClaimCheck(tool_ids=["fetch_page"]))': """\
@loom.tool
def fetch_page(url: str) -> dict:
    \"\"\"Fetch a page.\"\"\"
    return {"title": "Example", "body": "x" * 10_000}
""",
    # docs/analysis.md: a journal with one completed run, exec-1, and logged decisions with
    # propensities and their rewards.
    "f = loom.frames(rt)              # loom.frames() uses the default (notebook) runtime": """\
rt = loom.Runtime.open("loom.duckdb")
model = loom.ScriptedModel([loom.ModelResponse.text("Hello.")])
run = loom.Agent(model=model, name="greeter").start("Hi", runtime=rt, execution_id="exec-1", view=False)
await run
assert run.status == "completed", run.status
""",
    "from loom_nb.analysis import estimate_policy_value": """\
import pandas as pd
ARMS = ["a", "b"]

def policy(options):  # logs the probabilities it chose with
    return loom.Decision(choice="a", probabilities=[0.7, 0.3])

async def pick(ctx, _):
    return await ctx.decide("#pick", ARMS, policy)

rt.flows.register(pick, "pick")
for i in range(4):
    assert (await rt.start("pick", None, execution_id=f"pick-{i}")).status == "completed"
outcomes_df = pd.DataFrame({"execution_id": [f"pick-{i}" for i in range(4)], "reward": [1.0, 0.0, 1.0, 1.0]})
def target(options):
    return {"a": 0.5, "b": 0.5}
""",
}

#: Per block: what the text around it says came of it.
CHECK: dict[str, str] = {
    'rt = loom.Runtime.open("loom.duckdb")': """\
spec = rt.effects.spec("tools.search")
assert spec.idempotent and spec.scopes == {"read"} and not spec.trusted, spec
""",
    'rt = loom.Runtime.open("loom.duckdb", principal=loom.Principal.of("ana", scopes=["read"]))': """\
async def cleanup(ctx, _):
    return await ctx.execute("tools.drop_table", "events")

rt.flows.register(cleanup, "cleanup")
result = await rt.start("cleanup", None)
assert result.status == "failed" and dropped == [], (result, dropped)
said = ("effect 'tools.drop_table' requires scope 'admin', which principal 'ana' does not hold (it holds: "
        "read). Start the execution with a principal that has it")
assert result.error["type"].endswith("NotAuthorizedError") and said in result.error["message"], result.error
""",
    'rt = loom.Runtime.open("loom.duckdb", quota=loom.Quota(calls=50, tokens=200_000, cost=2.0))': "",
    'rt.effects.register("model.main", call_model, kind="model", idempotent=True,': """\
assert rt.effects.spec("model.main").retry.attempts == 5
""",
    'gate = run.gates[0]            # kind "InDoubt"; payload: effect, step_id, input, attempt, cause': """\
assert gate.kind == "InDoubt" and set(gate.payload) == {"effect", "step_id", "input", "attempt", "cause"}, gate.payload
assert (await run).output == "Charged." and run.status == "completed"
steps = loom.frames(rt).steps("pay-1").set_index("step_id")
assert steps.loc["#turn:0:tool:0", "status"] == "completed", steps
# the two other answers the comments name
again = in_doubt_run(rt, "pay-2")
await again.wait(until="paused", timeout=20)
again.gates[0].run_again()
release.set()  # the second attempt finishes
assert (await again).output == "Charged."
assert loom.frames(rt).steps("pay-2").set_index("step_id").loc["#turn:0:tool:0", "attempts"] == 2
release.clear()
failed = in_doubt_run(rt, "pay-3")
await failed.wait(until="paused", timeout=20)
failed.gates[0].fail("card declined")
await failed.wait(timeout=20)
release.set()
step = loom.frames(rt).steps("pay-3").set_index("step_id").loc["#turn:0:tool:0"]
assert (step["status"], step["error_type"]) == ("failed", "loom_nb.errors:InDoubtError"), step
""",
    'gate = run.gates[0]                 # kind "McpElicitation", while the server\'s call waits': """\
assert (await run).output == "Booked." and run.status == "completed"
(booked,) = [e.data["output"] for e in rt.journal.read(run.id)
             if e.kind == "step_completed" and e.step_id == "#turn:0:tool:0"]
assert "booked 12 on monday" in str(booked), booked
rt.close()
""",
    "f = loom.frames(rt)              # loom.frames() uses the default (notebook) runtime": "",
    "from loom_nb.analysis import estimate_policy_value": """\
assert est.n == 4 and est.excluded_no_propensity == 0, est
assert abs(est.ips - 0.75 * 0.5 / 0.7) < 1e-9, est  # mean(w r): w = 0.5 / 0.7 for every "a"
""",
}


def python_blocks(path: Path) -> list[str]:
    """The Python blocks of a Markdown file, in order (jupytext's Markdown reader, as for the README)."""
    notebook = jupytext.read(path, fmt="md")
    return [c.source for c in notebook.cells if c.cell_type == "code" and not c.source.startswith("%%")]


@functools.cache  # read once, at collection (the parameters) and by every test
def guide_blocks() -> dict[str, list[str]]:
    """The Python blocks of each guide that has any (``docs/*.md``, by path from the repository)."""
    found = {}
    for path in sorted((REPO / "docs").glob("*.md")):  # docs/reference/ holds only mkdocstrings directives
        blocks = python_blocks(path)
        if blocks:
            found[str(path.relative_to(REPO))] = blocks
    return found


def key(block: str) -> str:
    """A block's name in ``GIVEN`` / ``CHECK``: its first line but ``import loom_nb as loom``."""
    return next(line for line in block.splitlines() if line != "import loom_nb as loom")


def test_every_given_and_check_names_a_block_of_a_guide() -> None:
    keys = [key(b) for blocks in guide_blocks().values() for b in blocks]
    assert len(keys) == len(set(keys)), "two blocks share a first line: name them apart in key()"
    assert set(GIVEN) <= set(keys), set(GIVEN) - set(keys)
    assert set(CHECK) <= set(keys), set(CHECK) - set(keys)
    assert {"docs/effects.md", "docs/analysis.md"} <= set(guide_blocks()), set(guide_blocks())  # the reader finds them
    assert len(keys) >= 8, keys


@pytest.mark.slow
@pytest.mark.parametrize("guide", sorted(guide_blocks()))
def test_the_guide_runs_as_written(guide: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOM_JOURNAL", raising=False)
    with KernelSession(tmp_path, timeout=60) as kernel:
        for block in guide_blocks()[guide]:
            name = key(block)
            kernel.run(BEFORE_EACH.format(root=str(tmp_path)) + GIVEN.get(name, ""))
            kernel.run(block)  # raises CellExecutionError, with the cell, on any error
            if CHECK.get(name):
                kernel.run(CHECK[name])
