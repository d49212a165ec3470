// loom_nb tail follow: an anywidget placed in a run view (the element of class `loom-run` around
// it). Every element of class `loom-follow` inside that view follows its tail: when its content
// grows, it scrolls to its end, unless the reader scrolled it away from the end; scrolling back to
// the end makes it follow again. A box that opens (a view drawn anew) follows.
// No JupyterLab extension is needed: the module ships with the widget.

const AT_END = 8; // px from the end that still count as "at the end"

function render({ el }) {
  el.classList.add("loom-tail-follow");
  let root = null;
  let observer = null;
  let frame = 0;
  let tries = 0;
  let timer = null;

  function atEnd(box) {
    return box.scrollHeight - box.scrollTop - box.clientHeight <= AT_END;
  }

  function onScroll(event) {
    const box = event.target;
    if (!(box instanceof Element) || !box.classList.contains("loom-follow")) return;
    // a scroll this module made (the box at the position it set) says nothing about the reader
    if (box.dataset.loomSetTop !== undefined && Math.abs(box.scrollTop - Number(box.dataset.loomSetTop)) < 1) return;
    delete box.dataset.loomSetTop;
    if (atEnd(box)) delete box.dataset.loomAway;
    else box.dataset.loomAway = "1";
  }

  function follow() {
    frame = 0;
    if (!root) return;
    for (const box of root.querySelectorAll(".loom-follow")) {
      if (box.dataset.loomAway === "1" || box.scrollHeight <= box.clientHeight) continue;
      const top = box.scrollHeight - box.clientHeight;
      if (Math.abs(box.scrollTop - top) < 1) continue;
      box.scrollTop = top;
      box.dataset.loomSetTop = String(box.scrollTop);
    }
  }

  function soon() {
    if (!frame) frame = requestAnimationFrame(follow);
  }

  function attach() {
    // the widget is attached to the view after render(): find the view once it is in the page
    root = el.isConnected ? el.closest(".loom-run") : null;
    if (!root) {
      if (tries++ < 300) timer = setTimeout(attach, 50);
      return;
    }
    observer = new MutationObserver(soon);
    observer.observe(root, { childList: true, subtree: true, characterData: true, attributes: true,
                             attributeFilter: ["style", "class"] });
    root.addEventListener("scroll", onScroll, true); // scroll does not bubble: listen while it descends
    soon();
  }

  attach();
  return () => {
    clearTimeout(timer);
    if (frame) cancelAnimationFrame(frame);
    if (observer) observer.disconnect();
    if (root) root.removeEventListener("scroll", onScroll, true);
  };
}

export default { render };
