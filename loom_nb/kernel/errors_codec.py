"""Journaling failures: an exception to plain JSON and back, so replay re-raises what was recorded."""

from __future__ import annotations

from typing import Any

from loom_nb.errors import RecordedError, rebuild_error
from loom_nb.journal.canonical import to_jsonable
from loom_nb.kernel.qualified_names import find_loaded


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    return f"{cls.__module__}:{cls.__qualname__}"


def _jsonable_or_str(value: Any) -> Any:
    try:
        return to_jsonable(value)
    except Exception:
        return repr(value)


def error_to_data(exc: BaseException) -> dict[str, Any]:
    """Return the journaled form of an exception: type, message, args, attributes, cause."""
    attrs = {k: _jsonable_or_str(v) for k, v in vars(exc).items() if not k.startswith("_")}
    data: dict[str, Any] = {
        "type": _type_name(exc),
        "message": str(exc),
        "args": [_jsonable_or_str(a) for a in exc.args],
        "attrs": attrs,
    }
    if exc.__cause__ is not None:
        data["cause"] = error_to_data(exc.__cause__)
    return data


def _find_type(name: str) -> type[BaseException] | None:
    try:
        obj = find_loaded(name)
    except LookupError:
        return None
    return obj if isinstance(obj, type) and issubclass(obj, BaseException) else None


def error_from_data(data: dict[str, Any]) -> BaseException:
    """Rebuild a journaled exception: its type when this process has loaded it (a recorded name never
    imports a module), else a ``RecordedError`` that keeps the name and the message."""
    cls = _find_type(str(data.get("type", "")))
    exc: BaseException
    if cls is None:
        exc = RecordedError(f"{data.get('type')}: {data.get('message')}", type_name=str(data.get("type", "")))
    else:
        try:
            exc = rebuild_error(cls, tuple(data.get("args", ())), dict(data.get("attrs", {})))
        except Exception:
            exc = RecordedError(f"{data.get('type')}: {data.get('message')}", type_name=str(data.get("type")))
    cause = data.get("cause")
    if isinstance(cause, dict):
        exc.__cause__ = error_from_data(cause)
    return exc


def error_summary(data: dict[str, Any]) -> str:
    """One line: ``TypeName: message``."""
    type_name = str(data.get("type", "Error")).rpartition(":")[2] or "Error"
    return f"{type_name}: {data.get('message', '')}"
