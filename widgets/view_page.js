// loom_nb view page: an anywidget placed in a run view (the element of class `loom-run` around it).
// It does in the page what ipywidgets cannot say from the kernel:
// - tails: every element of class `loom-follow` in the view follows its tail: when its content
//   grows, it scrolls to its end, unless the reader scrolled it away from the end; scrolling back
//   to the end makes it follow again. A box that opens (a view drawn anew) follows;
// - live regions: the run's status, each card's status line and the click feedback are
//   `role=status` (polite), an error `role=alert`, so a screen reader hears what changed;
// - keys: Escape closes the question a confirmation asks (focus back on the button that asked) or
//   an open Edit form; a question that appears takes the focus on its cancelling button, and once
//   it goes, the button that asked takes it back;
// - Show all: shown only while a capped box overflows (or to put the cap back);
// - the page stays: when the view changes size while it is in sight and the page scrolled by
//   itself for it (the browser's scroll anchoring keeps a focused editor below the view in place,
//   so the view would climb by all it grew, at the end of a stream too), the page scrolls back so
//   the view's top stays where it was; not while the focus is in the view (the box being typed in
//   stays put) nor when the view is out of sight (what the reader looks at stays put). A view
//   drawn anew in the same output (the update its display gets at its first gates and its end) keeps the top
//   its predecessor had there, for two seconds or until the reader scrolls, clicks or types.
// No JupyterLab extension is needed: the module ships with the widget.

const AT_END = 8; // px from the end that still count as "at the end"

const PERSON = ["wheel", "pointerdown", "keydown", "touchstart"]; // what ends a drawn-anew view's hold

const LIVE = [
  [".loom-run-status, .loom-card-status, .loom-click-feedback, .loom-stopped", "status"],
  [".loom-error", "alert"],
];

function render({ el }) {
  el.classList.add("loom-view-page");
  let root = null;
  let observer = null;
  let frame = 0;
  let tries = 0;
  let timer = null;
  let asker = null; // the button whose click asked the question shown last
  let refocus = null; // that button, to take the focus back once its question went and it is enabled
  let sizes = null; // watches the view's size (the page stays)
  let place = null; // {top, height} of the view in its scroller, as the reader last had it
  let page = null; // that scroller (the notebook's)
  let holder = null; // the output element around the view: it outlives a view drawn anew in it
  let restore = null; // {top, until}: where the view drawn anew keeps its top, and until when

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
    for (const box of root.querySelectorAll(".loom-follow")) {
      if (box.dataset.loomAway === "1" || box.scrollHeight <= box.clientHeight) continue;
      const top = box.scrollHeight - box.clientHeight;
      if (Math.abs(box.scrollTop - top) < 1) continue;
      box.scrollTop = top;
      box.dataset.loomSetTop = String(box.scrollTop);
    }
  }

  function mark() {
    for (const [selector, role] of LIVE) {
      for (const e of root.querySelectorAll(selector)) {
        if (e.getAttribute("role") === role) continue;
        e.setAttribute("role", role);
        e.setAttribute("aria-live", role === "alert" ? "assertive" : "polite");
      }
    }
  }

  function shown(e) {
    return e.isConnected && e.getClientRects().length > 0;
  }

  function focusQuestions() {
    // a question that appears takes the focus (on its cancelling button) when the focus was
    // in this view or nowhere (the button that asked is disabled meanwhile, which drops it)
    const active = root.ownerDocument.activeElement;
    const here = !active || active === root.ownerDocument.body || root.contains(active);
    for (const q of root.querySelectorAll(".loom-confirm")) {
      if (!shown(q)) {
        if (q.dataset.loomFocused) refocus = asker;
        delete q.dataset.loomFocused;
        continue;
      }
      if (q.dataset.loomFocused) continue;
      const no = q.querySelector(".loom-confirm-no");
      if (!no) continue;
      q.dataset.loomFocused = "1";
      refocus = null;
      if (here) no.focus();
    }
    if (refocus && refocus.isConnected && !refocus.disabled && shown(refocus)) {
      if (here) refocus.focus();
      refocus = null;
    }
  }

  function showExpand() {
    // Show all only where it lifts something: a capped box whose content overflows it
    const expand = root.querySelector(".loom-expand");
    const body = root.querySelector(".loom-body");
    if (!expand || !body) return;
    const capped = body.classList.contains("loom-capped");
    const boxes = [body, ...root.querySelectorAll(".loom-current.loom-capped .loom-turn-text")];
    const display = !capped || boxes.some(b => b.scrollHeight > b.clientHeight + 1) ? "" : "none";
    if (expand.style.display !== display) expand.style.display = display;
  }

  function scroller() {
    if (page && page.isConnected && page.contains(root)) return page;
    page = null;
    for (let a = root.parentElement; a && !page; a = a.parentElement) {
      if (a.scrollHeight > a.clientHeight && /(auto|scroll)/.test(getComputedStyle(a).overflowY)) page = a;
    }
    return page;
  }

  function where(box) {
    const r = root.getBoundingClientRect();
    return { top: r.top - box.getBoundingClientRect().top, height: r.height };
  }

  function inSight(spot, box) {
    return spot.top < box.clientHeight && spot.top + spot.height > 0;
  }

  function remember(box) {
    place = where(box);
    if (holder) holder.__loomPlace = { ...place, shown: inSight(place, box) };
  }

  function endRestore() {
    restore = null;
  }

  function stay(event) {
    // on the page's scroll and on the view's resize (whichever the browser reports first): the
    // view moved and changed size at once, so the browser scrolled the page for the new size
    const box = root ? scroller() : null;
    if (!box || (event instanceof Event && event.target !== box)) return;
    const now = where(box);
    if (restore && performance.now() > restore.until) restore = null;
    if (restore) {
      if (Math.abs(now.top - restore.top) >= 1) box.scrollTop += now.top - restore.top;
      remember(box);
      return;
    }
    const before = place;
    place = now;
    if (holder) holder.__loomPlace = { ...now, shown: inSight(now, box) };
    if (!before || Math.abs(now.top - before.top) < 1 || Math.abs(now.height - before.height) < 1) return;
    if (!inSight(before, box) || root.contains(root.ownerDocument.activeElement)) return;
    box.scrollTop += now.top - before.top;
    remember(box);
  }

  function update() {
    frame = 0;
    if (!root) return;
    follow();
    showExpand();
    mark();
    focusQuestions();
  }

  function soon() {
    if (!frame) frame = requestAnimationFrame(update);
  }

  function onClick(event) {
    const button = event.target instanceof Element ? event.target.closest("button") : null;
    if (button && button.classList.contains("loom-no-feedback") && !button.classList.contains("loom-confirm-no")) {
      asker = button;
    }
  }

  function onKey(event) {
    if (event.key !== "Escape" || !(event.target instanceof Element)) return;
    const question = [...root.querySelectorAll(".loom-confirm")].find(shown);
    const card = event.target.closest(".loom-card");
    const edit = card ? card.querySelector(".loom-edit") : null;
    let button = null;
    if (question) button = question.querySelector(".loom-confirm-no");
    else if (edit && card.querySelector(".loom-arg-form") && shown(card.querySelector(".loom-arg-form"))) button = edit;
    if (!button || button.disabled) return;
    event.preventDefault();
    event.stopPropagation(); // JupyterLab's Escape leaves the cell's edit mode: not here
    button.click();
    if (button === edit) edit.focus();
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
                             attributeFilter: ["style", "class", "disabled"] });
    root.addEventListener("scroll", onScroll, true); // scroll does not bubble: listen while it descends
    root.addEventListener("keydown", onKey, true);
    root.addEventListener("click", onClick, true);
    holder = root.closest(".jp-OutputArea-output") || root.parentElement;
    const last = holder ? holder.__loomPlace : null;
    if (last && last.shown) restore = { top: last.top, until: performance.now() + 2000 };
    for (const kind of PERSON) root.ownerDocument.addEventListener(kind, endRestore, true);
    sizes = new ResizeObserver(stay);
    sizes.observe(root);
    root.ownerDocument.addEventListener("scroll", stay, true);
    const box = scroller();
    if (box && !restore) remember(box);
    soon();
  }

  attach();
  return () => {
    clearTimeout(timer);
    if (frame) cancelAnimationFrame(frame);
    if (observer) observer.disconnect();
    if (sizes) sizes.disconnect();
    if (root) {
      root.removeEventListener("scroll", onScroll, true);
      root.removeEventListener("keydown", onKey, true);
      root.removeEventListener("click", onClick, true);
      root.ownerDocument.removeEventListener("scroll", stay, true);
      for (const kind of PERSON) root.ownerDocument.removeEventListener(kind, endRestore, true);
    }
  };
}

export default { render };
