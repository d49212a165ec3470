"""A strict check of JSON data against a ``TypedDict`` annotation tree (an SDK's request params).

``violations(value, Type)`` walks the annotations recursively and lists every mismatch: an
unknown key at any depth, a missing required key, a wrong type or a literal outside its set. A
union matches when one member matches. pydantic's ``TypeAdapter`` is not used: it ignores extra
keys in ``TypedDict`` s by default and validates ``Iterable[...]`` fields lazily (never, unless
iterated), so nested request blocks would go unchecked.
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from typing import Any

import typing_extensions
from pydantic import BaseModel

_WRAPPERS = {
    typing.Required,
    typing.NotRequired,
    typing_extensions.Required,
    typing_extensions.NotRequired,
    typing_extensions.ReadOnly,
}
_REQUIRED = {typing.Required, typing_extensions.Required}
_NOT_REQUIRED = {typing.NotRequired, typing_extensions.NotRequired}
_ARRAYS = {list, collections.abc.Iterable, collections.abc.Sequence, collections.abc.Collection}
_MAPPINGS = {dict, collections.abc.Mapping}


def violations(value: Any, tp: Any, path: str = "$") -> list[str]:
    """Every way ``value`` (JSON data) fails to be a ``tp``; empty when it is one."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any or tp is object:
        return []
    if origin is typing.Annotated or origin in _WRAPPERS:
        return violations(value, args[0], path)
    if isinstance(tp, typing_extensions.TypeAliasType):
        return violations(value, tp.__value__, path)
    if origin is typing.Union or origin is types.UnionType:
        return _union(value, args, path)
    if origin is typing.Literal or origin is typing_extensions.Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return []
        return [f"{path}: {value!r} is not one of {list(args)}"]
    if tp is type(None):
        return [] if value is None else [f"{path}: {value!r} is not null"]
    if tp in (str, int, float, bool):
        return _scalar(value, tp, path)
    if tp in _MAPPINGS or origin in _MAPPINGS:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} is not an object"]
        item = args[1] if args else Any
        return [v for k, x in value.items() for v in violations(x, item, f"{path}.{k}")]
    if tp in _ARRAYS or origin in _ARRAYS:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__} is not an array"]
        item = args[0] if args else Any
        return [v for i, x in enumerate(value) for v in violations(x, item, f"{path}[{i}]")]
    if typing_extensions.is_typeddict(tp):
        return _typed_dict(value, tp, path)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [f"{path}: {tp.__name__} is a response model, not a request param"]
    raise TypeError(f"{path}: the checker does not know the annotation {tp!r}: teach it")


def _scalar(value: Any, tp: type, path: str) -> list[str]:
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f"{path}: {value!r} is not a {tp.__name__}"]


def _union(value: Any, members: tuple[Any, ...], path: str) -> list[str]:
    failures: list[tuple[Any, list[str]]] = []
    for member in members:
        found = violations(value, member, path)
        if not found:
            return []
        failures.append((member, found))

    # Report the member the value meant to be: one of its JSON shape, carrying its tag literals
    # ("type", "role"...), else the one with the fewest complaints.
    def rank(failure: tuple[Any, list[str]]) -> tuple[bool, bool, int]:
        member, found = failure
        return (not _same_shape(value, member), not _tagged(value, member), len(found))

    return min(failures, key=rank)[1]


def _same_shape(value: Any, tp: Any) -> bool:
    tp, _ = _unwrap(tp)
    origin = typing.get_origin(tp)
    is_array = tp in _ARRAYS or origin in _ARRAYS
    is_object = tp in _MAPPINGS or origin in _MAPPINGS or typing_extensions.is_typeddict(tp)
    if isinstance(value, list):
        return is_array
    if isinstance(value, dict):
        return is_object
    return not (is_array or is_object)


def _tagged(value: Any, tp: Any) -> bool:
    """True when ``tp`` is a TypedDict with single-literal keys and ``value`` carries all of them."""
    if not (isinstance(value, dict) and typing_extensions.is_typeddict(tp)):
        return False
    tags = _tags(tp)
    return bool(tags) and all(value.get(k) == v for k, v in tags.items())


@functools.cache
def _tags(td: Any) -> dict[str, Any]:
    tags: dict[str, Any] = {}
    for key, wrapped in _fields(td)[0].items():
        hint, _ = _unwrap(wrapped)
        literal = typing.get_origin(hint) in (typing.Literal, typing_extensions.Literal)
        if literal and len(typing.get_args(hint)) == 1:
            tags[key] = typing.get_args(hint)[0]
    return tags


@functools.cache
def _fields(td: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's wire keys with their annotations, and the required ones (aliases applied)."""
    hints = typing_extensions.get_type_hints(td, include_extras=True)
    fields: dict[str, Any] = {}
    required: set[str] = set()
    for name, hint in hints.items():
        key = name
        for extra in getattr(hint, "__metadata__", ()):
            key = getattr(extra, "alias", None) or key
        fields[key] = hint
        # ``__required_keys__`` misses ``Required[...]`` written as a string (``from __future__ import
        # annotations``, as the SDK does) on Python 3.11, so the wrapper in the hint decides first.
        _, wrappers = _unwrap(hint)
        if wrappers & _REQUIRED or (name in td.__required_keys__ and not wrappers & _NOT_REQUIRED):
            required.add(key)
    return fields, frozenset(required)


def _unwrap(hint: Any) -> tuple[Any, set[Any]]:
    """The type inside the ``Required`` / ``NotRequired`` / ``ReadOnly`` / ``Annotated`` layers of a
    hint, and those layers."""
    layers: set[Any] = set()
    while typing.get_origin(hint) is typing.Annotated or typing.get_origin(hint) in _WRAPPERS:
        layers.add(typing.get_origin(hint))
        hint = typing.get_args(hint)[0]
    return hint, layers


def _typed_dict(value: Any, td: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: {type(value).__name__} is not a {td.__name__} object"]
    fields, required = _fields(td)
    found = [
        f"{path}: unknown key {k!r} for {td.__name__} (known: {', '.join(sorted(fields))})"
        for k in value
        if k not in fields
    ]
    found += [f"{path}: missing required key {k!r} of {td.__name__}" for k in sorted(required - value.keys())]
    for k, x in value.items():
        if k in fields:
            found += violations(x, fields[k], f"{path}.{k}")
    return found
