"""``PrefixScan``: whether any message of a request has a property, in time proportional to the
messages its conversation's previous request did not have.

A loop's next request holds the previous one's messages plus a few; the links that look at every
request (the guard: is any message tainted; the image link: does any carry images) would otherwise
walk the whole transcript at every turn, which grows a long run's cost per turn with its length.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from loom_nb.messages import Message

#: The cap on conversations a scan remembers; the oldest is forgotten first.
CHECKED_MAX = 256
#: Messages past a conversation's recorded prefix that are checked again at each request before
#: the entry is brought up to date (an agent turn adds two).
REFRESH_AFTER = 16


class _Checked(NamedTuple):
    """What a scan knows of one conversation: its first message (weakly), the messages after it
    that were checked, and whether any checked message had the property."""

    first: weakref.ref[Message]
    rest: tuple[Message, ...]
    found: bool


class PrefixScan:
    """``scan(messages)``: whether ``has(message)`` is true of any message.

    The last messages checked are kept per conversation, keyed by the id of its first message. An
    entry holds its first message weakly and is dropped when that message goes, so a finished
    conversation's transcript is not kept alive here (nor walked by every full garbage collection).
    The prefix is compared in C: identity first, then by value, so an equal copy is never taken for
    what it is not. The entry is brought up to date only once ``REFRESH_AFTER`` unrecorded
    messages follow its prefix (copying the messages is O(n)): until then each request checks
    those few again.

    Args:
        has: The property (e.g. ``operator.attrgetter("tainted")``).
    """

    def __init__(self, has: Callable[[Message], object]) -> None:
        self.has = has
        #: The entries, by the id of each conversation's first message.
        self.checked: dict[int, _Checked] = {}

    def _forget(self, key: int, ref: weakref.ref[Message]) -> None:
        entry = self.checked.get(key)
        if entry is not None and entry.first is ref:
            del self.checked[key]

    def __call__(self, messages: tuple[Message, ...]) -> bool:
        """Whether any of ``messages`` has the property."""
        if not messages:
            return False
        checked_now = self.checked
        first = messages[0]
        key = id(first)
        seen = checked_now.get(key)
        if seen is not None and seen.first() is first:
            checked = len(seen.rest) + 1  # the first message and the rest recorded with it
            if checked <= len(messages) and messages[1:checked] == seen.rest:
                found = seen.found or any(map(self.has, messages[checked:]))
                if len(messages) - checked > REFRESH_AFTER:
                    checked_now[key] = _Checked(seen.first, messages[1:], found)
                return found
            ref = seen.first  # the same conversation, changed before its end: checked whole again
        else:
            if len(checked_now) >= CHECKED_MAX:
                del checked_now[next(iter(checked_now))]
            ref = weakref.ref(first, partial(self._forget, key))
        found = any(map(self.has, messages))
        checked_now[key] = _Checked(ref, messages[1:], found)
        return found
