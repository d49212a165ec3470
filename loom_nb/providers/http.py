"""``HTTPProvider``, the base of ``OpenAIChat`` and ``AnthropicMessages``: API key resolution, the
httpx client's lifetime, and the mapping of every failure to ``ProviderError`` subclasses the
retry ring can act on; plus the small parsers they share (retry-after, error bodies, arguments)."""

from __future__ import annotations

import email.utils
import functools
import json
import math
import os
import re
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self, TypedDict

import httpx

from loom_nb.errors import (
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderStreamCut,
    ProviderTimeout,
    UsageError,
)
from loom_nb.messages import MAX_ARGUMENT_DEPTH, ModelRequest, ModelResponse, refused_arguments
from loom_nb.providers.base import DeltaSink
from loom_nb.providers.redaction import Redactor
from loom_nb.providers.sse import SSEEvent, aiter_sse_bytes
from loom_nb.redact import credentials_in, url_label


def parse_retry_after(
    headers: Mapping[str, str], *, now: float | None = None, rate_limited: bool = False
) -> float | None:
    """Seconds to wait before retrying, from ``retry-after-ms`` or ``retry-after``, or None.

    When neither is usable and ``rate_limited`` (an HTTP 429), OpenAI's ``x-ratelimit-reset-requests``
    and ``x-ratelimit-reset-tokens`` (Go durations such as ``1s``, ``6m0s``, ``20ms``) are read: the
    reset of a limit whose ``x-ratelimit-remaining-*`` header is ``0`` (the later one when both are),
    else the sooner of the two resets.

    Args:
        headers: Response headers (an ``httpx.Headers`` or a mapping with lower-case keys).
        now: The current Unix time (for an HTTP-date value); defaults to ``time.time()``.
        rate_limited: The response is a 429, so the rate-limit reset headers apply.

    Returns:
        A non-negative number of seconds, or None when no header holds a usable value.
    """
    ms = headers.get("retry-after-ms")
    if ms is not None:
        seconds = _non_negative(ms)
        if seconds is not None:
            return seconds / 1000.0
    value = headers.get("retry-after")
    if value is not None:
        seconds = _non_negative(value)
        if seconds is not None:
            return seconds
        try:
            when = email.utils.parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError, OverflowError):
            when = None
        if when is not None:
            current = time.time() if now is None else now
            return max(0.0, when.timestamp() - current)
    return _rate_limit_reset(headers) if rate_limited else None


def _rate_limit_reset(headers: Mapping[str, str]) -> float | None:
    resets: dict[str, float] = {}
    for limit in ("requests", "tokens"):
        raw = headers.get(f"x-ratelimit-reset-{limit}")
        seconds = parse_duration(raw) if raw is not None else None
        if seconds is not None:
            resets[limit] = seconds
    if not resets:
        return None
    exhausted = [
        s for limit, s in resets.items() if (headers.get(f"x-ratelimit-remaining-{limit}") or "").strip() == "0"
    ]
    return max(exhausted) if exhausted else min(resets.values())


_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)")


def parse_duration(text: str) -> float | None:
    """Seconds in a Go-style duration (``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``) or a bare number of
    seconds; None when ``text`` is neither (or negative)."""
    text = text.strip()
    plain = _non_negative(text) if text else None
    if plain is not None or not text:
        return plain
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return total if pos == len(text) and pos > 0 and math.isfinite(total) else None


def _non_negative(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def error_detail(body: str) -> str:
    """The provider's own error message from an error body (JSON or not), as one short line."""
    try:
        data = json.loads(body)
    except ValueError:
        return _one_line(body)
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, str):
            return _one_line(err)
        if isinstance(err, dict):
            message = err.get("message") or err.get("detail") or data.get("message") or data.get("detail")
            kind = err.get("type") if isinstance(err.get("type"), str) else None
            if isinstance(message, str) and message:
                return _one_line(f"{kind}: {message}" if kind and kind != "error" else message)
    return _one_line(body)


def _one_line(text: str) -> str:
    return excerpt(" ".join(text.split()), 300)


#: The HTTP status an error code or type stands for, when an API reports an error inside a 200
#: body or a stream (OpenAI's ``error.code`` / ``error.type``, Anthropic's ``error.type``), so that
#: ``ProviderHTTPError.retryable`` means the same thing as for an error status.
ERROR_STATUS: Mapping[str, int] = {
    # the request itself is wrong: not retryable
    "invalid_request_error": 400,
    "invalid_request": 400,
    "bad_request": 400,
    "context_length_exceeded": 400,
    "string_above_max_length": 400,
    "invalid_api_key": 401,
    "authentication_error": 401,
    "unauthorized": 401,
    "insufficient_quota": 402,  # billing: waiting does not help
    "billing_error": 402,
    "permission_error": 403,
    "permission_denied": 403,
    "unsupported_country_region_territory": 403,
    "not_found_error": 404,
    "not_found": 404,
    "model_not_found": 404,
    "request_too_large": 413,
    # transient: retryable
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "requests": 429,
    "tokens": 429,
    "api_error": 500,
    "server_error": 500,
    "internal_error": 500,
    "service_unavailable": 503,
    "overloaded": 503,
    "engine_overloaded": 503,
    "timeout_error": 504,
    "timeout": 504,
    "overloaded_error": 529,
    # the Responses API's own codes (its response.failed / error events)
    "vector_store_timeout": 504,
    "invalid_prompt": 400,
    "data_residency_mismatch": 400,
    "bio_policy": 400,
    "misalignment_policy_violation": 400,
    "invalid_image": 400,
    "invalid_image_format": 400,
    "invalid_base64_image": 400,
    "invalid_image_url": 400,
    "image_too_large": 400,
    "image_too_small": 400,
    "image_parse_error": 400,
    "image_content_policy_violation": 400,
    "invalid_image_mode": 400,
    "image_file_too_large": 400,
    "unsupported_image_media_type": 400,
    "empty_image_file": 400,
    "failed_to_download_image": 400,
    "image_file_not_found": 404,
}


def error_status(error: object) -> int:
    """The HTTP status an in-body or in-stream ``error`` object stands for (see ``ERROR_STATUS``).

    A numeric ``code`` (an int or digits, 400-599) is taken as is; then a known string ``code``,
    then a known ``type``; anything else is 500 (retryable: the server failed in a way it did not
    name).
    """
    if not isinstance(error, Mapping):
        return 500
    code = error.get("code")
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600:
        return code
    for key in (code, error.get("type")):
        if isinstance(key, str) and key.lower() in ERROR_STATUS:
            return ERROR_STATUS[key.lower()]
    return 500


def token_count(value: Any) -> int:
    """A usage count from a response: a non-negative integer as is, anything else (missing, null,
    negative, a string) 0."""
    return value if isinstance(value, int) and value >= 0 else 0


def text_or_none(value: Any) -> str | None:
    """``value`` when it is a non-empty string (an id or a model name a server sent), else None."""
    return value if isinstance(value, str) and value else None


def excerpt(text: str, limit: int = 160) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments text → ``(arguments, raw_arguments)``.

    A JSON object gives ``(object, None)``; empty text gives ``({}, None)`` (a call with no
    arguments); anything else gives ``({}, raw)`` so the agent loop can report it to the model.
    """
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError:
        return {}, raw
    except RecursionError:  # nested deeper than the parser goes: an invalid call, never a failed run
        return {}, refused_arguments(f"nested deeper than {MAX_ARGUMENT_DEPTH} levels", raw)
    return (value, None) if isinstance(value, dict) else ({}, raw)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Building a default context costs ~25 ms; build it once per process.
    return httpx.create_ssl_context()


class _Secret:
    """An API key that never shows itself in ``repr`` or ``str``."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


class HTTPOptions(TypedDict, total=False):
    """The keyword options of ``HTTPProvider`` (described there), for a subclass that adds its own:
    ``def __init__(self, model, *, extra=..., **options: Unpack[HTTPOptions])``."""

    base_url: str | None
    api_key: str | None
    transport: httpx.AsyncBaseTransport | None
    timeout: float
    extra_headers: Mapping[str, str] | None
    secret_headers: Iterable[str]
    stream: bool
    max_tokens: int | None


class StreamState(Protocol):
    """What a client's stream parser keeps while events arrive."""

    done: bool

    def feed(self, event: SSEEvent) -> str | None:
        """Take one event; return the text delta it carries, if any."""
        ...

    def result(self) -> ModelResponse:
        """The assembled response, once ``done``."""
        ...


class HTTPProvider:
    """Base of the HTTP model clients: keys, the httpx client, and failures as ``ProviderError``.

    Each ``complete`` call opens and closes its own ``httpx.AsyncClient`` unless the provider is
    used as an async context manager (``async with provider: ...``), which keeps one connection pool
    open until the block exits. A ``transport`` passed in belongs to the caller and is never closed.

    Args:
        model: The model name sent with each request (``ModelRequest.model`` overrides it).
        base_url: The API root (None: the class's ``default_base_url``).
        api_key: The key; None reads the class's environment variable at the first call; ``""``
            sends no credentials (a local server).
        transport: An httpx transport (``httpx.MockTransport`` in tests), or None for the network.
        timeout: Seconds allowed to connect, and between two reads of the response.
        extra_headers: Headers added to every request.
        secret_headers: More header names whose values are secrets (redacted from every error and
            response), beside those ``loom_nb.redact.is_credential_header`` recognises.
        stream: Ask for a server-sent-event stream (True) or one JSON body (False).
        max_tokens: The default output cap (None: the class's ``default_max_tokens``);
            ``ModelRequest.max_tokens`` overrides it.

    Attributes:
        name: The provider name shown in logs (``openai``, ``anthropic``).
        env_var: The environment variable the key is read from.
        path: The endpoint, appended to ``base_url``.
        terminal: The event that ends a complete stream (named in errors).
        default_base_url: The API root used when ``base_url`` is not given.
        default_max_tokens: The output cap used when ``max_tokens`` is not given.
        native_output: True when the wire has native structured output (a strict JSON schema for
            the answer, ``ModelRequest.output``): ``Agent(output_type=..., output_mode="auto")``
            then uses it instead of a ``final_result`` tool.
    """

    name: str = "http"
    env_var: ClassVar[str] = ""
    path: ClassVar[str] = ""
    terminal: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""
    default_max_tokens: ClassVar[int | None] = None
    native_output: ClassVar[bool] = False

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 60.0,
        extra_headers: Mapping[str, str] | None = None,
        secret_headers: Iterable[str] = (),
        stream: bool = True,
        max_tokens: int | None = None,
    ) -> None:
        base_url = self.default_base_url if base_url is None else base_url
        if not isinstance(model, str) or not model:
            raise UsageError(f"{type(self).__name__} needs a model name, e.g. model='...'")
        if not base_url.startswith(("http://", "https://")):
            raise UsageError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.stream = stream
        self.max_tokens = self.default_max_tokens if max_tokens is None else max_tokens
        self._api_key = None if api_key is None else _Secret(api_key)
        self._transport = transport
        self._extra_headers = dict(extra_headers or {})
        self._secret_headers = tuple(secret_headers)
        self._client: httpx.AsyncClient | None = None
        url = httpx.URL(self.base_url + self.path)
        self._url = str(url)
        # Shown in errors and reprs: no user:password part, no query values.
        self._display_url = url_label(str(url))

    def __repr__(self) -> str:
        shown = url_label(self.base_url)  # never a password or a query value (a key may be one)
        return f"{type(self).__name__}(model={self.model!r}, base_url={shown!r}, stream={self.stream})"

    # -- client lifetime ------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._client is None:
            self._client = self._new_client()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pooled client opened by ``async with`` (a no-op otherwise)."""
        client, self._client = self._client, None
        if client is not None and self._transport is None:
            await client.aclose()

    def _new_client(self) -> httpx.AsyncClient:
        if self._transport is not None:
            return httpx.AsyncClient(transport=self._transport, timeout=self.timeout)
        return httpx.AsyncClient(timeout=self.timeout, verify=_ssl_context())

    @asynccontextmanager
    async def _client_for_call(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._client is not None:
            yield self._client
        elif self._transport is not None:
            # Closing the client would close the caller's transport; it holds nothing else.
            yield self._new_client()
        else:
            async with self._new_client() as client:
                yield client

    # -- secrets --------------------------------------------------------------------------------

    def _key(self) -> str:
        if self._api_key is not None:
            return self._api_key.value
        key = os.environ.get(self.env_var, "")
        if not key:
            raise UsageError(
                f"no API key for {type(self).__name__}: set the {self.env_var} environment variable or "
                f"pass api_key=... (api_key='' sends none, for a local server)"
            )
        return key

    # -- the call -------------------------------------------------------------------------------

    def output_cap(self, request: ModelRequest) -> int | None:
        """The output token cap for ``request``: its own ``max_tokens``, else the provider's."""
        return request.max_tokens if request.max_tokens is not None else self.max_tokens

    def _build_body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _auth_headers(self, key: str) -> dict[str, str]:
        raise NotImplementedError

    def _stream_state(self) -> StreamState:
        raise NotImplementedError

    def _parse_body(self, data: dict[str, Any]) -> ModelResponse:
        raise NotImplementedError

    def _headers(self, key: str, idempotency_key: str | None) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if self.stream else "application/json",
            **self._extra_headers,
            **self._auth_headers(key),
        }
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        return headers

    async def complete(
        self,
        request: ModelRequest,
        *,
        on_delta: DeltaSink | None = None,
        idempotency_key: str | None = None,
    ) -> ModelResponse:
        """Send ``request`` and return the model's response, streaming text deltas to ``on_delta``.

        Args:
            request: The transcript, tools and limits.
            on_delta: Called with each text delta as it arrives (once with the whole text when not
                streaming).
            idempotency_key: Sent as the ``Idempotency-Key`` header when given.

        Returns:
            The assistant message with its tool calls, usage, finish reason and response id.

        Raises:
            UsageError: No API key is configured.
            ProviderHTTPError: The API answered with an error status (retryable for 429 and 5xx).
            ProviderTimeout: The call timed out or the connection failed (retryable).
            ProviderStreamCut: The stream ended cleanly before its terminal event (retryable).
            ProviderProtocolError: The response or stream was malformed.
        """
        key = self._key()
        body = self._build_body(request)
        headers = self._headers(key, idempotency_key)
        redactor = Redactor([key, *credentials_in(headers, self._secret_headers)])
        deltas = redactor.stream(on_delta)
        try:
            result = await self._post(body, headers, deltas)
        except Exception as exc:
            # The one redaction point for failures: message, arguments, attributes and causes.
            redactor.exception(exc)
            raise
        deltas.flush()
        return redactor.response(result)

    async def _post(self, body: dict[str, Any], headers: dict[str, str], on_delta: DeltaSink) -> ModelResponse:
        # httpx errors are raised ``from None``: they hold the request, and so the key.
        try:
            async with (
                self._client_for_call() as client,
                client.stream("POST", self._url, json=body, headers=headers) as response,
            ):
                return await self._handle(response, on_delta)
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(
                f"POST {self._display_url} timed out after {self.timeout:g} s ({type(exc).__name__})"
            ) from None
        except httpx.UnsupportedProtocol as exc:
            raise UsageError(f"cannot POST {self._display_url}: {exc}") from None
        except httpx.TransportError as exc:
            detail = str(exc) or "no detail"
            raise ProviderTimeout(
                f"POST {self._display_url} failed: {type(exc).__name__}: {excerpt(detail, 200)}"
            ) from None
        except httpx.DecodingError as exc:
            raise ProviderProtocolError(f"the response from {self._display_url} could not be decoded: {exc}") from None

    async def _handle(self, response: httpx.Response, on_delta: DeltaSink) -> ModelResponse:
        if not response.is_success:
            raw = await response.aread()
            raise self._http_error(response, raw)
        ctype = response.headers.get("content-type", "")
        if "event-stream" in ctype or (self.stream and "json" not in ctype):
            return await self._read_stream(response, on_delta)
        raw = await response.aread()
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            text = raw.decode("utf-8", "replace")
            raise ProviderProtocolError(
                f"{self._display_url} answered HTTP {response.status_code} with a body that is not a "
                f"JSON object (content-type {ctype!r}): {excerpt(text)!r}"
            )
        try:
            result = self._parse_body(data)
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
            raise ProviderProtocolError(
                f"unexpected response shape from {self._display_url} ({type(exc).__name__}: {exc}): "
                f"{excerpt(raw.decode('utf-8', 'replace'))!r}"
            ) from exc
        if result.message.text:
            on_delta(result.message.text)
        return result

    async def _read_stream(self, response: httpx.Response, on_delta: DeltaSink) -> ModelResponse:
        state = self._stream_state()
        count = 0
        last = ""
        events = aiter_sse_bytes(response.aiter_bytes())
        try:
            async for event in events:
                count += 1
                last = event.data
                try:
                    text = state.feed(event)
                except json.JSONDecodeError as exc:
                    raise ProviderProtocolError(
                        f"malformed JSON in event {count} of the stream from {self._display_url}: "
                        f"{excerpt(event.data)!r}"
                    ) from exc
                except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
                    raise ProviderProtocolError(
                        f"unexpected event {count} in the stream from {self._display_url} "
                        f"({type(exc).__name__}: {exc}): {excerpt(event.data)!r}"
                    ) from exc
                if text:
                    on_delta(text)
                if state.done:
                    break
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(
                f"the stream from {self._display_url} stalled for more than {self.timeout:g} s "
                f"({type(exc).__name__}) after {_received(count, last)}"
            ) from None
        except httpx.TransportError as exc:
            raise ProviderTimeout(
                f"the stream from {self._display_url} was cut off ({type(exc).__name__}: "
                f"{excerpt(str(exc), 200)}) after {_received(count, last)}"
            ) from None
        if not state.done:
            raise ProviderStreamCut(
                f"the stream from {self._display_url} ended before {self.terminal} (after {_received(count, last)}): "
                "the server closed it mid-answer; the call can be retried (the agent's retry ring does so)"
            )
        await _drain(events)
        try:
            return state.result()
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
            raise ProviderProtocolError(
                f"the stream from {self._display_url} assembled into an invalid response "
                f"({type(exc).__name__}: {excerpt(str(exc), 300)})"
            ) from exc

    def _http_error(self, response: httpx.Response, raw: bytes) -> ProviderHTTPError:
        body = raw.decode("utf-8", "replace")
        detail = error_detail(body) if body.strip() else (response.reason_phrase or "no error message")
        retry_after = parse_retry_after(response.headers, rate_limited=response.status_code == 429)
        message = f"POST {self._display_url} returned HTTP {response.status_code}: {detail}"
        if retry_after is not None:
            message += f" (retry after {retry_after:g} s)"
        return ProviderHTTPError(
            message, status_code=response.status_code, body=excerpt(body, 20_000), retry_after=retry_after
        )


async def _drain(events: AsyncIterator[SSEEvent]) -> None:
    """Read what follows the terminal event (normally just the body's end) so the connection can be
    reused; anything sent after it is ignored, and so is a failure, since the answer is complete."""
    try:
        async for _ in events:
            pass
    except httpx.HTTPError:
        pass


def _received(count: int, last: str) -> str:
    return f"{count} events, the last {excerpt(last)!r}" if count else "no complete event"
