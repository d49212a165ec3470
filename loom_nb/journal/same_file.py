"""One read-write DuckDB journal per file in a process, whatever path names the file.

DuckDB shares one database between two opens of one path in a process, but two paths to one file
(a hard link, a bind mount, letter case on a case-insensitive disk) open two databases on it, each
with its own WAL (``<path>.wal``): commits of one are lost to the other at the next open. So a
file is held by its device and inode (``os.stat``: the same for every path to it), and a file not
created yet by its real path until it exists.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from threading import Lock
from typing import Any

from loom_nb.errors import JournalError, JournalLockedError

#: ``("inode", st_dev, st_ino)`` of an existing file, ``("path", realpath)`` of one not created yet.
FileKey = tuple[Any, ...]


@dataclass(frozen=True)
class Holder:
    """Who holds a file: the process, the journal (weakly: a journal dropped without ``close()``
    holds nothing) and the path it was opened by."""

    pid: int
    journal: weakref.ref[Any]
    location: str

    @property
    def open(self) -> bool:
        """True when the holder is an open journal of this process (not of a forked parent)."""
        journal = self.journal()
        return self.pid == os.getpid() and journal is not None and not journal.closed


#: Files this process holds read-write, by every key that names them.
_HELD: dict[FileKey, Holder] = {}
_LOCK = Lock()


def file_keys(location: str) -> list[FileKey]:
    """The keys ``location`` is held by: its real path, and its device and inode once it exists."""
    keys: list[FileKey] = [("path", os.path.realpath(location))]
    try:
        st = os.stat(location)
    except OSError:
        return keys
    return [*keys, ("inode", st.st_dev, st.st_ino)]


def holder_of(location: str) -> Holder | None:
    """The open journal of this process holding the file at ``location`` (by any path), or None."""
    with _LOCK:
        for key in file_keys(location):
            held = _HELD.get(key)
            if held is not None and held.open:
                return held
    return None


def _as(location: str, held: Holder) -> str:
    return "" if held.location == location else f" (as {held.location}: the same file by another path)"


def _refusal(location: str, held: Holder) -> str:
    return (
        f"the journal {location} is already open read-write in this process{_as(location, held)}; another "
        "runtime holds it. "
        "Two runtimes on one file would each take the other's running steps for crashed ones, and "
        "commits made through one path are lost to the other. Use the runtime you have "
        "(loom.default_runtime() in a notebook), or close it first (runtime.close())."
    )


def hold(location: str, journal: Any) -> list[FileKey]:
    """Claim the file at ``location`` for ``journal`` (this process's one read-write journal of it);
    the keys to ``release``. Call ``hold_created`` once the file exists.

    Raises:
        JournalLockedError: an open journal of this process holds the file, by any path.
    """
    mine = Holder(os.getpid(), weakref.ref(journal), location)
    with _LOCK:
        keys = file_keys(location)
        for key in keys:
            held = _HELD.get(key)
            if held is not None and held.open:
                raise JournalLockedError(_refusal(location, held))
        for key in keys:
            _HELD[key] = mine
    return keys


def hold_created(location: str, journal: Any, keys: list[FileKey]) -> list[FileKey]:
    """Add the device and inode of the file ``hold`` claimed before it existed; the keys now held."""
    with _LOCK:
        held = _HELD.get(keys[0])
        for key in file_keys(location):
            if key not in keys and held is not None:
                _HELD[key] = held
                keys = [*keys, key]
    return keys


def refuse_read_only_beside_writer(location: str) -> None:
    """Refuse a read-only open of a file this process holds read-write by another path (by the same
    path DuckDB itself refuses it): a second database on the file would read without the WAL.

    Raises:
        JournalError: naming both paths and the fix.
    """
    held = holder_of(location)
    if held is not None:
        raise JournalError(
            f"cannot open the journal {location} read-only: this process already has it open read-write"
            f"{_as(location, held)}. Read it through the runtime that holds it (loom.frames(runtime)), or close "
            "that runtime first."
        )


def release(keys: list[FileKey], journal: Any) -> None:
    """Release the keys ``journal`` holds (the ones another journal took over are left)."""
    with _LOCK:
        for key in keys:
            held = _HELD.get(key)
            if held is not None and held.journal() is journal:
                del _HELD[key]
