"""The edit form of an approval card: a tool call's arguments as input fields built from the tool's
JSON schema (``ArgumentForm``), showing each value as a person should read it (invisible characters
escaped, ``safe_text.visible``) and reading back exactly what will run."""

from __future__ import annotations

import json
from typing import Any

import ipywidgets as widgets

from loom_nb.notebook.safe_text import unescape_visible, visible, visible_json


def ordered_arguments(arguments: dict[str, Any], schema: dict[str, Any]) -> list[tuple[str, Any]]:
    """The arguments in the tool's parameter order (its signature's), then any others as given."""
    order = list((schema.get("properties") or {}).keys())
    known = [(name, arguments[name]) for name in order if name in arguments]
    return known + [(k, v) for k, v in arguments.items() if k not in order]


def _kind_of(prop: dict[str, Any]) -> str:
    kind = prop.get("type")
    if kind is None:
        kinds = [p.get("type") for p in prop.get("anyOf") or () if p.get("type") != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    return str(kind or "json")


class ArgumentForm(widgets.VBox):  # type: ignore[misc]
    """A form to edit a tool call's arguments, built from the tool's JSON schema: a text box per
    string (a text area when multi-line), a number box per integer or number, a checkbox per
    boolean, and a JSON text area for anything else. Each field has the CSS class
    ``loom-arg-<name>``; the form has ``loom-arg-form``.

    A text field shows its string with invisible characters escaped (``visible``: ``\\u202e``) and a
    JSON field writes them as JSON escapes (``visible_json``), so no field reads as another value
    than it holds. A field left as shown gives back the model's value exactly; a changed text field
    reads each such escape back as its character (``unescape_visible``).

    Args:
        arguments: The arguments the model asked for (the initial values).
        schema: The tool's JSON schema (``{}``: every argument edited as JSON, in the given order).

    Attributes:
        fields: The input widget of each argument, by name, in the tool's parameter order.
    """

    def __init__(self, arguments: dict[str, Any], schema: dict[str, Any]) -> None:
        props = schema.get("properties") or {}
        self.kinds: dict[str, str] = {}
        self.fields: dict[str, Any] = {}
        self._given: dict[str, tuple[str, Any]] = {}  # each text field: (what it showed, the value)
        rows = []
        for name, value in ordered_arguments(arguments, schema):
            kind = _kind_of(props.get(name) or {})
            field = self._field(kind, value)
            field.add_class(f"loom-arg-{name}")
            self.kinds[name], self.fields[name] = kind, field
            if isinstance(field, widgets.Text | widgets.Textarea):
                self._given[name] = (field.value, value)
            field.description = visible(name)  # its label (a <label> tied to the input), not a placeholder
            field.style.description_width = "110px"
            rows.append(field)
        super().__init__(children=rows)
        self.add_class("loom-arg-form")

    @staticmethod
    def _field(kind: str, value: Any) -> Any:
        wide = widgets.Layout(width="min(560px, 80%)")
        if kind == "boolean" and isinstance(value, bool):
            return widgets.Checkbox(value=value, indent=True)
        if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
            return widgets.IntText(value=value, layout=wide)
        if kind in ("number", "integer") and isinstance(value, int | float) and not isinstance(value, bool):
            return widgets.FloatText(value=float(value), layout=wide)
        if kind == "string" and isinstance(value, str):
            if "\n" in value or len(value) > 80:
                rows = min(max(value.count("\n") + 2, 3), 14)
                return widgets.Textarea(value=visible(value), rows=rows, layout=wide)
            return widgets.Text(value=visible(value), layout=wide)
        return widgets.Textarea(value=visible_json(value), layout=wide)

    def values(self) -> dict[str, Any]:
        """The edited arguments.

        Raises:
            ValueError: a JSON field does not parse (the message names the argument).
        """
        out: dict[str, Any] = {}
        for name, field in self.fields.items():
            shown, value = self._given.get(name, (None, None))
            if shown is not None and field.value == shown:  # as shown: the model's value, exactly
                out[name] = value
            elif isinstance(field, widgets.Textarea) and self.kinds[name] != "string":
                try:
                    out[name] = json.loads(field.value)
                except ValueError as exc:
                    raise ValueError(f"argument {name!r} is not valid JSON: {exc}") from None
            elif isinstance(field, widgets.Text | widgets.Textarea):
                out[name] = unescape_visible(field.value)
            else:
                out[name] = field.value
        return out
