"""The style sheet of the live run view and its cards: one ``<style>`` widget every run view shows
(``formatting.shared_model``), the palette's CSS custom properties (``analysis.palette.css``) first."""

from __future__ import annotations

from loom_nb.palette import css

#: The run view's style sheet (an HTML ``<style>`` element): layout, the palette's colours per role.
STYLE = (
    "<style>\n"
    + css()
    + """
.loom-run { border-left: 3px solid var(--loom-model); padding-left: 8px; margin: 4px 0;
  color: var(--jp-content-font-color1, inherit); }
.loom-title, .loom-turn-label, .loom-run-status { font-weight: 600; white-space: nowrap; }
.loom-turn-label { font-weight: normal; }
.loom-turns { min-width: 120px; }
.loom-run .loom-turns .progress-bar { background-color: var(--loom-running); }
.loom-run .loom-turns .progress-bar-success { background-color: var(--loom-completed); }
.loom-run .loom-turns .progress-bar-warning { background-color: var(--loom-waiting); }
.loom-run .loom-turns .progress-bar-danger { background-color: var(--loom-failed); }
.loom-run .loom-stop { min-width: 76px; flex-shrink: 0; }
.loom-badge { padding: 0 8px; border-radius: 9px; border: 1px solid currentColor; font-size: 12px;
  background: var(--jp-layout-color0, transparent); }
.loom-badge-running { color: var(--loom-running); } .loom-badge-suspended { color: var(--loom-suspended); }
.loom-badge-completed { color: var(--loom-completed); } .loom-badge-failed { color: var(--loom-failed); }
.loom-badge-cancelled { color: var(--loom-cancelled); }
.loom-body.loom-capped, .loom-current.loom-capped .loom-turn-text { max-height: 420px; overflow-y: auto; }
.loom-run .loom-gone { display: none !important; } /* a child that left, kept until those after it go */
.loom-run .widget-vbox > * { flex-shrink: 0; } /* a capped body scrolls; its children never squash */
.loom-turn { border-top: 1px solid var(--jp-border-color2, #e0e0e0); padding: 2px 0; }
.loom-turn-head { font-size: 11px; color: var(--loom-muted); }
.loom-markdown { font-family: var(--jp-content-font-family, sans-serif); font-size: 13px;
  overflow-wrap: break-word; word-break: normal; white-space: normal; }
.loom-markdown p { margin: 2px 0; } .loom-markdown pre { white-space: pre-wrap; }
.loom-answer .loom-markdown { font-size: 14px; }
.loom-link-host, .loom-markdown .loom-image { color: var(--loom-muted); font-size: 12px; }
.loom-error pre { white-space: pre-wrap; word-break: normal; overflow-wrap: break-word; margin: 2px 0;
  font-size: 13px; }
.loom-stopped { color: var(--jp-content-font-color1, inherit); font-size: 13px; }
.loom-cut { color: var(--jp-content-font-color1, inherit); font-size: 12px; font-weight: normal;
  border: 1px solid var(--loom-waiting); border-radius: 3px; padding: 0 4px; margin-left: 6px; }
.loom-confirm { border: 1px solid var(--loom-waiting); border-radius: 4px; padding: 2px 6px; margin: 2px 0; }
.loom-confirm-question { margin-right: 8px; }
.loom-arg-form .widget-label { font-family: var(--jp-code-font-family, monospace); }
.loom-tool-row { font-size: 12px; }
.loom-tool-row code { font-size: 12px; } .loom-decision { color: var(--loom-muted); }
.loom-tool-done { color: var(--loom-done); } .loom-tool-cancelled { color: var(--loom-cancelled); }
.loom-tool-failed, .loom-tool-refused { color: var(--loom-failed); }
.loom-tool-running, .loom-tool-approval, .loom-tool-retrying, .loom-tool-in { color: var(--loom-waiting); }
.loom-spinner { display: inline-block; width: 9px; height: 9px; margin: 0 4px; border-radius: 50%;
  border: 2px solid currentColor; border-right-color: transparent; animation: loom-spin 0.8s linear infinite;
  vertical-align: -1px; }
@keyframes loom-spin { to { transform: rotate(360deg); } }
.loom-card { border: 1px solid var(--loom-waiting); border-radius: 4px; padding: 6px; margin: 4px 0; }
.loom-card pre { margin: 2px 0; font-size: 12px; white-space: pre-wrap; }
.loom-card-desc { font-size: 12px; color: var(--loom-muted); font-weight: normal; }
.loom-args th { text-align: left; vertical-align: top; padding-right: 8px; font-weight: 600; }
.loom-args td { text-align: left; }
.loom-card.loom-decided, .loom-card.loom-closed { border-color: var(--jp-border-color1, #9e9e9e); padding: 2px 6px; }
.loom-click-feedback { font-size: 12px; color: var(--loom-muted); }
.loom-click-feedback[data-state='busy'] { color: var(--loom-waiting); }
.loom-click-feedback[data-state='dead'] { color: var(--loom-failed); }
.loom-answer { border-top: 1px solid var(--jp-border-color2, #ddd); }
.loom-error { color: var(--loom-failed); }
.loom-usage, .loom-live { color: var(--loom-muted); font-size: 12px; }
.loom-thinking summary { color: var(--loom-muted); cursor: pointer; font-size: 12px; }
.loom-thinking pre { white-space: pre-wrap; color: var(--loom-muted); font-size: 12px; }
.loom-child { margin-left: 16px; padding-left: 6px; border-left: 2px solid var(--jp-border-color2, #ddd); }
.loom-child-head { font-size: 11px; color: var(--loom-muted); } .loom-tool-waiting { color: var(--loom-waiting); }
</style>"""
)
