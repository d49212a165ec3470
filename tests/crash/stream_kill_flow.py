"""An agent whose model step is killed mid-stream by a real SIGKILL (``test_stream_kill.py``).

Usage::

    python tests/crash/stream_kill_flow.py <journal> <marker> <start|recover>

``start`` runs agent ``teller`` (execution ``stream-1``) on the journal (a DuckDB file or a PostgreSQL
URL, ``stores.open_journal``) with the engine's default stream policy for that journal. Its model
streams ``SENTENCES`` word by word (``PACE`` seconds apart), then the words of ``TAIL`` (a sentence
it never finishes), then writes ``marker`` and waits forever: the test kills the process there.
``recover`` recovers the run with a model that answers ``SENTENCES + TAIL + END`` at once and prints
the result as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import loom_nb as loom
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse

EXECUTION_ID = "stream-1"
#: Whole sentences of at least 40 characters: the chunker cuts each as its own chunk.
SENTENCES = [f"Sentence number {i} of the answer is complete here. " for i in range(6)]
TAIL = "And this last one never gets to"
END = " its end."
PACE = 0.01


class StallingModel:
    """Streams ``SENTENCES`` and ``TAIL``, then marks the file ``marker`` and never answers."""

    name = "stalling"

    def __init__(self, marker: str) -> None:
        self.marker = marker

    async def complete(self, request: ModelRequest, *, on_delta: Any = None, idempotency_key: Any = None) -> Any:
        """Stream, mark, wait forever."""
        for word in re.findall(r"\S+\s*", "".join(SENTENCES) + TAIL):
            on_delta(word)
            await asyncio.sleep(PACE)
        Path(self.marker).write_text("stalled", encoding="utf-8")
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def answer() -> str:
    """The whole answer the recovering model gives."""
    return "".join(SENTENCES) + TAIL + END


def main(argv: list[str]) -> int:
    """Entry point: ``<journal> <marker> <start|recover>``."""
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    from tests import stores  # the repository root is on sys.path by now (see __main__)

    target, marker, mode = argv
    rt = loom.Runtime(stores.open_journal(target), flows=FlowRegistry())
    try:
        if mode == "start":
            agent = loom.Agent(model=StallingModel(marker), name="teller", model_retry=None)
            agent.start("go", runtime=rt, execution_id=EXECUTION_ID)
            return 1  # never reached: the model stalls until the process is killed
        agent = loom.Agent(model=loom.ScriptedModel([ModelResponse.text(answer())]), name="teller", model_retry=None)
        agent.register(rt)
        rt.recover_sync()
        run = agent.attach(EXECUTION_ID, runtime=rt)
        print(json.dumps({"status": run.status, "output": run.result.output if run.result else None}))
        return 0
    finally:
        rt.close()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.crash import stream_kill_flow

    sys.exit(stream_kill_flow.main(sys.argv[1:]))
