// loom_nb click feedback: an anywidget placed inside a gate card (or the Approve all bar), the
// element of class `loom-feedback-scope` around it. A click on a button of that scope is answered
// at once in the page: the scope's buttons are disabled and the widget says "sent"; if the kernel
// has not acknowledged the click (the `acked` counter) after `busy_after` seconds, it says the
// kernel is busy (another cell is running) and that the click runs when the kernel is free.
// A card whose kernel is gone (restarted: its widget model has no live comm any more) says so
// instead, names `%loom pending` and disables its buttons: as soon as the page hears of the
// restart, when it is drawn from a dead model, and on a click (which then goes nowhere).
// No JupyterLab extension is needed: the module ships with the widget.

const DEAD_BEFORE = "this card belongs to a kernel that has restarted: it can no longer act. Run ";
const DEAD_AFTER = " in a cell for a live card of this gate.";
const DEAD_AFTER_ALL = " in a cell for live cards of these gates.";  // the Approve all bar

// The @jupyter-widgets model behind anywidget's model proxy, or null when it cannot be found.
// The proxy hands `widget_manager` through (anywidget says it may narrow it one day), and the
// kernel side syncs the widget's own model id (`own_id`); `get_model` and the model's
// `comm_live` are public API of @jupyter-widgets/base. Everything this module knows of the
// widget manager is in this function and `isDead`.
function widgetModel(model) {
  const manager = model.widget_manager;
  const id = model.get("own_id");
  if (!manager || typeof manager.get_model !== "function" || !id) return Promise.resolve(null);
  return Promise.resolve(manager.get_model(id)).catch(() => null);
}

// True when the model is known and its comm is not live: the kernel that made it restarted (the
// widget manager marks every model of the old kernel so), or it was drawn from saved state.
function isDead(widget) {
  return widget !== null && widget.comm_live === false;
}

function render({ model, el }) {
  el.classList.add("loom-click-feedback");
  // the widget is attached to its card after render(): find the scope at click time
  const doc = el.ownerDocument || document;
  let timer = null;
  let waiting = false;
  let widget = null;
  let dead = false;
  let retries = null;
  let tries = 0;

  function say(text, cls) {
    el.textContent = text;
    el.dataset.state = cls;
  }

  function ownScope(scope, node) {
    return node.closest(".loom-feedback-scope") === scope;
  }

  function lockScope(scope, selector) {
    for (const b of scope.querySelectorAll(selector)) {
      if (ownScope(scope, b)) b.disabled = true;
    }
  }

  // Say the card cannot act any more and disable it. `always`: on a click; otherwise only a card
  // still waiting for an answer says so (a decided or closed one keeps its line).
  function markDead(always) {
    const scope = el.closest(".loom-feedback-scope");
    if (!scope) {  // not attached yet: look again a little later (for 10 s at most)
      clearTimeout(retries);
      if (tries++ < 100) retries = setTimeout(() => markDead(always), 100);
      return;
    }
    if (!always && (scope.classList.contains("loom-decided") || scope.classList.contains("loom-closed"))) return;
    dead = true;
    waiting = false;
    clearTimeout(timer);
    el.textContent = "";
    const code = doc.createElement("code");
    code.textContent = "%loom pending";
    el.append(DEAD_BEFORE, code, scope.classList.contains("loom-card") ? DEAD_AFTER : DEAD_AFTER_ALL);
    el.dataset.state = "dead";
    scope.classList.add("loom-dead-card");
    lockScope(scope, "button, input, textarea, select");
  }

  function checkLive() {
    if (isDead(widget)) markDead(false);
  }

  function onClick(event) {
    const scope = el.closest(".loom-feedback-scope");
    const button = event.target instanceof Element ? event.target.closest("button") : null;
    if (!scope || !button || button.disabled || !ownScope(scope, button)) return;
    if (dead || isDead(widget)) {  // the click would go nowhere: keep it from the button
      event.stopPropagation();
      event.preventDefault();
      markDead(true);
      return;
    }
    // Edit only opens the form; a button of class loom-no-feedback only asks a question
    if (button.classList.contains("loom-edit") || button.classList.contains("loom-no-feedback")) return;
    waiting = true;
    say("sent…", "sent");
    // after the button's own handler has sent the click to the kernel
    setTimeout(() => lockScope(scope, "button"), 0);
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (waiting && !dead) {
        say("sent · the kernel is busy (another cell is running?): your click runs when it is free", "busy");
      }
    }, 1000 * (model.get("busy_after") || 0.6));
  }

  function acked() {
    waiting = false;
    clearTimeout(timer);
    if (!dead) say("", "idle");
  }

  doc.addEventListener("click", onClick, true);
  model.on("change:acked", acked);
  // the widget manager triggers `comm_live_update` on a model when its kernel restarts
  model.on("comm_live_update", checkLive);
  widgetModel(model).then((found) => {
    widget = found;
    checkLive();  // drawn from a model that is dead already (e.g. after a restart)
  });
  return () => {
    clearTimeout(timer);
    clearTimeout(retries);
    doc.removeEventListener("click", onClick, true);
  };
}

export default { render };
