"""A strict check of JSON values against TypedDict annotations (the official SDKs' request types).

``violations(value, annotation)`` walks the annotation and the value together and lists what does
not fit, each with a JSONPath-like location: a key the TypedDict does not declare (at any depth), a
missing required key, a value of the wrong type, a literal outside its choices. A union fits when
one of its members fits; otherwise the members that came closest are reported. An annotation this
walker does not know is an error, never a silent pass.

It is a test helper: the SDKs are dev dependencies and ``loom_nb`` never imports them.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any

import typing_extensions

_SEQUENCES = {list, collections.abc.Iterable, collections.abc.Sequence, collections.abc.Collection}
_MAPPINGS = {dict, collections.abc.Mapping}
_UNIONS = {typing.Union, types.UnionType}
_LITERALS = {typing.Literal, typing_extensions.Literal}


def violations(value: Any, annotation: Any, path: str = "$") -> list[str]:
    """What in the JSON ``value`` does not fit ``annotation`` (empty when it fits)."""
    if annotation is Any or annotation is object:
        return []
    if annotation is None or annotation is type(None):
        return [] if value is None else [f"{path}: expected null, got {value!r}"]
    if typing_extensions.is_typeddict(annotation):
        return _typed_dict(value, annotation, path)
    origin = typing_extensions.get_origin(annotation)
    args = typing_extensions.get_args(annotation)
    if origin is typing_extensions.Annotated:
        return violations(value, args[0], path)
    if origin in (typing_extensions.Required, typing_extensions.NotRequired, typing_extensions.ReadOnly):
        return violations(value, args[0], path)
    if origin in _UNIONS:
        return _union(value, args, path)
    if origin in _LITERALS:
        return [] if any(value == a and type(value) is type(a) for a in args) else [f"{path}: {value!r} not in {args}"]
    if origin in _SEQUENCES or _is_sequence_not_str(annotation):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        item = args[0] if args else Any
        return [v for i, entry in enumerate(value) for v in violations(entry, item, f"{path}[{i}]")]
    if origin in _MAPPINGS:
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        key_type, value_type = args if args else (Any, Any)
        found = [v for k in value for v in violations(k, key_type, f"{path} key {k!r}")]
        return found + [v for k, entry in value.items() for v in violations(entry, value_type, f"{path}.{k}")]
    if annotation in (str, int, float, bool):
        return _scalar(value, annotation, path)
    raise TypeError(f"{path}: the strict checker does not know the annotation {annotation!r}; teach it")


def _is_sequence_not_str(annotation: Any) -> bool:
    return getattr(annotation, "__name__", "") == "SequenceNotStr"


def _scalar(value: Any, annotation: type, path: str) -> list[str]:
    if annotation is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif annotation is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, annotation)
    return [] if ok else [f"{path}: expected {annotation.__name__}, got {value!r}"]


def _typed_dict(value: Any, annotation: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({annotation.__name__}), got {type(value).__name__}"]
    hints = typing_extensions.get_type_hints(annotation, include_extras=True)
    found = [f"{path}: unknown key {key!r} for {annotation.__name__}" for key in value if key not in hints]
    found += [f"{path}: missing required key {key!r}" for key in _required_keys(annotation, hints) if key not in value]
    for key, entry in value.items():
        if key in hints:
            found += violations(entry, hints[key], f"{path}.{key}")
    return found


def _required_keys(annotation: Any, hints: dict[str, Any]) -> set[str]:
    """The keys a value must hold. ``__required_keys__`` misses ``Required[...]`` written as a string
    annotation (the SDKs use ``from __future__ import annotations``), so the resolved hints decide."""
    required = set(annotation.__required_keys__)
    for key, hint in hints.items():
        origin = typing_extensions.get_origin(hint)
        if origin is typing_extensions.Required:
            required.add(key)
        elif origin is typing_extensions.NotRequired:
            required.discard(key)
    return required


def _union(value: Any, members: tuple[Any, ...], path: str) -> list[str]:
    tried = [violations(value, member, path) for member in members]
    if any(not found for found in tried):
        return []
    fewest = min(len(found) for found in tried)
    closest = [v for found in tried if len(found) == fewest for v in found]
    return [f"{path}: fits none of {len(members)} union members; the closest fail with:", *closest]
