// loom_nb step timeline: one bar per step over time, coloured by kind (model, tool, gate, compaction).
// An anywidget ES module. The kernel syncs `bars` ([{id, kind, label, start, end, status}]), `origin`,
// `now`, `status` and `execution_id`; open bars grow with the local clock while the run is live.
//
// A time axis (seconds since the start) runs under the bars; each row ends with its duration and
// its full label is the row's tooltip. A long wait at a gate with nothing else running (a person
// deciding) is drawn on a broken axis: the quiet stretch is cut to a narrow band marked with its
// real length, so the steps after it keep their width. The legend lists only the kinds present.
// Colours are the palette's CSS variables (--loom-<kind>), light or dark with JupyterLab's theme.

const KINDS = ["model", "tool", "gate", "compaction", "effect"];
const LEGEND = { model: "model call", tool: "tool call", gate: "gate wait", compaction: "compaction", effect: "effect" };
// a quiet gate wait longer than this share of the whole span, and than BREAK_MIN seconds, is cut
const BREAK_SHARE = 0.2;
const BREAK_MIN = 1;
// what a cut wait keeps of the drawn width
const BREAK_WIDTH = 0.05;

function fmt(seconds) {
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 120) return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

function niceStep(span) {
  const raw = span / 6;
  const pow = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (raw <= m * pow) return m * pow;
  return 10 * pow;
}

// Stretches [a, b] (seconds since the origin) where only gates wait and that are long enough to cut.
export function quietGaps(bars, origin, now, span) {
  const busy = bars
    .filter((b) => b.kind !== "gate")
    .map((b) => [b.start - origin, (b.end ?? now) - origin])
    .sort((x, y) => x[0] - y[0]);
  const gaps = [];
  for (const g of bars.filter((b) => b.kind === "gate")) {
    let pieces = [[g.start - origin, (g.end ?? now) - origin]];
    for (const [s, e] of busy) {
      pieces = pieces.flatMap(([a, b]) => {
        if (e <= a || s >= b) return [[a, b]];
        const out = [];
        if (s > a) out.push([a, s]);
        if (e < b) out.push([e, b]);
        return out;
      });
    }
    for (const [a, b] of pieces) if (b - a > Math.max(BREAK_SHARE * span, BREAK_MIN)) gaps.push([a, b]);
  }
  gaps.sort((x, y) => x[0] - y[0]);
  const merged = [];
  for (const g of gaps) {
    const last = merged[merged.length - 1];
    if (last && g[0] <= last[1]) last[1] = Math.max(last[1], g[1]);
    else merged.push([...g]);
  }
  return merged;
}

// A map from seconds to a fraction of the width, with each gap cut to BREAK_WIDTH of the rest.
export function scale(span, gaps) {
  const cut = gaps.reduce((n, [a, b]) => n + (b - a), 0);
  const kept = Math.max(span - cut, 1e-3);
  const band = (kept * BREAK_WIDTH) / (1 - BREAK_WIDTH * gaps.length || 1);
  const total = kept + band * gaps.length;
  return (t) => {
    let x = t;
    for (const [a, b] of gaps) {
      if (t >= b) x -= b - a - band;
      else if (t > a) x -= (t - a) - (band * (t - a)) / (b - a);
    }
    return Math.min(Math.max(x / total, 0), 1);
  };
}

function render({ model, el }) {
  el.classList.add("loom-timeline");
  const header = document.createElement("div");
  header.className = "loom-tl-header";
  const chart = document.createElement("div");
  chart.className = "loom-tl-chart";
  const axis = document.createElement("div");
  axis.className = "loom-tl-row loom-tl-axis-row";
  const legend = document.createElement("div");
  legend.className = "loom-tl-legend";
  el.append(header, chart, axis, legend);

  let receivedAt = performance.now();
  let timer = null;

  function live() {
    const status = model.get("status");
    return status === "running" || status === "suspended";
  }

  function draw() {
    const bars = model.get("bars") || [];
    const origin = model.get("origin") || 0;
    const now = (model.get("now") || origin) + (live() ? (performance.now() - receivedAt) / 1000 : 0);
    let span = Math.max(now - origin, 1e-3);
    for (const b of bars) span = Math.max(span, (b.end ?? now) - origin);
    const gaps = quietGaps(bars, origin, now, span);
    const x = scale(span, gaps);
    header.textContent =
      `${model.get("execution_id")} · ${model.get("status")} · ${bars.length} step(s) · ${fmt(span)}`;

    const rows = bars.map((b) => {
      const row = document.createElement("div");
      row.className = "loom-tl-row";
      const end = b.end ?? now;
      const tip = `${b.label}\n${b.kind}, ${b.status}: ${fmt(b.start - origin)} → ${
        b.end == null ? "…" : fmt(b.end - origin)
      } (${fmt(end - b.start)})`;
      row.title = tip;
      const label = document.createElement("span");
      label.className = "loom-tl-label";
      label.textContent = b.label;
      const track = document.createElement("div");
      track.className = "loom-tl-track";
      const bar = document.createElement("div");
      bar.className = `loom-tl-bar loom-tl-${KINDS.includes(b.kind) ? b.kind : "effect"} loom-tl-${b.status}`;
      const left = x(b.start - origin);
      bar.style.left = `${100 * left}%`;
      bar.style.width = `max(2px, ${100 * (x(end - origin) - left)}%)`;
      bar.title = tip;
      track.append(bar);
      for (const [a, z] of gaps) track.append(breakMark(x, a, z));
      const dur = document.createElement("span");
      dur.className = "loom-tl-duration";
      dur.textContent = b.end == null ? `${fmt(end - b.start)}…` : fmt(end - b.start);
      row.append(label, track, dur);
      return row;
    });
    chart.replaceChildren(...rows);

    // the time axis: ticks outside the cut stretches, and each cut marked with its real length
    const spacer = document.createElement("span");
    spacer.className = "loom-tl-label";
    spacer.textContent = "seconds";
    const track = document.createElement("div");
    track.className = "loom-tl-track loom-tl-axis";
    const step = niceStep(span - gaps.reduce((n, [a, b]) => n + (b - a), 0) || span);
    // labels never overlap: a tick is left out when it would sit too near a cut's label or another tick
    const placed = gaps.map(([a, b]) => (x(a) + x(b)) / 2);
    for (let t = 0; t <= span + 1e-9; t += step) {
      if (gaps.some(([a, b]) => t > a && t < b)) continue;
      if (placed.some((p) => Math.abs(x(t) - p) < 0.14)) continue;
      placed.push(x(t));
      const tick = document.createElement("span");
      tick.className = "loom-tl-tick";
      tick.style.left = `${100 * x(t)}%`;
      tick.textContent = fmt(t);
      track.append(tick);
    }
    for (const [a, z] of gaps) {
      const mark = document.createElement("span");
      mark.className = "loom-tl-break-label";
      mark.style.left = `${50 * (x(a) + x(z))}%`;
      mark.textContent = `⋯ ${fmt(z - a)} ⋯`;
      mark.title = `waiting at a gate for ${fmt(z - a)} with nothing else running: the axis is cut here`;
      track.append(mark);
    }
    const end = document.createElement("span");
    end.className = "loom-tl-duration";
    axis.replaceChildren(spacer, track, end);

    const present = KINDS.filter((k) => bars.some((b) => (KINDS.includes(b.kind) ? b.kind : "effect") === k));
    legend.replaceChildren(
      ...present.map((kind) => {
        const item = document.createElement("span");
        item.className = `loom-tl-key loom-tl-key-${kind}`;
        const swatch = document.createElement("span");
        swatch.className = `loom-tl-swatch loom-tl-${kind}`;
        item.append(swatch, LEGEND[kind]);
        return item;
      })
    );
  }

  function breakMark(x, a, z) {
    const mark = document.createElement("span");
    mark.className = "loom-tl-break";
    mark.style.left = `${100 * x(a)}%`;
    mark.style.width = `${100 * (x(z) - x(a))}%`;
    return mark;
  }

  function schedule() {
    if (live() && timer === null) {
      timer = setInterval(draw, 250);
    } else if (!live() && timer !== null) {
      clearInterval(timer);
      timer = null;
    }
  }

  function changed() {
    receivedAt = performance.now();
    draw();
    schedule();
  }

  for (const name of ["bars", "origin", "now", "status", "execution_id"]) {
    model.on(`change:${name}`, changed);
  }
  changed();
  return () => {
    if (timer !== null) clearInterval(timer);
  };
}

export default { render };
