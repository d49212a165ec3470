"""MCP elicitation as a durable gate: a server asking the user a question in the middle of a tool
call (``elicitation/create``, form mode) parks the run on a gate of kind ``McpElicitation``.

The question is a question of the tool's step (``EffectContext.ask``, ``kernel/questions.py``): gate
``<step>:ask:<n>``, payload ``{server, tool, message, schema, fields}`` (the server's requested
schema: flat properties of type string, number, integer or boolean, or an enum; ``fields``: their
order), answered with an
``ElicitationAnswer``: ``accept`` with ``content`` matching the schema, ``decline`` or ``cancel``
(the MCP ``ElicitResult`` actions). An answer whose content breaks the schema is refused at the call
site (``ResumeValidationError`` naming the field); nothing is recorded, the gate stays open.

While the person thinks, the call is in flight and the server waits; loom's ``read_timeout`` clock
stops meanwhile. The run is ``suspended`` in the journal, so after a kernel restart (the stdio
server died with the kernel: the call's outcome is unknown) the gate is still there: answer it, the
call is run again (at once when the tool is idempotent, else after a person's "run it again" on its
in-doubt gate), and when the server asks the same question again it gets the journaled answer
without asking anybody again.

Not handled (the server gets a JSON-RPC error it may report): URL-mode elicitations, and an
elicitation while several calls of one server are in flight at once (it cannot say which one asks).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

from pydantic import BaseModel

from loom_nb.errors import ResumeValidationError
from loom_nb.kernel.effect_registry import EffectContext

#: The gate kind of an MCP server's elicitation (a persisted name: CHANGELOG.md).
MCP_ELICITATION_GATE: Final = "McpElicitation"

#: What a call's question asker takes: the server's message and requested schema.
Asker = Callable[[str, dict[str, Any]], Awaitable["ElicitationAnswer"]]


class ElicitationAnswer(BaseModel):
    """A person's answer to an MCP elicitation (the resume payload of an ``McpElicitation`` gate).

    Attributes:
        action: ``accept`` (``content`` holds the answers), ``decline`` or ``cancel``.
        content: The answers by property name when accepted (strings, numbers, booleans, or lists
            of strings for a multi-select), else None.
    """

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, str | int | float | bool | list[str]] | None = None

    def check_gate_payload(self, payload: Any) -> None:
        """Check the content against the schema the server asked with (the gate's payload).

        Raises:
            ResumeValidationError: content with a decline or cancel, or content that breaks the
                schema (the message names each field and what is wrong).
        """
        schema = payload.get("schema") if isinstance(payload, dict) else None
        if self.action != "accept":
            if self.content is not None:
                raise ResumeValidationError(f"a {self.action} carries no content; answer with accept to give it.")
            return
        problems = content_problems(schema if isinstance(schema, dict) else {}, self.content or {})
        if problems:
            fields = ", ".join(sorted(str(p) for p in (schema or {}).get("properties", {}))) or "none"
            raise ResumeValidationError(
                f"the answer does not fit the server's form: {'; '.join(problems)}.\n"
                f"Its fields: {fields}. Answer again with gate.answer({{...}}), or gate.decline()."
            )


def content_problems(schema: dict[str, Any], content: dict[str, Any]) -> list[str]:
    """What is wrong with ``content`` for the requested ``schema``, one text per field (none: it fits)."""
    jsonschema = importlib.import_module("jsonschema")  # the MCP SDK's own dependency, loaded lazily
    validator = jsonschema.validators.validator_for(schema)(schema)
    problems = []
    for error in validator.iter_errors(content):
        where = ".".join(str(p) for p in error.absolute_path)
        if not where and error.validator == "required":
            problems.append(f"field {error.message.split(' ')[0]} is required")
        elif not where and error.validator == "additionalProperties":
            problems.append(f"unknown field ({error.message})")
        else:
            problems.append(f"field {where!r}: {error.message}" if where else error.message)
    known = schema.get("properties")
    if isinstance(known, dict) and "additionalProperties" not in schema:
        problems += [f"field {name!r} is not in the form" for name in sorted(set(content) - set(known))]
    return sorted(problems)


def question(server: str, tool: str, message: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The payload of the gate: what the person is shown (and what a question asked again matches).
    ``fields`` keeps the order the server gave its properties in (the journal sorts JSON keys)."""
    properties = schema.get("properties")
    fields = [str(name) for name in properties] if isinstance(properties, dict) else []
    return {"server": server, "tool": tool, "message": message, "schema": schema, "fields": fields}


def asker(context: EffectContext, *, server: str, tool: str, redact: Callable[[Any], Any]) -> Asker | None:
    """How a call made with ``context`` asks its person (None outside a run: no elicitation then).

    Made on the loop the call is made from (its run's, where the journal is written); the asker it
    returns may be awaited from any loop (the MCP session's own thread)."""
    ask = context.ask
    if ask is None:
        return None
    loop = asyncio.get_running_loop()

    async def asking(message: str, schema: dict[str, Any]) -> ElicitationAnswer:
        payload = question(server, tool, str(redact(message)), redact(schema))

        async def on_the_runs_loop() -> ElicitationAnswer:
            answer: ElicitationAnswer = await ask(MCP_ELICITATION_GATE, payload, ElicitationAnswer)
            return answer

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(on_the_runs_loop(), loop))

    return asking
