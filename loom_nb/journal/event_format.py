"""Event format versions: how an execution's step events are shaped (one owner for both shapes).

An execution records its format in ``execution_started`` (``format: 2``); a journal without the
key is format 1, the format before versioning. Both replay; a new execution is written in
``CURRENT_FORMAT``, a fork in its source's format (it copies the source's events).

**Format 1**: ``step_started {effect, input, digest, attempt, idempotency_key}``;
``step_completed {effect, output, attempt, usage?, tainted?, resolved_by?}``; every
``ctx.stream`` call is a durable ``stream_chunk``.

**Format 2** drops what a reader can derive:

- ``step_started {effect, input | ref, attempt?}``: no ``digest`` (the digest of the canonical
  JSON of ``input``, recomputed on read) and no ``idempotency_key`` (always
  ``<execution_id>:<step_id>``); ``attempt`` only past the first. ``ref`` replaces a copy of the
  input found in an earlier step's output: ``[step_id, key or index, ...]`` (``ref_target``).
- ``step_completed {output, usage?, tainted?, resolved_by?}``: no ``effect`` or ``attempt`` (the
  step's ``step_started`` has them); ``usage`` only when it is not the one the output carries
  (``usage_of_output``), ``null`` when the effect reported none although its output carries one.
- a ``stream_chunk`` that a step's output will hold (``ctx.stream(text, step_id=...)``) is held
  while the step runs and dropped when it completes; it is written when the step fails, when 64
  events wait for a commit (a long stream stays durable in part), when it was held for the engine's
  stream bound (``StreamCommits.within``: the event loop's next turn on a shared journal, 0.2 s on
  a private one), and when the step is unknown. So a completed step may have some of its text in
  chunks before its ``step_completed`` too; readers take the output as the step's text.

A reader tells the shapes apart by the data itself (a format 1 ``step_started`` always has a
``digest``, a format 1 ``step_completed`` always an ``effect``), so the fold needs no lookup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from loom_nb.errors import JournalVersionError, UsageError

#: The format before versioning (``execution_started`` without ``format``).
FORMAT_1: Final = 1
#: Derivable fields dropped, tool inputs by reference, no durable copy of a step's own stream.
FORMAT_2: Final = 2
#: The format new executions are written in.
CURRENT_FORMAT: Final = FORMAT_2
#: Every format this code reads.
FORMATS: Final = (FORMAT_1, FORMAT_2)
#: The fix a ``JournalVersionError`` names (a journal written by a newer loom_nb).
UPGRADE: Final = "Upgrade loom_nb (pip install -U loom_nb) in this environment to read it; nothing was changed."

_MISSING: Any = object()


def format_of(started: Mapping[str, Any] | None, execution_id: str = "") -> int:
    """The format an ``execution_started`` payload declares (1 when it declares none).

    Args:
        started: The payload.
        execution_id: Its execution, for the message.

    Raises:
        JournalVersionError: a format above ``FORMATS`` (written by a newer loom_nb), which this
            code would fold wrong.
    """
    value = (started or {}).get("format", FORMAT_1)
    if not isinstance(value, int) or isinstance(value, bool):
        return FORMAT_1
    if value > FORMATS[-1]:
        raise JournalVersionError(
            f"execution {execution_id!r} was written by a newer loom_nb, in event format {value} (this "
            f"loom_nb reads formats {', '.join(map(str, FORMATS))}). {UPGRADE}"
        )
    return value


def usage_of_output(output: Any) -> dict[str, Any] | None:
    """The metered usage a step's output carries (``{"usage": {...}}`` with token counts, as a
    ``ModelResponse`` is journaled): ``{calls: 1, input_tokens, output_tokens, cost?}``; else None."""
    usage = output.get("usage") if isinstance(output, Mapping) else None
    if not isinstance(usage, Mapping):
        return None
    out: dict[str, Any] = {
        "calls": 1,
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
    }
    if usage.get("cost") is not None:
        out["cost"] = float(usage["cost"])
    return out


def _step_into(value: Any, key: Any) -> Any:
    if isinstance(value, Mapping) and isinstance(key, str) and key in value:
        return value[key]
    if isinstance(value, list) and type(key) is int and 0 <= key < len(value):
        return value[key]
    raise LookupError(f"no {key!r} in the referenced output")


def ref_target(value: Any, path: Sequence[Any]) -> Any:
    """The part of ``value`` at ``path`` (dict keys and list indexes); raises ``LookupError`` when
    the path does not lead anywhere."""
    for key in path:
        value = _step_into(value, key)
    return value


def resolve_ref(ref: Any, outputs: Mapping[str, Any]) -> Any:
    """The input a format 2 ``ref`` (``[step_id, *path]``) names, from completed steps' outputs by
    id; raises ``LookupError`` when the step or the path is not there."""
    if not isinstance(ref, list) or not ref or not isinstance(ref[0], str):
        raise LookupError(f"malformed input reference {ref!r}")
    output = outputs.get(ref[0], _MISSING)
    if output is _MISSING:
        raise LookupError(f"input reference to step {ref[0]!r}, which has no recorded output")
    return ref_target(output, ref[1:])


def with_format(started: dict[str, Any], event_format: int) -> dict[str, Any]:
    """An ``execution_started`` payload declaring ``event_format`` (format 1 declares nothing, so a
    run written in format 1 stays byte for byte what it was before versioning)."""
    if event_format not in FORMATS:
        raise UsageError(f"unknown event format {event_format!r}: this code writes formats {FORMATS}")
    return started if event_format == FORMAT_1 else {**started, "format": event_format}
