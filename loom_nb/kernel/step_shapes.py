"""The event format's step payloads (``journal.event_format``): what a step's ``step_started`` and
``step_completed`` carry in format 1 and in format 2."""

from __future__ import annotations

from typing import Any

from loom_nb.journal.canonical import canonical_json, canonical_object
from loom_nb.journal.event_format import FORMAT_1, usage_of_output


def started_payload(
    fmt: int, effect_id: str, journaled: Any, digest: str | None, key: str, ref: list[Any] | None
) -> dict[str, Any]:
    """A ``step_started`` payload of event format ``fmt`` without its attempt: format 1 carries the
    digest (given: never None in format 1) and the idempotency key; format 2 derives both on read
    and may name its input by reference."""
    if fmt == FORMAT_1:
        assert digest is not None
        return {"effect": effect_id, "input": journaled, "digest": digest, "idempotency_key": key}
    return {"effect": effect_id, "ref": ref} if ref is not None else {"effect": effect_id, "input": journaled}


def with_attempt(fmt: int, started: dict[str, Any], attempt: int) -> dict[str, Any]:
    """``started`` for ``attempt`` (format 2 leaves out the first attempt's number)."""
    return started if fmt > FORMAT_1 and attempt == 1 else {**started, "attempt": attempt}


def completed_payload(
    fmt: int, effect_id: str, output: Any, attempt: int, usage: dict[str, Any] | None
) -> dict[str, Any]:
    """A ``step_completed`` payload of event format ``fmt``: format 2 leaves out the effect and
    attempt (on its ``step_started``) and a usage equal to the one its output carries."""
    if fmt == FORMAT_1:
        data: dict[str, Any] = {"effect": effect_id, "output": output, "attempt": attempt}
        if usage:
            data["usage"] = usage
        return data
    data = {"output": output}
    if usage != usage_of_output(output):
        data["usage"] = usage
    return data


def object_json(data: dict[str, Any], key: str, text: str) -> str:
    """``canonical_json(data)`` where ``text`` is already ``canonical_json(data[key])``."""
    members = {}
    for k, v in data.items():  # a loop, not a comprehension: that would capture ``key`` and ``text`` in cells
        members[k] = text if k == key else canonical_json(v)
    return canonical_object(members)
