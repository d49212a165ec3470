"""One palette for every view of a run: the live view, the gate cards, the timeline widget and the
matplotlib plots.

Each role (a step kind or a status) has a colour for JupyterLab's light theme and one for its dark
theme, each with a contrast of at least 4.5:1 (WCAG AA for text) against that theme's background
(``--jp-layout-color0``: white in light, ``#111111`` in dark). JupyterLab's own ``--jp-success-color1``,
``--jp-warn-color1`` and ``--jp-error-color1`` are the same in both themes and fall to ~3.4:1 on
the dark background, so the palette keeps its own per-theme values and takes from ``--jp-*`` only
the background, the text colours and the fonts. ``css()`` writes the palette as CSS custom
properties (``--loom-<role>``) for the light theme, switched to the dark values under JupyterLab's
``body[data-jp-theme-light='false']``; the plots, drawn on white, use ``LIGHT``. The filled buttons
(Approve, Refuse, It happened, Run again...) take their fill and text from ``BUTTONS``, at least
4.5:1 in each theme.

    from loom_nb.palette import LIGHT, contrast_ratio
    contrast_ratio(LIGHT["failed"], "#ffffff")   # 5.6
"""

from __future__ import annotations

#: The page background each theme's colours are checked against (JupyterLab's ``--jp-layout-color0``).
BACKGROUND: dict[str, str] = {"light": "#ffffff", "dark": "#111111"}

#: Colours for the light theme (and the plots), by role.
LIGHT: dict[str, str] = {
    "model": "#1565c0",
    "running": "#1565c0",
    "tool": "#2e7d32",
    "done": "#2e7d32",
    "completed": "#2e7d32",
    "gate": "#b45309",
    "waiting": "#b45309",
    "suspended": "#b45309",
    "compaction": "#6a1b9a",
    "effect": "#5f6368",
    "decision": "#c62828",
    "failed": "#c62828",
    "cancelled": "#5f6368",
    "value": "#5f6368",
    "muted": "#5f6368",
}

#: Colours for the dark theme, by role (the same roles as ``LIGHT``).
DARK: dict[str, str] = {
    "model": "#64b5f6",
    "running": "#64b5f6",
    "tool": "#81c784",
    "done": "#81c784",
    "completed": "#81c784",
    "gate": "#ffb74d",
    "waiting": "#ffb74d",
    "suspended": "#ffb74d",
    "compaction": "#ce93d8",
    "effect": "#b0b0b0",
    "decision": "#ef9a9a",
    "failed": "#ef9a9a",
    "cancelled": "#b0b0b0",
    "value": "#b0b0b0",
    "muted": "#b0b0b0",
}

#: The themes, by name (``light`` / ``dark``).
THEMES: dict[str, dict[str, str]] = {"light": LIGHT, "dark": DARK}

#: The filled buttons' colours per theme, by ipywidgets ``button_style``: ``(fill, text)``, the text
#: at least 4.5:1 on the fill. JupyterLab's own fills (``--jp-success-color1`` #388E3C,
#: ``--jp-warn-color1`` #F57C00) under white text are 4.12:1 and 2.70:1 in the light theme.
BUTTONS: dict[str, dict[str, tuple[str, str]]] = {
    "light": {
        "success": ("#2e7d32", "#ffffff"),
        "warning": ("#b45309", "#ffffff"),
        "danger": ("#c62828", "#ffffff"),
        "primary": ("#1565c0", "#ffffff"),
    },
    "dark": {
        "success": ("#81c784", "#111111"),
        "warning": ("#ffb74d", "#111111"),
        "danger": ("#ef9a9a", "#111111"),
        "primary": ("#64b5f6", "#111111"),
    },
}

#: The views whose filled buttons take the palette's colours (``css``).
VIEWS = ".loom-run, .loom-batch, .loom-recovery"


def _channel(c: int) -> float:
    s = c / 255
    return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4


def parse_color(color: str) -> tuple[int, int, int]:
    """``#rrggbb``, ``#rgb`` or ``rgb(r, g, b)`` / ``rgba(r, g, b, a)`` as an (r, g, b) tuple.

    Raises:
        ValueError: the colour is in none of those forms.
    """
    text = color.strip().lower()
    if text.startswith("#"):
        digits = text[1:]
        if len(digits) == 3:
            digits = "".join(d * 2 for d in digits)
        if len(digits) == 6:
            return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)
    elif text.startswith(("rgb(", "rgba(")) and text.endswith(")"):
        parts = text[text.index("(") + 1 : -1].split(",")
        if len(parts) in (3, 4):
            r, g, b = (round(float(p)) for p in parts[:3])
            return r, g, b
    raise ValueError(f"cannot read the colour {color!r}: use #rrggbb, #rgb or rgb(r, g, b)")


def luminance(color: str) -> float:
    """The WCAG relative luminance of ``color`` (0 for black, 1 for white)."""
    r, g, b = (_channel(c) for c in parse_color(color))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(foreground: str, background: str) -> float:
    """The WCAG 2 contrast ratio of two colours (1 to 21; text needs 4.5 for level AA)."""
    a, b = luminance(foreground), luminance(background)
    hi, lo = max(a, b), min(a, b)
    return (hi + 0.05) / (lo + 0.05)


def _variables(theme: str) -> str:
    roles = [f"--loom-{role}: {value};" for role, value in THEMES[theme].items()]
    buttons = [
        f"--loom-button-{style}: {fill}; --loom-button-{style}-text: {text};"
        for style, (fill, text) in BUTTONS[theme].items()
    ]
    return " ".join(roles + buttons)


def css() -> str:
    """The palette as CSS custom properties (``--loom-<role>``, ``--loom-button-<style>`` and
    ``--loom-button-<style>-text``): light values on ``:root``, dark values under JupyterLab's dark
    theme (``body[data-jp-theme-light='false']``); and the rules that give the filled buttons of the
    views (``VIEWS``) the palette's fill and text (pressed too)."""
    rules = []
    for style in BUTTONS["light"]:
        scoped = ", ".join(
            f"{view} .jupyter-button.mod-{style}{state}"
            for view in VIEWS.split(", ")
            for state in ("", ".mod-active", ":active")
        )
        rules.append(
            f"{scoped} {{ background-color: var(--loom-button-{style}); color: var(--loom-button-{style}-text); }}"
        )
    return (
        f":root {{ {_variables('light')} }}\nbody[data-jp-theme-light='false'] {{ {_variables('dark')} }}\n"
        + "\n".join(rules)
    )
