"""The notebook layer's costs: click-to-resume latency in a real kernel, and the live view's
kernel-side cost per streamed model delta.

Click to resume: a real kernel (nbclient) runs an agent that asks approval for one tool call per turn.
For each of ``--clicks`` gates the bench takes ``time.time()`` just before it sends the comm message
a browser sends for a click on the card's Approve button; a kernel-side observer
(``runtime.observe``) takes ``time.time()`` when the next ``step_started`` (the approved tool call)
is committed. The latency is the difference (one machine, one clock). The kernel-internal part
(``gate_resolved`` to that ``step_started``, from the journal's timestamps) is shown beside it.

Per delta: ``RunView.on_delta`` fed ``--deltas`` deltas in a loop, in this process (no front end)
and in the kernel with the view displayed (real comm messages), throttled (the default, at most ~20
refreshes a second) and unthrottled (``interval=0``: one widget update per delta).

First cell: in each of ``--kernels`` fresh kernels, the time (``time.perf_counter`` in the kernel) of
the first cell ``%load_ext loom_nb`` + ``import loom_nb`` on a new journal, beside the baseline in a
fresh kernel of the same run: ``import duckdb, ipywidgets`` (what the cell cannot do without: the
journal's database and the widgets of the views). loom_nb's bytecode is compiled first, as an
installed package's is (``first_cell``).

Run: ``.venv/bin/python bench/notebook.py [--clicks 10] [--deltas 10000] [--kernels 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import loom_nb
from loom_nb.agent.run import Run
from loom_nb.notebook.run_view import RunView
from tests.notebook.support import KernelSession, kernel_button_ids, last_json, make_runtime

SETUP = '''
import asyncio, json, os, time
os.environ["LOOM_JOURNAL"] = {journal!r}
%load_ext loom_nb
import loom_nb as loom

@loom.tool(needs_approval=True)
def touch(path: str) -> str:
    """Touch a file."""
    return path

N = {clicks}

def respond(request):
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < N:
        return loom.ModelResponse.tool_calls([("touch", {{"path": f"/f{{turn}}"}})], text=f"Turn {{turn}}.")
    return loom.ModelResponse.text("All done.")

agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[touch], name="bench", max_turns=N + 1)
seen = []

def watch(event):
    if event.kind == "step_started" and event.step_id.endswith(":tool:0"):
        seen.append(time.time())

rt = loom.default_runtime()
rt.observe(watch)
run = agent.start("go")
'''

WAIT_STEP = """
while len(seen) < {n}:
    await asyncio.sleep(0.0005)
print(json.dumps(seen[{n} - 1]))
"""

INTERNAL = """
_ev = rt.journal.read(run.id)
_out, _resolved = [], None
for e in _ev:
    if e.kind == "gate_resolved":
        _resolved = e.at
    elif e.kind == "step_started" and e.step_id.endswith(":tool:0") and _resolved is not None:
        _out.append(e.at - _resolved)
        _resolved = None
print(json.dumps(_out))
"""

KERNEL_DELTAS = """
from loom_nb.agent.run import Run
from loom_nb.notebook.run_view import RunView
_res = {{}}
for _label, _interval, _n in (("throttled", 0.05, {deltas}), ("unthrottled", 0.0, {unthrottled})):
    _v = RunView(Run(rt, "deltas-" + _label), interval=_interval)
    display(_v)
    _t = time.perf_counter()
    for _i in range(_n):
        _v.on_delta(_v.run.id, "#turn:0", f"w{{_i}} ")
    _el = time.perf_counter() - _t
    await asyncio.sleep(0.1)
    _res[_label] = {{"n": _n, "per_delta_ms": _el / _n * 1000, "refreshes": _v.refreshes,
                    "kept": len(_v.text_so_far) == sum(len(f"w{{i}} ") for i in range(_n))}}
print(json.dumps(_res))
"""


def click_latency(clicks: int) -> tuple[list[float], list[float]]:
    """Send ``clicks`` approve clicks to a real kernel; returns (click->step committed, kernel-internal)
    latencies in ms."""
    latencies: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, KernelSession(Path(tmp)) as k:
        k.run(SETUP.format(journal=str(Path(tmp) / "bench.duckdb"), clicks=clicks))
        for n in range(1, clicks + 1):
            k.run("await run.wait(until='paused')")
            ids = kernel_button_ids(k, "loom-approve")
            assert len(ids) == 1, ids
            sent = time.time()
            k.click(ids[0])
            committed = last_json(k.stdout(WAIT_STEP.format(n=n)))
            latencies.append((committed - sent) * 1000)
        k.run("await run")
        internal = [x * 1000 for x in last_json(k.stdout(INTERNAL))]
    return latencies, internal


def kernel_delta_cost(deltas: int) -> dict[str, dict[str, float]]:
    """The view's delta handler in a real kernel, with the view displayed (real comm messages)."""
    with tempfile.TemporaryDirectory() as tmp, KernelSession(Path(tmp)) as k:
        k.run(
            f"import asyncio, json, os, time\nos.environ['LOOM_JOURNAL'] = {str(Path(tmp) / 'd.duckdb')!r}\n"
            "%load_ext loom_nb\nimport loom_nb as loom\nrt = loom.default_runtime()"
        )
        result: dict[str, dict[str, float]] = last_json(
            k.stdout(KERNEL_DELTAS.format(deltas=deltas, unthrottled=min(deltas, 2000)))
        )
        return result


async def local_delta_cost(deltas: int, interval: float) -> tuple[float, int, float]:
    """(ms per delta, refreshes, ms for the final refresh) in this process, no front end."""
    view = RunView(Run(make_runtime(), "bench"), interval=interval)
    words = [f"w{i} " for i in range(deltas)]
    began = time.perf_counter()
    for w in words:
        view.on_delta("bench", "#turn:0", w)
    elapsed = time.perf_counter() - began
    await asyncio.sleep(interval + 0.05)
    assert view.text_so_far == "".join(words) and view.deltas == deltas
    began = time.perf_counter()
    view.on_delta("bench", "#turn:0", "!")
    view.flush()
    last = time.perf_counter() - began
    return elapsed / deltas * 1000, view.refreshes, last * 1000


FIRST_CELL = (
    "import time as _t\n_t0 = _t.perf_counter()\nget_ipython().run_line_magic('load_ext', 'loom_nb')\n"
    "import loom_nb\nprint(_t.perf_counter() - _t0)"
)
BASELINE_CELL = "import time as _t\n_t0 = _t.perf_counter()\nimport duckdb, ipywidgets\nprint(_t.perf_counter() - _t0)"


def first_cell(kernels: int) -> tuple[list[float], list[float]]:
    """(first-cell seconds, baseline seconds), one of each per fresh kernel, alternating.

    loom_nb's bytecode is compiled first, as ``pip install`` compiles an installed package's (and
    as an editable checkout's first import does, unless ``PYTHONDONTWRITEBYTECODE`` is set, as it
    is on some machines: then every kernel would compile every module from source, which the
    baseline's installed packages never do)."""
    compileall.compile_dir(str(Path(loom_nb.__file__).parent), quiet=1)
    cells: list[float] = []
    baseline: list[float] = []
    for _ in range(kernels):
        for source, into in ((FIRST_CELL, cells), (BASELINE_CELL, baseline)):
            with tempfile.TemporaryDirectory() as tmp, KernelSession(Path(tmp)) as k:
                into.append(float(k.stdout(source).strip().splitlines()[-1]))
    return cells, baseline


def main() -> None:
    """Run both measurements and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=10)
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--kernels", type=int, default=5)
    args = parser.parse_args()

    cells, baseline = first_cell(args.kernels)
    print(
        f"first cell (%load_ext loom_nb + import loom_nb, new journal), {len(cells)} fresh kernels: median "
        f"{statistics.median(cells):.3f} s (min {min(cells):.3f}); baseline import duckdb, ipywidgets: median "
        f"{statistics.median(baseline):.3f} s; target <= 0.3 s"
    )

    per, refreshes, last = asyncio.run(local_delta_cost(args.deltas, 0.05))
    print(
        f"view, in process: {per:.4f} ms per delta over {args.deltas} deltas "
        f"(throttled: {refreshes} refresh(es); one refresh of the whole text {last:.2f} ms); target < 0.1 ms"
    )
    n = min(args.deltas, 2000)
    per0, refreshes0, _ = asyncio.run(local_delta_cost(n, 0.0))
    print(f"view, in process, unthrottled: {per0:.4f} ms per delta over {n} deltas ({refreshes0} refreshes)")
    kernel = kernel_delta_cost(args.deltas)
    for label, r in kernel.items():
        print(
            f"view, in a kernel with the view displayed, {label}: {r['per_delta_ms']:.4f} ms per delta over "
            f"{int(r['n'])} deltas ({int(r['refreshes'])} refresh(es); every delta kept: {bool(r['kept'])})"
        )

    latencies, internal = click_latency(args.clicks)
    print(
        f"click to resume (comm click sent -> next step_started committed), {len(latencies)} clicks: "
        f"median {statistics.median(latencies):.1f} ms, min {min(latencies):.1f}, max {max(latencies):.1f}; "
        "target < 50 ms"
    )
    print(
        f"  of which in the kernel (gate_resolved -> step_started, journal timestamps): "
        f"median {statistics.median(internal):.1f} ms, max {max(internal):.1f}"
    )


if __name__ == "__main__":
    main()
