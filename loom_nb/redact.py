"""What a secret looks like, for everything loom derives from a configuration: error messages, journal
events, spans, views, reprs and the model's input.

Two rules, each owned here and used everywhere:

* **Labels.** A server is named by ``url_label`` (scheme, host, port and path; no userinfo; each
  query value shown as ``…``; no fragment) or ``command_label`` (the program's name and how many
  arguments follow, never the arguments). ``label_secrets`` lists what else a label's source
  holds (passwords, query values, ``--token=`` values, credential-looking environment values), for
  scrubbing texts that quote it (an SDK's exception).
* **Credential headers.** ``is_credential_header`` decides by name, with a pattern: the
  ``CREDENTIAL_HEADERS`` names, any name ending in ``key`` or holding one of ``CREDENTIAL_WORDS``,
  plus the names a caller configures. ``credentials_in`` lists the secret values of a header set.

The module imports nothing of the package: every layer may use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any
from urllib.parse import parse_qsl, urlsplit

#: What a secret is replaced with.
MASK = "<redacted>"
#: What a label shows instead of a query value.
HIDDEN = "…"
#: Shorter strings are not treated as secrets in free text (replacing a one-letter "key"
#: everywhere would destroy the text and protect nothing).
MIN_SECRET = 8
#: Header names whose values are credentials whatever the pattern says (lower case).
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-goog-api-key"}
)
#: A header (or argument, or environment variable) name holding one of these is a credential.
CREDENTIAL_WORDS = ("token", "secret", "password", "passwd", "auth", "credential", "cookie", "session", "signature")
#: Schemes whose tokens come after a space in an ``Authorization`` value.
_SCHEMES = ("bearer", "basic", "token", "digest", "apikey")
_FLAG = re.compile(r"^-{1,2}([A-Za-z0-9_.-]+)(?:=(.*))?$", re.DOTALL)


def is_credential_header(name: str, also: Iterable[str] = ()) -> bool:
    """Whether a header (or flag, or environment variable) called ``name`` carries a credential:
    one of ``CREDENTIAL_HEADERS``, a name ending in ``key`` (``x-goog-api-key``, ``apikey``), one
    holding a ``CREDENTIAL_WORDS`` word (``x-auth-token``, ``client_secret``), or one of ``also``."""
    low = name.strip().lower()
    if low in CREDENTIAL_HEADERS or low in {a.lower() for a in also}:
        return True
    return low.endswith("key") or any(word in low for word in CREDENTIAL_WORDS)


def credentials_in(headers: Mapping[str, str], also: Iterable[str] = ()) -> list[str]:
    """The credential values among ``headers`` (by ``is_credential_header``): each value, and the
    token of a ``Bearer`` / ``Basic`` / ``Token`` value."""
    extra = tuple(also)
    found: list[str] = []
    for name, value in headers.items():
        if value and is_credential_header(name, extra):
            found.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() in _SCHEMES:
                found.append(token.strip())
    return found


def url_label(url: str) -> str:
    """``url`` as it may be shown: scheme, host, port and path; no userinfo, no fragment, each query
    value replaced by ``…`` (``http://u:pw@h:8/mcp?token=abc`` -> ``http://h:8/mcp?token=…``)."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(a URL that does not parse)"
    if ":" in host:
        host = f"[{host}]"
    shown = f"{parts.scheme}://{host}{'' if port is None else f':{port}'}{parts.path}" if parts.scheme else parts.path
    if parts.query:
        keys = [key for key, _ in parse_qsl(parts.query, keep_blank_values=True)]
        shown += "?" + "&".join(f"{key}={HIDDEN}" for key in keys) if keys else "?" + HIDDEN
    return shown


def command_label(command: str, args: Iterable[str] = ()) -> str:
    """A command line as it may be shown: the program's name and how many arguments follow
    (``python (+2 args)``), never the arguments (any may be a credential)."""
    n = len(list(args))
    name = PurePath(command).name or command
    return name if n == 0 else f"{name} (+{n} arg{'' if n == 1 else 's'})"


def url_secrets(url: str) -> list[str]:
    """What a URL holds that a label must not show: the URL itself, its userinfo and password, and
    its query values."""
    found = [url]
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return found
    userinfo, at, _ = parts.netloc.rpartition("@")
    if at:
        found.append(userinfo + "@")
        if parts.password:
            found.append(parts.password)
    found += [value for _, value in parse_qsl(parts.query, keep_blank_values=True) if value]
    return found


def label_secrets(command: str, args: Iterable[str] = (), env: Mapping[str, str] | None = None) -> list[str]:
    """What a command line (and its environment) holds that a label must not show: each URL
    argument's ``url_secrets``, the value of a credential flag (``--token=v``, ``--token v``), and
    the value of each credential-looking environment variable."""
    found: list[str] = []
    previous_is_flag = False
    for arg in args:
        if previous_is_flag:
            found.append(arg)
        previous_is_flag = False
        flag = _FLAG.match(arg)
        if flag is not None and is_credential_header(flag.group(1)):
            if flag.group(2) is None:
                previous_is_flag = True
            else:
                found += [arg, flag.group(2)]
        if "://" in arg:
            found += url_secrets(arg)
    found += [value for name, value in (env or {}).items() if value and is_credential_header(name)]
    return found


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (a string, or JSON-like dicts, lists and tuples of them) with each secret replaced
    by ``MASK``, longest first; secrets shorter than ``MIN_SECRET`` are kept unless they end in
    ``@`` (a URL's userinfo)."""
    kept = sorted(
        {s for s in secrets if isinstance(s, str) and (len(s) >= MIN_SECRET or (len(s) > 1 and s.endswith("@")))},
        key=len,
        reverse=True,
    )
    return _scrub(value, kept) if kept else value


def _scrub(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {_scrub(k, secrets): _scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v, secrets) for v in value)
    return value
