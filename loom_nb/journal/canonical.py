"""Canonical JSON and tagged content digests: the persisted form of every payload.

Canonical JSON is ``json.dumps`` with sorted keys, no whitespace, UTF-8 kept as is, and NaN or
infinity refused. Two equal values always give the same bytes, so their digest is stable.

Every text the journal stores is valid Unicode (``storable_text``): a Python string may hold
UTF-16 surrogates (``"\\ud83d"``, from a JS source, a split stream, ``surrogateescape``), which UTF-8
cannot encode. A surrogate pair becomes the character it encodes, a lone surrogate becomes U+FFFD.
Canonical JSON applies it, so a digest is computed on the stored form and a value read back from
the journal has the same digest as the live one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from loom_nb.errors import UsageError

DIGEST_PREFIX = "sha256:"
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` as the journal stores it: valid Unicode (a surrogate pair joined into its
    character, a lone surrogate replaced by U+FFFD). Unchanged when it already is; idempotent."""
    # ``isascii`` is O(1) (CPython keeps the flag) and exact: a surrogate is never ASCII.
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


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


def _storable(value: Any) -> Any:
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(k) if isinstance(k, str) else k: _storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_storable(v) for v in value]
    return value


#: One encoder for every call (``json.dumps`` with these options builds a new one each time).
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default
)


def _fast_encoder() -> Callable[[Any, int], Sequence[str]] | None:
    """``_ENCODER``'s C encoder, built once, without its check for reference cycles (``markers``
    None); None where the C accelerator is missing or takes other arguments."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encoder = make(None, _default, json.encoder.encode_basestring, None, ":", ",", True, False, False)
    except TypeError:
        return None
    return encoder  # type: ignore[no-any-return]


#: ``_ENCODER.encode`` builds a C encoder per call and registers every container in a dict to detect
#: reference cycles: a third of a small value's cost. This one skips both; a cycle then recurses
#: until ``RecursionError``, and ``_dumps`` encodes that value again the checked way, so the text,
#: or the error, is always ``_ENCODER``'s (a successful encoding met no cycle).
_FAST_ENCODER = _fast_encoder()


def _dumps(value: Any) -> str:
    try:
        if _FAST_ENCODER is not None:
            try:
                return "".join(_FAST_ENCODER(value, 0))
            except RecursionError:
                pass  # a cycle, or nesting too deep: the checked encoder tells which
        return _ENCODER.encode(value)
    except ValueError as exc:  # NaN / infinity
        raise UsageError(f"cannot journal a non-finite float (NaN or infinity): {exc}") from exc


#: ``json.loads`` without its wrapper (type checks, two whitespace regexes): a canonical text is one
#: value with no whitespace around it, which the scanner reads whole, to the same value.
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    """``json.loads(text)`` for a canonical JSON text."""
    return _SCAN(text, 0)[0]


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of ``value`` (sorted keys, compact, no NaN, storable text)."""
    text = _dumps(value)
    if text.isascii() or _SURROGATE.search(text) is None:  # isascii: O(1), and no surrogate is ASCII
        return text
    # Rare: make every string and key storable, then sort the keys as stored.
    return _dumps(_storable(json.loads(text)))


#: Where a text may hold a number used as an object key (a ``{`` or ``,`` before a quoted digit or
#: minus): only then can ``canonical_json(json.loads(text))`` differ from ``text`` (keys ``2`` and ``10``
#: sort as numbers, their strings the other way round). It also matches such strings in lists, which
#: only costs the exact path.
_NUMERIC_KEY = re.compile(r'[{,]"[-0-9]')
#: ``_NUMERIC_KEY`` as two searches that match together what it matches: each starts with a literal
#: the regex engine skips to, several times cheaper than testing a character class at every position.
_NUMERIC_KEY_SPLIT = (re.compile(r',"[-0-9]'), re.compile(r'\{"[-0-9]'))


def _may_hold_numeric_key(text: str) -> bool:
    """``_NUMERIC_KEY.search(text) is not None``."""
    after_comma, after_brace = _NUMERIC_KEY_SPLIT
    return after_comma.search(text) is not None or after_brace.search(text) is not None


def jsonable_with_text(value: Any) -> tuple[Any, str]:
    """Return ``(to_jsonable(value), canonical_json(to_jsonable(value)))``, encoding once where it can.

    The text is the canonical JSON of the plain value returned (what the journal stores for it), so
    a caller that journals the value can hand the text on instead of encoding it again.
    """
    text = canonical_json(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value, text
    plain = _loads(text)
    if _may_hold_numeric_key(text):
        text = canonical_json(plain)  # rare: the keys may sort otherwise as strings
    return plain, text


def canonical_object(members: Mapping[str, str]) -> str:
    """The canonical JSON of an object whose members' canonical JSON texts are given (``{key: text}``):
    ``canonical_object({k: canonical_json(v)})`` equals ``canonical_json({k: v})``."""
    pairs = sorted((storable_text(k), text) for k, text in members.items())
    return "{" + ",".join(f"{_dumps(k)}:{text}" for k, text in pairs) + "}"


def to_jsonable(value: Any) -> Any:
    """Return ``value`` as plain JSON data (what reading it back from the journal gives)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return _loads(canonical_json(value))


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
