"""The journal: the event model, canonical JSON, the ``JournalStore`` protocol and its stores."""

from loom_nb.journal.canonical import canonical_json, digest_bytes, digest_value, to_jsonable
from loom_nb.journal.duckdb_store import DuckDBJournal
from loom_nb.journal.events import ContentBlob, Event, EventKind, ExecutionRecord
from loom_nb.journal.memory_store import InMemoryJournal
from loom_nb.journal.store import JournalStore

__all__ = [
    "ContentBlob",
    "DuckDBJournal",
    "Event",
    "EventKind",
    "ExecutionRecord",
    "InMemoryJournal",
    "JournalStore",
    "canonical_json",
    "digest_bytes",
    "digest_value",
    "to_jsonable",
]
