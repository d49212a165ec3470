"""What the notebook views show of text they did not write (a model's, a tool's, an MCP server's):
shown as it is, never acted on by the page.

Two concerns, one public home for each, so every card, row and panel uses the same rule:

- **Invisible characters are shown escaped** (``visible``): a bidi control (U+202E and its kin), a
  zero-width character (U+200B..U+200D, U+2060, U+FEFF) or any other character Python does not
  print (categories Cc, Cf, Cs, Co, Cn, Zl, Zp and every space but U+0020; line breaks and tabs
  are kept) shows as ``\\u202e``, as ``repr`` shows it in a tool row. So an argument
  ``/home/ana/\\u202etxt.sedils\\u202c`` never reads as ``/home/ana/slides.txt``. An edit form shows
  its values the same way and reads such escapes back (``unescape_visible``). The model's prose
  (Markdown) keeps its joiners (emoji, Indic and Persian text need them) and shows only its bidi
  controls escaped (``escape_bidi``).
- **The model's Markdown fetches nothing by itself** (``markdown_html``): raw HTML is escaped,
  ``javascript:`` links are refused, an image is a link reading ``[image: alt · host]`` that loads
  nothing until the reader clicks it, and every link shows the host it goes to after its text.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any
from urllib.parse import urlsplit

#: The characters that change the order text is shown in, without showing themselves: the
#: embeddings and overrides (U+202A..U+202E), the isolates (U+2066..U+2069) and the marks (U+200E,
#: U+200F, U+061C).
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

_KEPT = "\n\t"
_BIDI_RE = re.compile("[" + "".join(sorted(BIDI_CONTROLS)) + "]")
_ESCAPE_RE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))")


def is_invisible(ch: str) -> bool:
    """Whether the character ``ch`` is shown escaped: one Python does not print (``str.isprintable``),
    other than a line break or a tab."""
    return not ch.isprintable() and ch not in _KEPT


def escape_char(ch: str) -> str:
    """``ch`` as the escape ``visible`` shows: ``\\xNN`` below U+0100, ``\\uNNNN`` in the BMP,
    ``\\UNNNNNNNN`` above."""
    n = ord(ch)
    if n < 0x100:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def visible(text: str) -> str:
    """``text`` with every invisible character (``is_invisible``) shown as its escape
    (``escape_char``): what a card, a row or a panel shows of an argument, a result, a reason or
    an error. Backslashes already in ``text`` are left as they are."""
    if text.isprintable() or all(ch.isprintable() or ch in _KEPT for ch in text):
        return text
    return "".join(escape_char(ch) if is_invisible(ch) else ch for ch in text)


def unescape_visible(text: str) -> str:
    """``visible`` undone: each ``\\xNN`` / ``\\uNNNN`` / ``\\UNNNNNNNN`` that names an invisible
    character becomes that character (an escape of a printable one, e.g. ``C:\\x41``, stays as
    typed). What an edit form reads back from a field a person changed."""

    def back(m: re.Match[str]) -> str:
        n = int(m.group(1) or m.group(2) or m.group(3), 16)
        if n > 0x10FFFF:
            return m.group(0)
        ch = chr(n)
        return ch if is_invisible(ch) else m.group(0)

    return _ESCAPE_RE.sub(back, text) if "\\" in text else text


def visible_json(value: Any, *, indent: int | None = 2) -> str:
    """``value`` as JSON (non-ASCII kept) with every invisible character in its strings written as
    a JSON ``\\uNNNN`` escape (a surrogate pair above the BMP): it reads the same to a person and
    parses back (``json.loads``) to the same value."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    if all(ch.isprintable() or ch in _KEPT for ch in text):
        return text
    return "".join(json.dumps(ch)[1:-1] if is_invisible(ch) else ch for ch in text)


def escape_bidi(text: str) -> str:
    """``text`` with its bidi controls (``BIDI_CONTROLS``) shown as their escapes: for prose, which
    keeps its zero-width joiners."""
    return _BIDI_RE.sub(lambda m: escape_char(m.group(0)), text)


def link_host(href: str) -> str:
    """Where a link goes, as a reader should see it: the host (with its port) of an absolute URL,
    as the browser will contact it (``user@`` dropped, an international name in its ``xn--`` form
    as markdown-it writes it), the address of a ``mailto:``, ``data URL``, or ``this server`` for a
    relative URL. Shown through ``visible``."""
    try:
        parts = urlsplit(href)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return visible(href[:60])
    if host:
        return visible(host + (f":{port}" if port is not None else ""))
    if parts.scheme == "mailto":
        return visible(parts.path)
    if parts.scheme == "data":
        return "data URL"
    return visible(parts.scheme + ":") if parts.scheme else "this server"


_LINK_ATTRS = " target='_blank' rel='noopener noreferrer nofollow'"
_MARKDOWN: Any = None


def _link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    href = str(tokens[idx].attrGet("href") or "")
    env.setdefault("loom_links", []).append(href)
    title = html.escape(visible(href), quote=True)
    return f"<a href='{html.escape(href, quote=True)}' title='{title}'{_LINK_ATTRS}>"


def _link_close(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    links = env.get("loom_links") or [""]
    href = links.pop()
    return f"</a><span class='loom-link-host'> (→ <bdi>{html.escape(link_host(href))}</bdi>)</span>"


def _image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env)
    label = f"[image: {alt} · {link_host(src)}]" if alt else f"[image · {link_host(src)}]"
    title = html.escape(visible(src), quote=True)
    if env.get("loom_links") or src.startswith("data:"):  # inside a link (no link in a link), or inline data
        return f"<span class='loom-image' title='{title}'>{html.escape(label)}</span>"
    href = html.escape(src, quote=True)
    return f"<a class='loom-image' href='{href}' title='{title}'{_LINK_ATTRS}>{html.escape(label)}</a>"


def _renderer() -> Any:
    global _MARKDOWN
    if _MARKDOWN is None:
        from markdown_it import MarkdownIt

        md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
        md.add_render_rule("link_open", _link_open)
        md.add_render_rule("link_close", _link_close)
        md.add_render_rule("image", _image)
        _MARKDOWN = md
    return _MARKDOWN


def markdown_html(text: str) -> str:
    """``text`` (the model's Markdown) as HTML that fetches nothing by itself: raw HTML is escaped,
    not rendered; ``javascript:`` (and ``vbscript:``, ``file:``) links are refused; an image is a
    link ``[image: alt · host]`` (a plain placeholder inside a link or for inline data) that loads
    nothing until clicked; each link opens in a new tab and shows its host after its text
    (``Approve (→ evil.example)``); bidi controls show escaped (``escape_bidi``). CommonMark plus
    tables and strikethrough (markdown-it-py); wrapped in ``<div class='loom-markdown'>``."""
    return f"<div class='loom-markdown'>{_renderer().render(escape_bidi(text), {})}</div>"
