"""The name the model calls an MCP tool by (``model_name``): the server's, when providers accept it.

Providers accept tool names of ``[A-Za-z0-9_-]{1,64}`` (OpenAI's rule, the strictest). A server's
name that fits (with the prefix) is kept. Any other (``a b``, ``a/b``, ``é``, 300 characters, an
empty one) becomes its ASCII letters, digits, ``_`` and ``-`` (accents dropped, anything else one
``_``), cut to fit, then ``_`` and the first 8 hex digits of the SHA-256 of the server's name: the
same name at every listing, and distinct for distinct server names (``mcp_tools`` refuses the
unlikely clash with another tool's name). The server's own name is kept for the call
(``McpTool.remote_name``).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from loom_nb.errors import UsageError

#: A tool name every provider accepts.
VALID_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_NAME = 64
#: The hex digits of the server name's digest a mapped name ends with.
TAG_CHARS = 8
#: The longest prefix: room is left for a mapped name's tag and a few characters of its own.
MAX_PREFIX = MAX_NAME - TAG_CHARS - 9
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def check_prefix(prefix: str, server: str) -> None:
    """Refuse a prefix no provider would accept in a tool name.

    Raises:
        UsageError: naming the server and the rule.
    """
    if prefix and (_UNSAFE.search(prefix) or len(prefix) > MAX_PREFIX):
        raise UsageError(
            f"mcp_tools({server}): prefix={prefix!r} cannot start a tool name; providers accept names of "
            f"[A-Za-z0-9_-]{{1,64}}: use at most {MAX_PREFIX} of those characters (prefix='docs_')"
        )


def model_name(remote: str, prefix: str = "") -> str:
    """The name the model calls the server's tool ``remote`` by (see the module docstring)."""
    name = prefix + remote
    if VALID_NAME.fullmatch(name):
        return name
    folded = unicodedata.normalize("NFKD", remote).encode("ascii", "ignore").decode("ascii")
    safe = _UNSAFE.sub("_", folded).strip("_") or "tool"
    tag = hashlib.sha256(remote.encode("utf-8", "surrogatepass")).hexdigest()[:TAG_CHARS]
    room = MAX_NAME - len(prefix) - TAG_CHARS - 1
    return f"{prefix}{safe[:room]}_{tag}"
