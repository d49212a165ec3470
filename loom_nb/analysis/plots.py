"""Plots of the frames (matplotlib, imported lazily; Agg canvas, no pyplot state).

Each function returns a ``matplotlib.figure.Figure``: Jupyter shows it, ``fig.savefig("x.png")``
writes it. Nothing is registered with pyplot, so figures are freed like any object.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loom_nb.analysis.frames import PLOTS
from loom_nb.analysis.frames import frames as make_frames
from loom_nb.errors import UsageError
from loom_nb.palette import LIGHT

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from loom_nb.analysis.frames import Frames
    from loom_nb.runtime import Runtime

#: Bar colours by step kind: the light theme of the palette the live view and the timeline share
#: (``loom_nb.palette``; the figures are drawn on white).
KIND_COLORS: dict[str, str] = {
    "model": LIGHT["model"],
    "tool": LIGHT["tool"],
    "compact": LIGHT["compaction"],
    "gate": LIGHT["gate"],
    "effect": LIGHT["effect"],
    "decision": LIGHT["decision"],
    "value": LIGHT["value"],
}


def _figure(width: float, height: float) -> Figure:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("the plots need matplotlib: pip install 'loom_nb[plots]'") from None

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _frames(frames: Frames | None, runtime: Runtime | None) -> Frames:
    return frames if frames is not None else make_frames(runtime)


def _nonempty(frame: Any, execution_id: str, what: str) -> Any:
    if frame.empty:
        raise UsageError(f"execution {execution_id!r} has no {what} (is the id right?)")
    return frame


def _nested_steps(f: Frames, execution_id: str) -> tuple[Any, list[str]]:
    """The steps of ``execution_id`` with its child executions' (sub-agents') steps right after the
    parent's step that ran each child, grandchildren likewise; a ``depth`` column (0: the execution
    itself) and the ids of every execution in the tree."""
    import pandas as pd

    runs = f.executions()
    kids: dict[tuple[str, str], list[str]] = {}
    if "parent_execution_id" in runs.columns:
        for r in runs[runs["parent_execution_id"].notna()].itertuples(index=False):
            kids.setdefault((str(r.parent_execution_id), str(r.parent_step)), []).append(str(r.execution_id))
    parts: list[Any] = []
    tree: list[str] = []

    def walk(eid: str, depth: int) -> None:
        tree.append(eid)
        steps = f.steps(eid).assign(depth=depth)
        placed: set[str] = set()
        start = 0
        for i, sid in enumerate(steps["step_id"]):
            children = kids.get((eid, str(sid)), [])
            if children and str(sid) not in placed:
                placed.add(str(sid))
                parts.append(steps.iloc[start : i + 1])
                start = i + 1
                for child in children:
                    walk(child, depth + 1)
        parts.append(steps.iloc[start:])
        for (parent, sid), children in kids.items():  # a child whose parent step has no row (yet)
            if parent == eid and sid not in placed:
                for child in children:
                    walk(child, depth + 1)

    walk(execution_id, 0)
    nonempty = [p for p in parts if not p.empty]
    steps = pd.concat(nonempty, ignore_index=True) if nonempty else f.steps(execution_id).assign(depth=0)
    return steps, tree


def plot_timeline(execution_id: str, *, frames: Frames | None = None, runtime: Runtime | None = None) -> Figure:
    """A Gantt chart of one execution: a bar per step (coloured by kind) from its start to its end,
    gates hatched over their wait, decisions and values as diamonds; failed and in-doubt steps
    outlined in red. Time is in seconds since the execution started.

    A sub-agent's child execution (``Agent.as_tool``) is nested under the parent's step that ran
    it: its steps follow that step, their labels indented and marked ``↳`` (its own children one
    level deeper), on the same time axis.

    Raises:
        UsageError: the execution has no steps.
    """
    f = _frames(frames, runtime)
    _nonempty(f.steps(execution_id), execution_id, "steps to plot")
    steps, tree = _nested_steps(f, execution_id)
    at = _event_times(f, tree)
    t0, t1 = at.min(), at.max()
    span = max((t1 - t0).total_seconds(), 1e-3)
    start = (steps["started_at"] - t0).dt.total_seconds()
    end = (steps["ended_at"].fillna(t1) - t0).dt.total_seconds()
    n = len(steps)
    fig = _figure(10, min(2.0 + 0.28 * n, 40))
    ax = fig.add_subplot()
    min_width = span / 200
    for i, row in enumerate(steps.itertuples(index=False)):
        color = KIND_COLORS.get(str(row.kind), "#999999")
        y = n - 1 - i
        if row.kind in ("decision", "value"):
            ax.plot([start.iloc[i]], [y], marker="D", color=color, markersize=7, linestyle="none")
            continue
        width = max(end.iloc[i] - start.iloc[i], min_width)
        bad = row.status in ("failed", "in_doubt") or bool(row.in_doubt)
        ax.barh(
            y,
            width,
            left=start.iloc[i],
            height=0.6,
            color=color,
            hatch="//" if row.kind == "gate" else None,
            edgecolor="#C0392B" if bad else "white",
            linewidth=2 if bad else 0.5,
        )
    labels = [_label(r) for r in steps.itertuples()]
    ax.set_yticks(range(n - 1, -1, -1), labels, fontsize=8)
    ax.set_xlabel("seconds since the execution started")
    ax.set_xlim(0, span * 1.02)
    ax.grid(axis="x", alpha=0.3)
    from matplotlib.patches import Patch

    kinds = [k for k in KIND_COLORS if k in set(steps["kind"])]
    ax.legend(handles=[Patch(color=KIND_COLORS[k], label=k) for k in kinds], loc="upper right", fontsize=8)
    children = f" ({len(tree) - 1} child execution(s) nested)" if len(tree) > 1 else ""
    ax.set_title(f"{execution_id}: {n} steps over {span:.2f} s{children}")
    return fig


def _event_times(f: Frames, execution_ids: list[str]) -> Any:
    """The ``at`` times of every event of ``execution_ids`` (one Series)."""
    import pandas as pd

    return pd.concat([f.events(eid)["at"] for eid in execution_ids], ignore_index=True)


def _label(r: Any) -> str:
    """A timeline row's label: step id and effect; a child's rows indented under the parent's step."""
    text = f"{r.step_id}  {r.effect if isinstance(r.effect, str) else ''}".rstrip()
    depth = int(r.depth)
    return text if depth == 0 else "    " * (depth - 1) + f"  ↳ {text}"


def plot_log_growth(execution_id: str, *, frames: Frames | None = None, runtime: Runtime | None = None) -> Figure:
    """Bytes journaled per turn (bars) and in total (line, right axis) for one execution.

    Raises:
        UsageError: the execution has no events.
    """
    growth = _nonempty(_frames(frames, runtime).log_growth(execution_id), execution_id, "events")
    fig = _figure(8, 4)
    ax = fig.add_subplot()
    turns = growth["turn"].to_numpy()
    ax.bar(turns, growth["bytes"].to_numpy() / 1024, color=KIND_COLORS["model"], label="per turn")
    ax.set_xlabel("turn")
    ax.set_ylabel("KiB journaled in the turn")
    ax.set_ylim(0, float(growth["bytes"].max()) / 1024 * 1.3)
    right = ax.twinx()
    cumulative = growth["cumulative_bytes"].to_numpy() / 1024
    right.plot(turns, cumulative, color=KIND_COLORS["decision"], marker="o", label="cumulative")
    right.set_ylabel("KiB journaled so far")
    right.set_ylim(0, float(cumulative.max()) * 1.1)
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="upper left", fontsize=8)
    total = int(growth["cumulative_bytes"].iloc[-1])
    ax.set_title(f"{execution_id}: {total:,} bytes over {len(growth)} turns")
    return fig


def cost_known(cost: Any) -> bool:
    """Whether a ``cost`` column holds any known, non-zero cost (a pricing was configured)."""
    values = [float(v) for v in cost if v is not None and v == v]
    return any(v > 0 for v in values)


def plot_usage(
    execution_id: str | None = None, *, frames: Frames | None = None, runtime: Runtime | None = None
) -> Figure:
    """Input and output tokens (stacked bars) and cost (line, right axis): per execution, or per
    turn of ``execution_id``. When no cost is known (no model call priced), the cost axis is left
    out and the title says so.

    Raises:
        UsageError: nothing to plot.
    """
    f = _frames(frames, runtime)
    if execution_id is None:
        data: Any = f.usage()
        x_labels = [str(e) for e in data["execution_id"]]
        title, x_label = f"usage of {len(data)} executions", "execution"
    else:
        data = f.turns(execution_id)
        x_labels = [str(t) for t in data["turn"]]
        title, x_label = f"{execution_id}: usage per turn", "turn"
    if data.empty:
        raise UsageError(
            "nothing to plot: "
            + ("the journal is empty" if execution_id is None else f"execution {execution_id!r} has no turns")
        )
    fig = _figure(max(6.0, 0.5 * len(data) + 2), 4)
    ax = fig.add_subplot()
    xs = list(range(len(data)))
    inputs = data["input_tokens"].to_numpy(dtype=float)
    outputs = data["output_tokens"].to_numpy(dtype=float)
    ax.bar(xs, inputs, color=KIND_COLORS["model"], label="input tokens")
    ax.bar(xs, outputs, bottom=inputs, color=KIND_COLORS["tool"], label="output tokens")
    ax.set_xticks(xs, x_labels, rotation=45 if execution_id is None and len(xs) > 6 else 0, fontsize=8)
    ax.set_xlabel(x_label)
    ax.set_ylabel("tokens")
    ax.set_ylim(0, max(float((inputs + outputs).max()), 1.0) * 1.3)
    cost = data["cost"].to_numpy(dtype=float)
    handles = ax.get_legend_handles_labels()[0]
    if cost_known(data["cost"]):
        right = ax.twinx()
        style = "none" if execution_id is None else "-"  # executions are categories: no line between them
        right.plot(xs, cost, color=KIND_COLORS["decision"], marker="o", linestyle=style, label="cost")
        right.set_ylabel("cost")
        right.set_ylim(0, max(max(c for c in cost if c == c), 1e-9) * 1.3)
        handles += right.get_legend_handles_labels()[0]
    else:
        title += " (cost unknown)"
    ax.legend(handles=handles, loc="upper left", fontsize=8)
    ax.set_title(title)
    return fig


PLOTS.update(timeline=plot_timeline, log_growth=plot_log_growth, usage=plot_usage)
