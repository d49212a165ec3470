"""``StreamCommits``: when an execution's durable stream chunks are committed (``docs/design.md``,
section 4, rule 8). A policy of the engine, chosen by its journal unless set: a shared journal
(``LeasingStore``: PostgreSQL) may be followed from another process (``Run.follow``), so a chunk is
committed on the event loop's next turn after it is cut (``PROMPT``); a private one waits up to
``DEFERRED_WITHIN`` seconds (``DEFERRED``), which spares a quick step the chunking and a commit.

Neither changes what a chunk is (``stream_chunk {channel, text}``, cut by the chunker at sentence
boundaries) nor the order of anything journaled; only when chunks are staged and committed. In
event format 2 the chunks of a model step that completes before they are due are still dropped (its
output holds the text). A chunk commit is a background commit (``ContextCore._kick``): it rides the
group commit, is never in flight together with another commit of its execution, and the next
effect waits for it (section 4, rule 4).
"""

from __future__ import annotations

from dataclasses import dataclass

from loom_nb.errors import UsageError

#: Seconds a cut chunk of a ``DEFERRED`` execution waits at most before its commit starts.
DEFERRED_WITHIN = 0.2


@dataclass(frozen=True, slots=True)
class StreamCommits:
    """When stream chunks are committed.

    Attributes:
        within: Seconds after a delta before the chunks it completed are committed (the waiting
            deltas chunked, the held chunks staged, a background commit started); 0: on the event
            loop's next turn. A process killed mid-stream loses the chunk not yet finished and what
            was cut in the last ``within`` seconds. Any other staged chunk (``ctx.stream`` without a
            step, event format 1) waits no longer than that for a commit either.
    """

    within: float

    def __post_init__(self) -> None:
        if isinstance(self.within, bool) or not isinstance(self.within, (int, float)) or not self.within >= 0:
            raise UsageError(
                f"StreamCommits(within={self.within!r}): give a number of seconds, 0 or more "
                f"(0: on the event loop's next turn, PROMPT; {DEFERRED_WITHIN}: DEFERRED)"
            )


#: Chunks committed on the event loop's next turn: the default on a shared journal (another process
#: may follow a run there).
PROMPT = StreamCommits(within=0.0)
#: A quick step journals no chunks; a longer stream commits its chunks every ``DEFERRED_WITHIN`` s.
DEFERRED = StreamCommits(within=DEFERRED_WITHIN)


def stream_commits_for(shared: bool) -> StreamCommits:
    """The policy an engine takes when none is set: ``PROMPT`` on a shared journal, else ``DEFERRED``."""
    return PROMPT if shared else DEFERRED
