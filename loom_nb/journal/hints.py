"""What to do about a failed journal read or commit, chosen by its cause (one table for every store).

A ``JournalWriteError`` or ``JournalReadError`` ends with a fix; a fix that points the wrong way
("free disk space" for a duplicate key, "another thread" for a read-only filesystem) sends the user
after the wrong thing. ``fix_for`` reads the cause's text (and the ``errno`` of an ``OSError`` in its
chain) and returns the fix of the first rule that matches, or the default.
"""

from __future__ import annotations

import errno
from typing import Final

_DISK_FULL = "Free disk space on the journal's disk"
_READ_ONLY = (
    "The journal's file or folder cannot be written (a read-only filesystem or mount, or no permission): "
    "open the journal where it can be written (copy the file there)"
)
_DAMAGED = "The journal file is damaged: move it aside and open a new journal there, or restore it from a copy"
_CONFLICT = (
    "Another runtime or process wrote this execution first (a second runtime on the journal, or a lease "
    "lost to another worker): let one process drive it"
)
_NOTIFY = (
    "PostgreSQL refused the commit's NOTIFY (a channel name or payload past its limits, or a notification "
    "queue left full by a LISTEN connection that reads nothing: close that connection)"
)
_CONNECTION = "The connection to the database server was lost: check that the server runs and can be reached"
_BUSY = "Another thread used the journal's connection at the same time: use the journal from the event loop's thread"
_NOT_A_FILE = "The journal's path is not a file (a folder, or a missing folder): give the path of a journal file"

#: (markers in the cause's text, lowercased; the fix), first match wins.
RULES: Final[tuple[tuple[tuple[str, ...], str], ...]] = (
    (("no space left", "disk full", "disk is full", "could not extend file", "quota exceeded"), _DISK_FULL),
    (("read-only file system", "permission denied", "operation not permitted", "read-only mode"), _READ_ONLY),
    (("not a valid duckdb database file", "could not read enough bytes", "checksum", "corrupt"), _DAMAGED),
    (("duplicate key", "duplicate seq", "duplicate or out-of-order seq", "duplicate execution"), _CONFLICT),
    (("channel name too long", "payload string too long", "notification queue", "notify queue"), _NOTIFY),
    (
        (
            "server closed the connection",
            "terminating connection",
            "connection refused",
            "could not connect",
            "connection is lost",
            "connection timed out",
            "broken pipe",
            "the connection is closed",
        ),
        _CONNECTION,
    ),
    (("connection is busy", "another thread", "pending query result"), _BUSY),
    (("is a directory", "no such file or directory"), _NOT_A_FILE),
)
_ERRNOS: Final = {
    errno.ENOSPC: _DISK_FULL,
    errno.EDQUOT: _DISK_FULL,
    errno.EROFS: _READ_ONLY,
    errno.EACCES: _READ_ONLY,
    errno.EPERM: _READ_ONLY,
    errno.EISDIR: _NOT_A_FILE,
}


def fix_for(cause: BaseException, default: str) -> str:
    """The fix for ``cause`` (a sentence without its final full stop), or ``default`` when no rule
    matches. Looks at ``cause`` and its ``__cause__`` / ``__context__`` chain."""
    seen: set[int] = set()
    error: BaseException | None = cause
    texts = []
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in _ERRNOS:
            return _ERRNOS[error.errno]
        texts.append(f"{type(error).__name__}: {error}".lower())
        error = error.__cause__ or error.__context__
    text = " ".join(texts)
    for markers, fix in RULES:
        if any(marker in text for marker in markers):
            return fix
    return default
