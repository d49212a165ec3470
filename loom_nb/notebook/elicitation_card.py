"""The card of an MCP server's question (``ElicitationCard``, gate kind ``McpElicitation``): the
server's message and a form built from its requested schema (text, number, yes/no and choice
fields, in the server's order), answered Submit (``gate.answer``), Decline or Cancel.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from loom_nb.notebook.formatting import short_text
from loom_nb.notebook.gate_card import GateCard, card_button, card_heading
from loom_nb.notebook.safe_text import visible

#: The value a choice field shows while nothing is chosen (an optional field is then left out).
NOTHING_CHOSEN = "(none)"


def choices(prop: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """A property's choices as ``(label, value)``: its ``enum`` (labelled by ``enumNames``) or its
    ``oneOf`` / ``anyOf`` of ``const`` values (labelled by their ``title``); None when it has none."""
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames")
        labels = names if isinstance(names, list) and len(names) == len(prop["enum"]) else prop["enum"]
        return [(str(label), value) for label, value in zip(labels, prop["enum"], strict=True)]
    for key in ("oneOf", "anyOf"):
        options = prop.get(key)
        if isinstance(options, list) and all(isinstance(o, dict) and "const" in o for o in options):
            return [(str(o.get("title", o["const"])), o["const"]) for o in options]
    return None


class ElicitationCard(GateCard):
    """The card of an ``McpElicitation`` gate: the server's question and its form.

    Attributes:
        fields: The form's input widgets by property name (class ``loom-elicit-field``).
        submit: Button calling ``gate.answer(content)`` (class ``loom-submit``).
        decline: Button calling ``gate.decline()`` (class ``loom-decline``).
        dismiss: Button calling ``gate.cancel()`` (class ``loom-dismiss``).
    """

    css = "loom-elicitation"
    status_text = "Waiting for your answer: the MCP server's call waits for it"

    def _build(self) -> list[Any]:
        g = self.gate
        p = g.payload if isinstance(g.payload, dict) else {}
        schema = g.requested_schema
        properties = _properties(schema)
        required = set(schema.get("required") or ())
        order = [str(n) for n in p.get("fields") or () if n in properties] or list(properties)
        server, tool = html.escape(visible(str(p.get("server", "?")))), html.escape(visible(str(p.get("tool", "?"))))
        title, body = card_heading(
            f"<b>The MCP server {server} asks</b> (during <code>{tool}</code>):", "loom-card-question", g.question or ""
        )
        self.fields: dict[str, Any] = {}
        for name in order:
            self.fields[name] = self._field(name, properties[name], name in required)
        self.submit = card_button("Submit", "loom-submit", "success", "check")
        self.decline = card_button("Decline", "loom-decline", "warning", "ban")
        self.dismiss = card_button("Cancel", "loom-dismiss", "", "times")
        self.submit.on_click(lambda _: self.act("answered", lambda: g.answer(self.content())))
        self.decline.on_click(lambda _: self.act("declined", g.decline))
        self.dismiss.on_click(lambda _: self.act("cancelled", g.cancel))
        self.buttons = [self.submit, self.decline, self.dismiss]
        self.inputs = list(self.fields.values())
        return [title, body, *self.inputs, widgets.HBox(self.buttons)]

    def _field(self, name: str, prop: Any, required: bool) -> Any:
        prop = prop if isinstance(prop, dict) else {}
        label = visible(str(prop.get("title") or name)) + (" *" if required else "")
        hint = visible(str(prop.get("description") or ""))
        default = prop.get("default")
        kind = prop.get("type")
        style = {"description_width": "initial"}
        options = choices(prop)
        field: Any
        if options is not None:
            shown = [(visible(label_), value) for label_, value in options]
            if not required:
                shown = [(NOTHING_CHOSEN, None), *shown]
            value = default if any(v == default for _, v in shown) else shown[0][1]
            field = widgets.Dropdown(options=shown, value=value, description=label, style=style)
        elif kind == "array":
            items = choices(prop.get("items") if isinstance(prop.get("items"), dict) else {}) or []
            field = widgets.SelectMultiple(options=[(visible(a), b) for a, b in items], description=label, style=style)
        elif kind == "boolean":
            field = widgets.Checkbox(value=bool(default), description=label, indent=False)
        else:
            text = "" if default is None else str(default)
            field = widgets.Text(value=text, description=label, placeholder=hint or str(kind or ""), style=style)
        field.add_class("loom-elicit-field")
        field.tooltip = hint or None
        return field

    def content(self) -> dict[str, Any]:
        """The form's answers by field: numbers read as numbers, an empty optional text or an
        unchosen choice left out (the schema check names what is missing or wrong)."""
        properties = _properties(self.gate.requested_schema)
        out: dict[str, Any] = {}
        for name, field in self.fields.items():
            raw = properties.get(name)
            prop: dict[str, Any] = raw if isinstance(raw, dict) else {}
            value = field.value
            if isinstance(field, widgets.SelectMultiple):
                value = list(value)
            elif isinstance(field, widgets.Text):
                value = value.strip()
                if value == "":
                    continue
                if prop.get("type") in ("integer", "number"):
                    value = _number(value, integer=prop.get("type") == "integer")
            elif value is None:  # a choice left unchosen
                continue
            out[name] = value
        return out

    def commands(self) -> str:
        """How to answer from a cell."""
        return f"run.gates[...]: gate.answer({{...}}), gate.decline() or gate.cancel() (run {self.gate.run.id})"

    def summary(self) -> str:
        """The question, on one line."""
        return f"{self.gate.payload.get('tool', '?')} asks: {short_text(self.gate.question or '', 60)}"


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    found = schema.get("properties")
    return found if isinstance(found, dict) else {}


def _number(text: str, *, integer: bool) -> Any:
    """``text`` as a number when it is one (else the text, which the schema check refuses by name)."""
    try:
        return int(text) if integer else float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        return text
