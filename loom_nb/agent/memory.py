"""``TieredMemory``: remembered facts, recalled through ``ctx.decide`` and bounded per turn."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from loom_nb.kernel.decisions import Decision

_WORD = re.compile(r"[a-z0-9]+")
Summarizer = Callable[[Sequence[str]], str]


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class TieredMemory:
    """Two tiers of memory: recent items verbatim, older ones folded into summaries.

    Args:
        items: Initial memories.
        summarizer: Folds a list of memories into one summary (injectable; None: no folding).
        summarize_after: Fold the oldest items once there are more than this many recent ones.
    """

    def __init__(
        self,
        items: Iterable[str] = (),
        *,
        summarizer: Summarizer | None = None,
        summarize_after: int | None = None,
    ) -> None:
        self.recent: list[str] = []
        self.summaries: list[str] = []
        self.summarizer = summarizer
        self.summarize_after = summarize_after
        for item in items:
            self.add(item)

    def add(self, text: str) -> None:
        """Remember ``text``; fold the oldest half into a summary when the recent tier is full."""
        self.recent.append(text)
        if self.summarizer and self.summarize_after and len(self.recent) > self.summarize_after:
            half = len(self.recent) // 2
            old, self.recent = self.recent[:half], self.recent[half:]
            self.summaries.append(self.summarizer(old))

    @property
    def items(self) -> list[str]:
        """Every memory the recall can choose from: summaries first, then recent items."""
        return [*self.summaries, *self.recent]

    def policy(self, query: str, limit: int) -> Callable[[Sequence[Any]], Decision]:
        """The default recall policy: the ``limit`` items sharing the most words with ``query``."""
        wanted = _words(query)

        def recall_by_overlap(options: Sequence[Any]) -> Decision:
            scored = sorted(((len(wanted & _words(str(o))), -i, str(o)) for i, o in enumerate(options)), reverse=True)
            chosen = [text for score, _, text in scored[:limit] if score > 0]
            return Decision(choice=chosen, propensity=1.0)

        recall_by_overlap.__qualname__ = "TieredMemory.recall_by_overlap"
        return recall_by_overlap
