"""Text and HTML pieces the gate cards, the live run view and the magics share.

One public home, so no notebook module imports another's private helpers.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from datetime import datetime
from typing import Any

import ipywidgets as widgets
from ipywidgets.widgets.widget_string import HTMLStyle

from loom_nb.notebook.safe_text import visible


def short_text(value: Any, limit: int = 120) -> str:
    """``value`` as one line of at most ``limit`` characters (JSON unless a string; ``…`` when cut)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: What a line break inside a value shows as, where the value is shown on one line.
LINE_BREAK = "↵"


def one_line(value: Any) -> Any:
    """``value`` with every line break in its strings (nested in lists and dicts too) shown as
    ``↵``, for the one-line forms (a tool row, a decided card), which would otherwise show a
    literal ``\\n``."""
    if isinstance(value, str):
        return value.replace("\r\n", LINE_BREAK).replace("\n", LINE_BREAK)
    if isinstance(value, dict):
        return {k: one_line(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [one_line(v) for v in value]
    return value


def result_value(output: Any) -> Any:
    """What a tool result's preview shows: the value of a result wrapped as ``{"result": value}``
    (how an MCP server returns a value that is not an object, as structured content), else the
    result itself."""
    if isinstance(output, dict) and len(output) == 1 and "result" in output:
        return output["result"]
    return output


def call_text(name: str, arguments: Any) -> str:
    """A tool call as ``name(k='v', ...)`` on one line (line breaks in strings as ``↵``), shortened
    to fit, invisible characters shown escaped (``visible``, as ``repr`` shows them in a value)."""
    arguments = one_line(arguments)
    if isinstance(arguments, dict):
        inner = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    else:
        inner = short_text(arguments, 80)
    return visible(f"{name}({short_text(inner, 100)})")


def arguments_diff(requested: Any, ran: Any) -> str:
    """What a person changed in a call's arguments, on one line: ``path: 'a' → 'b'`` per changed
    argument, ``+name=value`` for an added one, ``-name`` for a removed one (invisible characters
    shown escaped)."""
    if not isinstance(requested, dict) or not isinstance(ran, dict):
        return visible(f"{short_text(one_line(requested), 60)} → {short_text(one_line(ran), 60)}")
    parts = [
        f"{k}: {one_line(requested[k])!r} → {one_line(ran[k])!r}"
        for k in requested
        if k in ran and ran[k] != requested[k]
    ]
    parts += [f"+{k}={one_line(v)!r}" for k, v in ran.items() if k not in requested]
    parts += [f"-{k}" for k in requested if k not in ran]
    return visible(short_text(", ".join(parts), 160))


def clock_text(at: float) -> str:
    """The local clock time of ``at`` (seconds since the epoch) as ``HH:MM:SS``: when a decision was
    recorded, as the cards and tool rows show it (never in a text form: it differs on every run)."""
    return datetime.fromtimestamp(at).strftime("%H:%M:%S")


#: The layout and style models every widget made with ``shared=True`` holds, by name (made on first
#: use, again after a ``Widget.close_all()``).
_SHARED: dict[str, Any] = {}


def shared_model(name: str, make: Callable[[], Any] | None = None) -> Any:
    """The one model of ``name`` that many widgets share, made by ``make`` on first use (by
    default: ``"html_style"`` an ``HTMLStyle``, any other name a ``Layout``, e.g. ``"layout"``,
    ``"box_layout"``). Widgets which never change their layout or style share these, so a view's
    many rows add no model of their own (ipywidgets lets a layout or style model be held by several
    widgets, and a widget be shown in several boxes: every run view shows the one style sheet
    widget). Never change a shared model's traits: every widget holding it would change.
    ``close_tree`` leaves it open."""
    found = _SHARED.get(name)
    if found is None or found.comm is None:
        if make is None:
            make = HTMLStyle if name == "html_style" else widgets.Layout
        found = _SHARED[name] = make()
    return found


def is_shared(widget: Any) -> bool:
    """Whether ``widget`` is one of the shared layout or style models (``shared_model``)."""
    return any(widget is m for m in _SHARED.values())


def html_widget(cls: str, value: str = "", *, shared: bool = False) -> Any:
    """An ``ipywidgets.HTML`` holding ``value``, with the CSS class ``cls``. With ``shared``, it
    holds the shared layout and style models (``shared_model``) instead of two of its own: for a
    widget whose layout and style never change (a tool row, a heading)."""
    if shared:
        w = widgets.HTML(value=value, layout=shared_model("layout"), style=shared_model("html_style"))
    else:
        w = widgets.HTML(value=value)
    w.add_class(cls)
    return w


def shared_box(kind: Any = None) -> Any:
    """A ``VBox`` (or ``kind``) holding the shared box layout (``shared_model("box_layout")``): for
    a box whose layout never changes (the tool rows of a turn, a panel's cards)."""
    return (kind or widgets.VBox)(layout=shared_model("box_layout"))


def widget_tree(root: Any, *, skip: Callable[[Any], bool] = lambda _w: False) -> list[Any]:
    """Every widget ``root`` holds (its children and theirs, its ``layout`` and ``style`` models, any
    widget trait), ``root`` first, each once; a widget for which ``skip`` is true is left out and
    not walked into."""
    out: list[Any] = []
    stack, seen = [root], set()
    while stack:
        w = stack.pop()
        if id(w) in seen or skip(w):
            continue
        seen.add(id(w))
        out.append(w)
        for name in w.keys:
            value = getattr(w, name, None)
            if isinstance(value, widgets.Widget):
                stack.append(value)
            elif isinstance(value, list | tuple):
                stack += [v for v in value if isinstance(v, widgets.Widget)]
    return out


def close_tree(widget: Any) -> int:
    """Close ``widget`` and every widget it holds (``widget_tree``). A widget that leaves a view for
    good must be closed, else its models stay in the kernel and in the notebook's saved widget
    state. The shared layout and style models (``shared_model``) stay open: other widgets hold them.
    Returns how many widgets were closed."""
    tree = widget_tree(widget, skip=is_shared)
    for w in tree:
        widgets.Widget.close(w)  # the widget itself (a card's close(why) means something else)
    return len(tree)


#: The CSS class of a child a box keeps, hidden, until the children after it leave (``take_out``).
GONE_CLASS = "loom-gone"


#: The widgets ``take_out`` took out of their box (each may still be there, hidden, until ``sweep``).
TAKEN_OUT: weakref.WeakSet[Any] = weakref.WeakSet()


def gone(widget: Any) -> bool:
    """Whether ``take_out`` took ``widget`` out of its box (it may still be there, hidden)."""
    return widget in TAKEN_OUT


def take_out(box: Any, child: Any) -> None:
    """Take ``child`` out of ``box`` for good, without drawing the box's other children anew, and
    close what left (``close_tree``). A front end draws anew every child after the first one that
    changed in a box's children (so text typed into them, their focus and scroll would go): a child
    that other children follow stays, hidden (``GONE_CLASS``), until every child after it left too
    (or ``sweep`` drops it)."""
    children = tuple(box.children)
    if not any(c is child for c in children):
        return
    child.add_class(GONE_CLASS)
    TAKEN_OUT.add(child)
    keep = len(children)
    while keep and gone(children[keep - 1]):
        keep -= 1
    if keep < len(children):
        box.children = children[:keep]
        for w in children[keep:]:
            close_tree(w)


def sweep(box: Any) -> None:
    """Drop (and close) every child ``take_out`` left hidden in ``box`` (once nothing in the box
    waits for a person, a redraw of the rest costs nothing)."""
    children = tuple(box.children)
    left = [c for c in children if gone(c)]
    if left:
        box.children = tuple(c for c in children if not gone(c))
        for w in left:
            close_tree(w)


def parse_json_or_text(text: str) -> Any:
    """What a person typed as a payload: JSON when it parses, else the stripped text (None if empty)."""
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


class TextForm:
    """A mixin for widgets whose ``text/plain`` form (front ends without widgets, nbval, GitHub) and
    ``repr`` are ``plain_text()``: put it before the widget class (``class V(TextForm, widgets.VBox)``)."""

    def plain_text(self) -> str:
        """The widget as text (``text()`` by default)."""
        text: str = self.text()  # type: ignore[attr-defined]
        return text

    def __repr__(self) -> str:
        return self.plain_text()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/plain"] = self.plain_text()
        return bundle
