"""``StreamCommits``: when an execution's durable stream chunks are committed (``docs/design.md``,
section 4, rule 8). A policy of the engine, chosen by its journal unless set: a shared journal
(``LeasingStore``: PostgreSQL) may be followed from another process (``Run.follow``), so every chunk
is committed as it is cut (``PROMPT``); a private one keeps the deferral (``DEFERRED``) that spares a
quick step its chunks, with a bound on how long a cut chunk waits.

Neither changes what a chunk is (``stream_chunk {channel, text}``, cut by the chunker at sentence
boundaries) nor the order of anything journaled; only when chunks are staged and committed.
A chunk commit is a background commit (``ContextCore._kick``): it rides the group commit, is never
in flight together with another commit of its execution, and the next effect waits for it
(section 4, rule 4).
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
        prompt: True: a step's deltas reach the chunker as they arrive and every chunk is staged as
            it is cut and committed on the event loop's next turns (with whatever else commits
            then): the journal holds every chunk of every step, however fast it ran. False (event
            format 2): a model step's deltas wait unchunked and its chunks are held, and a step
            that completes first journals none (its output holds the text).
        within: ``prompt=False``: seconds after which waiting deltas are chunked and the chunks
            committed (so a process killed mid-stream loses at most the chunk not yet finished,
            and what was cut in the last ``within`` seconds). Also bounds how long any other
            staged chunk waits for the next commit.
    """

    prompt: bool
    within: float = DEFERRED_WITHIN

    def __post_init__(self) -> None:
        if isinstance(self.within, bool) or not isinstance(self.within, (int, float)) or not self.within > 0:
            raise UsageError(
                f"StreamCommits(within={self.within!r}): give a number of seconds above 0 "
                f"(the default is {DEFERRED_WITHIN}), or use StreamCommits(prompt=True)"
            )


#: Every chunk committed as it is cut: the default on a shared journal (another process may follow).
PROMPT = StreamCommits(prompt=True)
#: Quick steps journal no chunks; a slow stream commits its chunks every ``DEFERRED_WITHIN`` seconds.
DEFERRED = StreamCommits(prompt=False)


def stream_commits_for(shared: bool) -> StreamCommits:
    """The policy an engine takes when none is set: ``PROMPT`` on a shared journal, else ``DEFERRED``."""
    return PROMPT if shared else DEFERRED
