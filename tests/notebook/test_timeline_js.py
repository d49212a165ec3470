"""The timeline's front end (``widgets/timeline.js``) run in Node: a long gate wait with nothing
else running is cut to a narrow band (a broken axis), so later steps keep their width."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from loom_nb.notebook.timeline import asset_dir

NODE = shutil.which("node")


def run_js(body: str) -> object:
    module = (asset_dir() / "timeline.js").as_uri()
    script = f"import({json.dumps(module)}).then((m) => {{ {body} }});"
    out = subprocess.run([NODE or "node", "-e", script], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_long_quiet_gate_wait_is_cut_and_later_steps_keep_their_width() -> None:
    bars = [
        {"kind": "model", "start": 0, "end": 1},
        {"kind": "gate", "start": 1, "end": 20},  # 19 s of a person deciding
        {"kind": "tool", "start": 20, "end": 21},
    ]
    gaps, xs = run_js(
        f"const bars = {json.dumps(bars)}; const g = m.quietGaps(bars, 0, 21, 21); const x = m.scale(21, g);"
        "console.log(JSON.stringify([g, [0, 1, 20, 21].map(x)]));"
    )  # type: ignore[misc]
    assert gaps == [[1, 20]]
    assert xs[0] == 0 and xs[-1] == pytest.approx(1)
    assert xs[2] - xs[1] == pytest.approx(0.05, abs=1e-6)  # the wait: a narrow band
    assert xs[3] - xs[2] == pytest.approx(xs[1] - xs[0])  # the tool step as wide as the model step


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_gate_wait_beside_a_running_step_or_a_short_one_is_not_cut() -> None:
    bars = [
        {"kind": "model", "start": 0, "end": 10},
        {"kind": "gate", "start": 1, "end": 9},  # the model runs meanwhile: nothing to cut
        {"kind": "gate", "start": 10, "end": 11},  # short
        {"kind": "tool", "start": 11, "end": 12},
    ]
    gaps = run_js(f"console.log(JSON.stringify(m.quietGaps({json.dumps(bars)}, 0, 12, 12)));")
    assert gaps == []
    quick = [{"kind": "model", "start": 0, "end": 0.1}, {"kind": "gate", "start": 0.1, "end": 0.4}]
    assert run_js(f"console.log(JSON.stringify(m.quietGaps({json.dumps(quick)}, 0, 0.5, 0.5)));") == []
