"""``Redactor``: the one point every string carrying provider text passes before it reaches an
exception, a journal event, a log record or a repr.

A provider call builds one ``Redactor`` from its secrets (the API key from the argument or the
environment, and every credential header value it sends: ``loom_nb.redact.credentials_in`` decides
which headers are credentials, by a name pattern plus the provider's ``secret_headers``). It replaces each secret with
``<redacted>`` in:

- the response (text, tool-call arguments, ids: every string of it),
- the streamed text deltas (a secret split across deltas is held back until it is complete, so
  it never reaches ``on_delta``, the live view or a journaled stream chunk),
- every exception the call raises: its message, arguments and attributes, and its cause chain
  (all of which the journal records).

Secrets shorter than ``MIN_SECRET`` characters are not redacted: replacing a one-letter "key" of
a local server everywhere would destroy the text and protect nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from loom_nb.messages import ModelResponse
from loom_nb.redact import CREDENTIAL_HEADERS, MASK, MIN_SECRET, credentials_in, is_credential_header

__all__ = [
    "CREDENTIAL_HEADERS",
    "MASK",
    "MIN_SECRET",
    "Redactor",
    "StreamRedactor",
    "credentials_in",
    "is_credential_header",
]


class Redactor:
    """Replaces secrets with ``MASK`` in text, JSON values, responses, streams and exceptions.

    Args:
        secrets: The strings to hide (empty and short ones are ignored).
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        kept = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET}
        # Longest first, so a header value "Bearer <key>" is replaced whole before its token.
        self.secrets: tuple[str, ...] = tuple(sorted(kept, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __repr__(self) -> str:
        return f"Redactor({len(self.secrets)} secret(s))"

    def text(self, text: str) -> str:
        """``text`` with every secret replaced."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def value(self, value: Any) -> Any:
        """A JSON-like value (dicts, lists, tuples, strings...) with every string redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        return value

    def response(self, response: ModelResponse) -> ModelResponse:
        """``response`` with every string in it redacted (the same object when none holds a secret)."""
        if not self.secrets:
            return response
        dumped = response.model_dump(mode="json")
        cleaned = self.value(dumped)
        return response if cleaned == dumped else ModelResponse.model_validate(cleaned)

    def exception(self, exc: BaseException) -> BaseException:
        """Redact ``exc`` in place: its arguments, its attributes and its cause and context chain.

        Returns:
            ``exc`` itself, so that ``raise redactor.exception(exc)`` keeps its type and traceback.
        """
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen and self.secrets:
            seen.add(id(current))
            current.args = tuple(self.value(a) for a in current.args)
            for name, attr in list(vars(current).items()):
                cleaned = self.value(attr)
                if cleaned is not attr:
                    setattr(current, name, cleaned)
            if current.__context__ is not None and current.__context__ is not current.__cause__:
                self.exception(current.__context__)
            current = current.__cause__
        return exc

    def stream(self, sink: Callable[[str], None] | None) -> StreamRedactor:
        """A filter in front of ``sink`` that never lets a secret through, even split across deltas."""
        return StreamRedactor(self, sink)


class StreamRedactor:
    """Passes streamed text deltas on to a sink with every secret replaced.

    The tail of the text that could be the beginning of a secret is held back until the next delta
    shows whether it is one; ``flush()`` passes on what is held once the stream is complete.

    Args:
        redactor: The secrets.
        sink: Where redacted deltas go (None: nowhere).
    """

    def __init__(self, redactor: Redactor, sink: Callable[[str], None] | None) -> None:
        self.redactor = redactor
        self.sink = sink
        self.held = ""

    def __call__(self, delta: str) -> None:
        """Take one delta; pass on everything that can no longer turn out to be part of a secret."""
        if self.sink is None:
            return
        if not self.redactor.secrets:
            self.sink(delta)
            return
        text = self.redactor.text(self.held + delta)
        keep = self._prefix_tail(text)
        self.held = text[len(text) - keep :] if keep else ""
        ready = text[: len(text) - keep]
        if ready:
            self.sink(ready)

    def flush(self) -> None:
        """Pass on the held tail (the stream ended: it was not a secret)."""
        held, self.held = self.held, ""
        if held and self.sink is not None:
            self.sink(held)

    def _prefix_tail(self, text: str) -> int:
        """The length of the longest end of ``text`` that is a proper prefix of a secret."""
        longest = 0
        for secret in self.redactor.secrets:
            first = secret[0]
            start = max(0, len(text) - len(secret) + 1)
            i = text.find(first, start)
            while i != -1:
                if secret.startswith(text[i:]):
                    longest = max(longest, len(text) - i)
                    break
                i = text.find(first, i + 1)
        return longest
