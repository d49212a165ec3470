"""How the engine asks its journal what it offers (``StoreCapabilities``) and reads the projection
rows of runs started together in one query (``ProjectionLookups``)."""

from __future__ import annotations

import asyncio

from loom_nb.journal.canonical import storable_text
from loom_nb.journal.events import ExecutionRecord
from loom_nb.journal.store import BatchedLookup, JournalStore


class StoreCapabilities:
    """Which optional store protocols a journal implements (``LeasingStore``, ``BatchedLookup``...),
    asked once per journal and protocol (a runtime-checkable protocol's ``isinstance`` costs ~20 µs,
    and this is asked per run and per start)."""

    def __init__(self) -> None:
        #: The journal the answers are for (asked again when another journal is given).
        self._of: JournalStore | None = None
        self._offered: dict[type, bool] = {}

    def offers(self, journal: JournalStore, capability: type) -> bool:
        """Whether ``journal`` implements the optional store protocol ``capability``."""
        if self._of is not journal:
            self._of, self._offered = journal, {}
        offered = self._offered.get(capability)
        if offered is None:
            offered = self._offered[capability] = isinstance(journal, capability)
        return offered


class ProjectionLookups:
    """Runs waiting for their projection row, read together on the loop's next turn."""

    def __init__(self) -> None:
        self._waiting: list[tuple[str, asyncio.Future[ExecutionRecord | None]]] = []

    async def lookup(self, journal: BatchedLookup, execution_id: str) -> ExecutionRecord | None:
        """Execution ``execution_id``'s projection row, read together with those of every run that
        asks in the same turn of the event loop (one query for 64 runs started by one ``gather``)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[ExecutionRecord | None] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._read, journal)
        self._waiting.append((execution_id, waiter))
        return await waiter

    def _read(self, journal: BatchedLookup) -> None:
        asked, self._waiting = self._waiting, []
        try:
            found = journal.get_executions([eid for eid, _ in asked])
        except BaseException as exc:  # each asker gets the store's error, as its own read would raise it
            for _, waiter in asked:
                if not waiter.done():
                    waiter.set_exception(exc)
            return
        for eid, waiter in asked:
            if not waiter.done():
                waiter.set_result(found.get(storable_text(eid)))
