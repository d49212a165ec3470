// loom_nb step timeline: one bar per step over time, coloured by kind (model, tool, gate, compaction).
// An anywidget ES module. The kernel syncs `bars` ([{id, kind, label, start, end, status}]), `origin`,
// `now`, `status` and `execution_id`; open bars grow with the local clock while the run is live.

const KINDS = ["model", "tool", "gate", "compaction", "effect"];

function fmt(seconds) {
  return seconds < 1 ? `${Math.round(seconds * 1000)} ms` : `${seconds.toFixed(2)} s`;
}

function render({ model, el }) {
  el.classList.add("loom-timeline");
  const header = document.createElement("div");
  header.className = "loom-tl-header";
  const chart = document.createElement("div");
  chart.className = "loom-tl-chart";
  const legend = document.createElement("div");
  legend.className = "loom-tl-legend";
  for (const kind of KINDS.slice(0, 4)) {
    const item = document.createElement("span");
    item.className = `loom-tl-key loom-tl-${kind}`;
    item.textContent = kind === "gate" ? "gate wait" : kind;
    legend.append(item);
  }
  el.append(header, chart, legend);

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
    header.textContent =
      `${model.get("execution_id")} · ${model.get("status")} · ${bars.length} step(s) · ${fmt(span)}`;
    const rows = bars.map((b) => {
      const row = document.createElement("div");
      row.className = "loom-tl-row";
      const label = document.createElement("span");
      label.className = "loom-tl-label";
      label.textContent = b.label;
      label.title = b.id;
      const track = document.createElement("div");
      track.className = "loom-tl-track";
      const bar = document.createElement("div");
      const end = b.end ?? now;
      bar.className = `loom-tl-bar loom-tl-${KINDS.includes(b.kind) ? b.kind : "effect"} loom-tl-${b.status}`;
      bar.style.left = `${(100 * (b.start - origin)) / span}%`;
      bar.style.width = `max(2px, ${(100 * (end - b.start)) / span}%)`;
      bar.title = `${b.id} (${b.kind}, ${b.status}): ${fmt(b.start - origin)} → ${
        b.end == null ? "…" : fmt(b.end - origin)
      } = ${fmt(end - b.start)}`;
      track.append(bar);
      row.append(label, track);
      return row;
    });
    chart.replaceChildren(...rows);
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
