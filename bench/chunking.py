"""Time of the durable stream chunker (``loom_nb.agent.chunking``) on long text.

Feeds ``--mb`` megabytes of text to ``chunk_deltas`` in deltas of ``--delta`` characters, as a
provider's stream arrives, and reports the seconds and the chunks emitted, for three kinds of text:

- ``no_breaks``: words and spaces with no sentence mark and no newline (one chunk, at the flush);
- ``spaces``: whitespace only (no boundary either, and the old chunker walked back over it);
- ``sentences``: short sentences (a chunk every ~40 characters).

The chunker runs on the kernel's event loop, so its time is time the notebook does nothing else.

Run: ``.venv/bin/python bench/chunking.py [--mb 1 4] [--delta 8]``
"""

from __future__ import annotations

import argparse
import time

from loom_nb.agent.chunking import chunk_deltas

KINDS = {
    "no_breaks": "word ",
    "spaces": "  \t ",
    "sentences": "This is a short sentence of text. ",
}


def measure(kind: str, size: int, delta: int) -> tuple[float, int]:
    """Seconds to chunk ``size`` characters of ``kind`` text fed ``delta`` characters at a time."""
    unit = KINDS[kind]
    text = (unit * (size // len(unit) + 1))[:size]
    deltas = [text[i : i + delta] for i in range(0, size, delta)]
    out: list[str] = []
    chunker = chunk_deltas(out.append, min_chars=40)
    started = time.perf_counter()
    for d in deltas:
        chunker(d)
    chunker.flush()
    seconds = time.perf_counter() - started
    assert "".join(out) == text
    return seconds, len(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, nargs="+", default=[1.0, 4.0], help="text sizes in MB (10^6 chars)")
    parser.add_argument("--delta", type=int, default=8, help="characters per delta")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    args = parser.parse_args()
    print(f"{'text':<10} {'MB':>5} {'deltas':>9} {'seconds':>9} {'chunks':>8}")
    for mb in args.mb:
        size = int(mb * 1_000_000)
        for kind in args.kinds:
            seconds, chunks = measure(kind, size, args.delta)
            print(f"{kind:<10} {mb:>5g} {size // args.delta:>9,} {seconds:>9.3f} {chunks:>8,}", flush=True)


if __name__ == "__main__":
    main()
