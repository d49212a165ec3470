"""The composition root: ``Runtime`` assembles the durable kernel (``Engine``), the effect ring and
a journal store, and ``Runtime.open`` chooses the store from a path.

``loom_nb.Runtime`` is what users open; ``loom_nb.kernel.Engine`` is the bare kernel (a plain
effect registry, any journal), which the kernel's own tests use.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any, Self, Unpack, cast

from loom_nb.effects.claimcheck import JournalContentStore
from loom_nb.effects.quota import Quota, UsageTotals
from loom_nb.effects.retry import RetryPolicy
from loom_nb.effects.ring import EffectRing
from loom_nb.errors import UsageError
from loom_nb.journal.duckdb_store import DuckDBJournal, SnapshotInfo
from loom_nb.journal.postgres_store import is_postgres_url
from loom_nb.journal.run_state import RunState
from loom_nb.journal.store import JournalStore
from loom_nb.kernel.engine import Engine, EngineOptions


class RuntimeOptions(EngineOptions, total=False):
    """``Runtime``'s options: the protection ring's limits and default retry, and the kernel's
    (``EngineOptions``)."""

    quota: Quota | None
    principal_quota: Quota | None
    default_retry: RetryPolicy | None


class Runtime(Engine):
    """Durable executions over a journal, every effect call through the protection ring.

    Open one with ``Runtime.open("loom.duckdb")`` (or ``":memory:"``); use it as a context manager
    to close it. The kernel's keyword options pass through to ``Engine`` (``EngineOptions``):
    ``clock``, ``ids``, ``random``, ``flows``, ``principal``, ``stream_commits``.

    Args:
        journal: The journal.
        quota: Limits for each execution.
        principal_quota: Limits for each principal.
        default_retry: Retry policy for effects registered without one.
        effects: The effect ring (by default a new one with the quotas and retry policy above).
    """

    #: The effect ring (the bare kernel ``Engine`` only knows an ``EffectInvoker``).
    effects: EffectRing

    def __init__(
        self, journal: JournalStore, *, effects: EffectRing | None = None, **options: Unpack[RuntimeOptions]
    ) -> None:
        quota, principal_quota = options.pop("quota", None), options.pop("principal_quota", None)
        default_retry = options.pop("default_retry", None)
        ring = effects or EffectRing(
            per_execution=quota,
            per_principal=principal_quota,
            default_retry=default_retry,
            load_usage=self.usage_by_effect,
        )
        super().__init__(journal, effects=ring, **cast(EngineOptions, options))  # the ring options are popped
        #: The agents registered on this runtime (``Agent.register``), by flow name: how a notebook
        #: finds the agent of an execution it did not start in this cell. Registries keyed by name:
        #: the values are the agent layer's ``Agent`` and ``Run``, typed there (the composition root
        #: never imports the layer above it).
        self.agents: dict[str, Any] = {}
        #: This process's ``Run`` handle on each execution it started or attached, by execution id
        #: (weak: a handle nobody holds goes away), so a magic, a card and a live view share one.
        self.runs: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        if ring.content_store is None:
            ring.content_store = JournalContentStore(journal)

    @classmethod
    def open(cls, target: str | Path = ":memory:", *, read_only: bool = False, **kwargs: Any) -> Self:
        """Open a runtime on a DuckDB journal file (or ``":memory:"``), or on a shared PostgreSQL
        journal (``"postgresql://user@host:5432/db"``, needs the ``postgres`` extra).

        Raises:
            JournalLockedError: another process holds the DuckDB file.
            JournalReadError: the PostgreSQL server cannot be reached.
            UsageError: ``read_only`` with a PostgreSQL URL (use a read-only database role instead),
                or the ``postgres`` extra is missing.
        """
        text = str(target)
        if is_postgres_url(text):
            if read_only:
                raise UsageError(
                    "read_only applies to DuckDB files: a PostgreSQL journal is shared by design; "
                    "connect as a role that may only SELECT to read without writing"
                )
            from loom_nb.journal.postgres_store import PostgresJournal

            return cls(PostgresJournal(text), **kwargs)
        return cls(DuckDBJournal(text, read_only=read_only), **kwargs)

    def snapshot(self, path: str | Path, *, overwrite: bool = False) -> SnapshotInfo:
        """Write a consistent single-file copy of the journal to ``path`` while runs go on: every
        committed event, the executions and the content (``DuckDBJournal.snapshot``). Open the copy
        anywhere with ``Runtime.open(path)``; copying the journal file itself misses its ``.wal``.

        Raises:
            UsageError: ``path`` exists (pass ``overwrite=True``), or the journal is not a DuckDB file.
            JournalError: the copy could not be written.
        """
        journal = self.journal
        if not isinstance(journal, DuckDBJournal):
            raise UsageError(
                f"this runtime's journal ({type(journal).__name__}) has no file to snapshot: "
                "open a DuckDB file journal (loom.Runtime.open('loom.duckdb'))"
            )
        return journal.snapshot(path, overwrite=overwrite)

    def close(self) -> None:
        """Close the effect ring's resources (MCP server sessions...), then the journal (idempotent);
        a DuckDB journal is checkpointed first, so the closed file holds everything on its own."""
        self.effects.close()
        super().close()

    def usage_by_effect(self, execution_id: str) -> dict[str, UsageTotals]:
        """An execution's recorded usage per effect id, from one read of its events."""
        by_effect: dict[str, UsageTotals] = {}
        for step in RunState.fold(self.journal.read(execution_id)).steps.values():
            if step.completed:  # the fold reads both event formats (a format 2 usage may be in the output)
                totals = by_effect.setdefault(step.effect, UsageTotals())
                totals.add(step.usage if isinstance(step.usage, dict) else {"calls": 1})
        return by_effect

    def usage(self, execution_id: str, *, effect_id: str | None = None) -> UsageTotals:
        """An execution's recorded usage: calls, tokens and cost summed over completed steps
        (of one effect only, when ``effect_id`` is given)."""
        by_effect = self.usage_by_effect(execution_id)
        if effect_id is not None:
            return by_effect.get(effect_id, UsageTotals())
        totals = UsageTotals()
        for per_effect in by_effect.values():
            totals.add(per_effect.as_dict())
        return totals


#: Global because ``Agent.start``, ``frames()`` and the magics take no runtime in a notebook: the one
#: ``%load_ext loom_nb`` opens (or ``set_default_runtime`` sets) is found here.
_default: Runtime | None = None
#: Why the notebook's journal could not be opened (``%load_ext loom_nb``), repeated by every later
#: call that needs the default runtime instead of a message that contradicts it.
_open_failure: str | None = None


def set_default_runtime(runtime: Runtime | None) -> None:
    """Make ``runtime`` the one ``Agent.start`` and ``frames()`` use when given none."""
    global _default, _open_failure
    _default = runtime
    if runtime is not None:
        _open_failure = None


def note_open_failure(reason: str | None) -> None:
    """Remember why the default journal could not be opened (None forgets it), so that
    ``default_runtime()`` and the magics name the cause rather than "run %load_ext loom_nb": the
    reason's first sentence only (the fix was said once, where the open failed)."""
    global _open_failure
    _open_failure = None if reason is None else reason.split(". ", 1)[0].rstrip(".")


def open_failure() -> str | None:
    """Why the default journal could not be opened, if it could not."""
    return _open_failure


def default_runtime() -> Runtime:
    """The default runtime (the notebook's, once ``%load_ext loom_nb`` ran).

    Raises:
        UsageError: none is set.
    """
    if (_default is None or _default.closed) and _open_failure is not None:
        raise UsageError(
            f"no default runtime: %load_ext loom_nb could not open the journal: {_open_failure} (what to do is "
            "in its output; %loom open PATH, or pass runtime=loom.Runtime.open(...))"
        )
    if _default is None or _default.closed:
        raise UsageError(
            "no default runtime: run %load_ext loom_nb in a notebook, or pass "
            "runtime=loom.Runtime.open('loom.duckdb') (or call loom.set_default_runtime(rt))"
        )
    return _default
