"""Replay analysis: the journal as pandas DataFrames (DuckDB SQL views), replay reports, diffs,
forks, off-policy estimates and plots.

    import loom_nb as loom
    f = loom.frames(runtime)            # or loom.frames() for the notebook's default runtime
    f.steps(); f.gates(); f.tool_calls(); f.sql("SELECT ... FROM steps")
    loom.analysis.diff("exec-1", "exec-2", runtime=runtime).first_divergence

This layer may import the journal, kernel, effects and agent layers, pandas and (lazily)
matplotlib; never IPython, ipywidgets or ``loom_nb.notebook``.
"""

from loom_nb.analysis.batch import BATCH_COLUMNS, batch_frame
from loom_nb.analysis.frames import (
    DIFF_COLUMNS,
    OUTPUT_COLUMNS,
    REPLAY_COLUMNS,
    TRANSCRIPT_COLUMNS,
    ExecutionDiff,
    Frames,
    diff,
    frames,
    log_growth,
)
from loom_nb.analysis.ope import (
    PolicyEstimate,
    effective_sample_size,
    estimate_policy_value,
    ips,
    snips,
)
from loom_nb.analysis.plots import plot_log_growth, plot_timeline, plot_usage
from loom_nb.analysis.sql_views import COLUMNS, create_views

__all__ = [
    "BATCH_COLUMNS",
    "COLUMNS",
    "DIFF_COLUMNS",
    "OUTPUT_COLUMNS",
    "REPLAY_COLUMNS",
    "TRANSCRIPT_COLUMNS",
    "ExecutionDiff",
    "Frames",
    "PolicyEstimate",
    "batch_frame",
    "create_views",
    "diff",
    "effective_sample_size",
    "estimate_policy_value",
    "frames",
    "ips",
    "log_growth",
    "plot_log_growth",
    "plot_timeline",
    "plot_usage",
    "snips",
]
