"""``StreamsAndContent``: a body's durable stream chunks (``ctx.stream``: held per step in event
format 2), its warnings (``ctx.warn``) and the content store (``ctx.put_content`` / ``get_content``)."""

from __future__ import annotations

import asyncio
from typing import Any

from loom_nb.errors import UsageError
from loom_nb.journal.canonical import digest_bytes, to_jsonable
from loom_nb.journal.event_format import FORMAT_1
from loom_nb.journal.events import ContentBlob, Event, EventKind
from loom_nb.kernel.staging import STREAM_FLUSH_EVERY, ContextCore


class StreamsAndContent(ContextCore):
    """The part of the context that streams, warns and stores content."""

    def stream(self, text: str, channel: str = "assistant", *, step_id: str | None = None) -> None:
        """Append a durable stream chunk (group-committed) and show it to every observer.

        Not re-emitted while the body is being served its recorded prefix. It is committed with
        the next commit, and no later than the engine's ``StreamCommits.within`` seconds after it
        is staged (0 on a shared journal: on the event loop's next turn).

        Args:
            text: The chunk.
            channel: ``assistant``, ``thinking``...
            step_id: The step whose output will hold this text (the model step streaming it). In
                event format 2 the chunk is held while that step runs and not journaled once it
                completes; it is journaled when the step fails, when 64 of its chunks are held, or
                when it was held ``StreamCommits.within`` seconds (``LiveAttempt.due``).
        """
        if not text or self.replaying:
            return
        data = {"channel": channel, "text": text}
        if step_id is not None and self._format > FORMAT_1 and self._holds(step_id):
            held = self._held.get(step_id)
            observers = self._rt.observers
            if observers.active:  # (the event is built for them only)
                # Stamped with the last staged event's time, not a clock read: a held chunk reads no
                # clock, watched or not (``defer_deltas`` makes no chunk of an unwatched attempt), so
                # an injected clock sees the same reads whether anybody watches.
                event = Event(self.execution_id, self._seq, EventKind.STREAM_CHUNK, None, self._last_at, data)
                observers.notify_events((event,))
            if held is None:
                return  # the step completed: its output holds the text
            held.append((channel, text))
            if len(held) >= STREAM_FLUSH_EVERY:  # (the staged chunks' own count: a release is not undone)
                self._release_held(step_id)
                self._held[step_id] = []
                asyncio.get_running_loop().call_soon(self._kick)
            return
        event = self.stage(EventKind.STREAM_CHUNK, None, data)
        self._rt.observers.notify_events((event,))
        self._chunk_staged()
        if len(self._staged) >= STREAM_FLUSH_EVERY:
            asyncio.get_running_loop().call_soon(self._kick)

    def _holds(self, step_id: str) -> bool:
        """Format 2: True when step ``step_id`` is running live (its chunks are held) or completed
        in this run or the record (its output holds the text)."""
        if step_id in self._held or step_id in self._done:
            return True
        rec = self._h.steps.get(step_id)
        return rec is not None and rec.completed

    def warn(self, code: str, message: str, **data: Any) -> bool:
        """Record a ``warning`` event once per ``code`` per execution; returns True if recorded now."""
        if code in self._warned or self._pure:
            return False
        self._warned.add(code)
        self.stage(EventKind.WARNING, None, {"code": code, "message": message, **to_jsonable(data)})
        return True

    def put_content(self, data: bytes, *, media_type: str = "application/json", tainted: bool = False) -> str:
        """Store bytes in the content store (with the next commit); returns their tagged digest."""
        digest = digest_bytes(data)
        if not self._pure:
            self._blobs.append(ContentBlob(digest, data, media_type, tainted))
        return digest

    def get_content(self, digest: str) -> bytes:
        """Bytes stored under ``digest`` (staged in this run or in the journal)."""
        for blob in self._blobs:
            if blob.digest == digest:
                return blob.data
        data = self._rt.journal.get_content(digest)
        if data is None:
            raise UsageError(f"no content {digest} in the journal {self._rt.journal.location}")
        return data
