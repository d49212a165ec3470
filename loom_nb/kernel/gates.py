"""Gates (where an execution waits for a person or a system), ``Suspend``, and resume schemas."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from loom_nb.errors import ResumeValidationError, UsageError
from loom_nb.journal.canonical import to_jsonable
from loom_nb.kernel.qualified_names import find_loaded


def answer_text(payload: Any) -> str:
    """A gate's recorded answer in a few words, for a message (``approved``, ``refused (why)``,
    ``marked as happened``...): never the payload's repr, which holds digests and every field."""
    data = to_jsonable(payload)
    if not isinstance(data, dict):
        return "answered"
    if isinstance(data.get("approved"), bool):
        what = "approved" if data["approved"] else "refused"
        what += " with edited arguments" if data["approved"] and data.get("arguments") is not None else ""
    elif isinstance(data.get("action"), str):
        actions = {
            "happened": "marked as happened",
            "run_again": "run again",
            "fail": "marked as failed",
            "accept": "answered",
            "decline": "declined",
            "cancel": "cancelled",
        }
        what = actions.get(data["action"], str(data["action"]))
    else:
        return "answered"
    reason = data.get("reason")
    return what + (f" ({str(reason)[:80]})" if reason else "")


class Suspend(BaseException):
    """Raised inside a flow body when it must wait for gates. A ``BaseException`` so that a
    user's ``except Exception`` cannot swallow it.

    Attributes:
        gate_ids: The gates the execution waits for.
    """

    def __init__(self, gate_ids: list[str]) -> None:
        super().__init__(gate_ids)
        self.gate_ids = gate_ids


@dataclass(frozen=True, kw_only=True)
class GateRequest:
    """One gate to open with ``ctx.gates([...])``.

    Attributes:
        gate_id: Unique within the execution (a persisted id).
        kind: What sort of gate (``AgentToolApproval``, ``InDoubt``, or your own).
        payload: What the person deciding is shown (plain JSON).
        schema: The type the resume payload must validate as (a pydantic model or any type
            pydantic accepts), or None for any JSON.
    """

    gate_id: str
    kind: str
    payload: Any = None
    schema: Any = None


@dataclass(frozen=True, kw_only=True)
class OpenGate:
    """A gate an execution waits on.

    Attributes:
        execution_id: The execution.
        gate_id: The gate.
        kind: Its kind.
        payload: What it shows.
        schema: ``module:qualname`` of the resume type, or None.
        opened_at: When it opened (epoch seconds).
    """

    execution_id: str
    gate_id: str
    kind: str
    payload: Any
    schema: str | None
    opened_at: float


_SCHEMAS: dict[str, Any] = {}


def schema_name(schema: Any) -> str | None:
    """The persisted name of a resume schema (``module:qualname``), remembering the type."""
    if schema is None:
        return None
    module = getattr(schema, "__module__", None)
    qualname = getattr(schema, "__qualname__", None)
    if module is None or qualname is None:
        raise UsageError(f"a gate schema must be a named type (a pydantic model), got {schema!r}")
    name = f"{module}:{qualname}"
    _SCHEMAS[name] = schema
    return name


def resolve_schema(name: str) -> Any:
    """The type behind a persisted schema name: one the running code declared (``schema_name``), or a
    class of a module this process already loaded. The recorded name never imports anything."""
    if name in _SCHEMAS:
        return _SCHEMAS[name]
    module_name, _, qualname = name.partition(":")
    try:
        obj = find_loaded(name)
    except LookupError:
        obj = None
    if not isinstance(obj, type):
        raise UsageError(
            f"the resume payload type {qualname!r} (module {module_name}) is not defined in this process "
            "(a journal's recorded name never imports a module): run the cell or import the module that "
            "defines it, then resume again"
        )
    _SCHEMAS[name] = obj
    return obj


def validate_payload(
    schema: str | None, payload: Any, *, execution_id: str, gate_id: str, gate_payload: Any = None
) -> Any:
    """Validate a resume payload against a gate's schema; returns the validated value.

    A schema type with a ``check_gate_payload(gate_payload)`` method also checks the value against
    what the gate showed (an approval bound to the digest of its arguments): the method raises a
    ``ResumeValidationError`` to refuse it (nothing is recorded; the gate stays open).
    """
    if schema is None:
        try:
            return to_jsonable(payload)
        except UsageError as exc:
            raise ResumeValidationError(
                f"gate {gate_id!r} of execution {execution_id!r}: {exc}", execution_id=execution_id, gate_id=gate_id
            ) from None
    tp = resolve_schema(schema)
    try:
        value = TypeAdapter(tp).validate_python(payload)
    except ValidationError as exc:
        raise ResumeValidationError(
            f"the payload for gate {gate_id!r} of execution {execution_id!r} is not a valid "
            f"{schema.rpartition(':')[2]}: {exc.errors(include_url=False)}. Nothing was recorded; "
            "the gate is still open: resume it again with a valid payload.",
            execution_id=execution_id,
            gate_id=gate_id,
        ) from None
    check = getattr(value, "check_gate_payload", None)
    if callable(check):
        try:
            check(gate_payload)
        except ResumeValidationError as exc:
            raise type(exc)(
                f"gate {gate_id!r} of execution {execution_id!r}: {exc} Nothing was recorded; the gate is still open.",
                execution_id=execution_id,
                gate_id=gate_id,
            ) from None
    return value
