"""The journal: the event model, canonical JSON, the ``JournalStore`` protocol and its stores.

``DuckDBJournal`` (one file, the default), ``PostgresJournal`` (the shared journal: many processes and
machines on one database; needs the ``postgres`` extra to connect) and
``InMemoryJournal`` (the fake the tests use).
"""

from loom_nb.journal.canonical import canonical_json, digest_bytes, digest_value, to_jsonable
from loom_nb.journal.duckdb_store import DuckDBJournal
from loom_nb.journal.events import ContentBlob, Event, EventKind, ExecutionRecord
from loom_nb.journal.memory_store import InMemoryJournal
from loom_nb.journal.postgres_store import PostgresJournal
from loom_nb.journal.store import JournalStore

__all__ = [
    "ContentBlob",
    "DuckDBJournal",
    "Event",
    "EventKind",
    "ExecutionRecord",
    "InMemoryJournal",
    "JournalStore",
    "PostgresJournal",
    "canonical_json",
    "digest_bytes",
    "digest_value",
    "to_jsonable",
]
