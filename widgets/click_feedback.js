// loom_nb click feedback: an anywidget placed inside a gate card (or the Approve all bar), the
// element of class `loom-feedback-scope` around it. A click on a button of that scope is answered
// at once in the page: the scope's buttons are disabled and the widget says "sent"; if the kernel
// has not acknowledged the click (the `acked` counter) after `busy_after` seconds, it says the
// kernel is busy (another cell is running) and that the click runs when the kernel is free.
// No JupyterLab extension is needed: the module ships with the widget.

function render({ model, el }) {
  el.classList.add("loom-click-feedback");
  // the widget is attached to its card after render(): find the scope at click time
  const doc = el.ownerDocument || document;
  let timer = null;
  let waiting = false;

  function say(text, cls) {
    el.textContent = text;
    el.dataset.state = cls;
  }

  function onClick(event) {
    const scope = el.closest(".loom-feedback-scope");
    const button = event.target instanceof Element ? event.target.closest("button") : null;
    if (!scope || !button || button.disabled || button.closest(".loom-feedback-scope") !== scope) return;
    // Edit only opens the form; a button of class loom-no-feedback only asks a question
    if (button.classList.contains("loom-edit") || button.classList.contains("loom-no-feedback")) return;
    waiting = true;
    say("sent…", "sent");
    // after the button's own handler has sent the click to the kernel
    setTimeout(() => {
      for (const b of scope.querySelectorAll("button")) {
        if (b.closest(".loom-feedback-scope") === scope) b.disabled = true;
      }
    }, 0);
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (waiting) {
        say("sent · the kernel is busy (another cell is running?): your click runs when it is free", "busy");
      }
    }, 1000 * (model.get("busy_after") || 0.6));
  }

  function acked() {
    waiting = false;
    clearTimeout(timer);
    say("", "idle");
  }

  doc.addEventListener("click", onClick, true);
  model.on("change:acked", acked);
  return () => {
    clearTimeout(timer);
    doc.removeEventListener("click", onClick, true);
  };
}

export default { render };
