"""Canonical JSON and tagged content digests: the persisted form of every payload.

Canonical JSON is ``json.dumps`` with sorted keys, no whitespace, UTF-8 kept as is, and NaN or
infinity refused. Two equal values always give the same bytes, so their digest is stable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from loom_nb.errors import UsageError

DIGEST_PREFIX = "sha256:"


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        raise UsageError(
            "bytes cannot be journaled as JSON; store them with ctx.put_content(...) and journal the digest"
        )
    raise UsageError(
        f"a value of type {type(value).__name__} cannot be journaled: return JSON-compatible data "
        "(dict, list, str, int, float, bool, None), a pydantic model or a dataclass"
    )


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of ``value`` (sorted keys, compact, no NaN)."""
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default
        )
    except ValueError as exc:  # NaN / infinity
        raise UsageError(f"cannot journal a non-finite float (NaN or infinity): {exc}") from exc


def to_jsonable(value: Any) -> Any:
    """Return ``value`` as plain JSON data (what reading it back from the journal gives)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.loads(canonical_json(value))


def digest_bytes(data: bytes) -> str:
    """Return the tagged digest (``sha256:<hex>``) of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def digest_value(value: Any) -> str:
    """Return the tagged digest of a value's canonical JSON."""
    return digest_bytes(canonical_json(value).encode("utf-8"))


def freeze(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Return a plain-JSON copy of a mapping, as the journal will hold it."""
    result = to_jsonable(dict(mapping))
    assert isinstance(result, dict)
    return result
