"""One escaping rule per sink, in one place: the terminal, GitHub Markdown, the shell. Pure, stdlib only.

Text that reaches these sinks comes from shards, probes and result files: a probe message can hold
anything (escape sequences, backticks, HTML, a lone surrogate). Every printer passes it through the
function of its sink, and through no other:

- ``terminal``: colour/bold markers (SGR) dropped, other control characters made visible
  (``\\x1b``), so a message cannot clear the screen,
  set the title, print a hyperlink or move the cursor. Used for everything the tool prints and for
  the comments of the files it writes for people (constraints.txt).
- ``md_text``, ``md_prose``, ``md_code``, ``md_fence``, ``md_html``, ``md_title``: GitHub-flavoured Markdown (issues,
  the step summary, summary.md, the repro bundle): HTML escaped, ``@mentions`` and images
  neutralised, a line cannot start a heading, quote or list, a code fence is longer than any
  backtick run inside, a title is one line.
- ``shell_line``: every printed command quoted (``'numpy<2'``).

HTML is not here: the page's template escapes every value (Jinja autoescape).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from functools import lru_cache

from torch_matrix.probes import visible as visible_rule

# The control characters a terminal must be shown, not sent: the probe runner's rule, the one copy.
_TERMINAL_MULTILINE = visible_rule.MULTILINE
_TERMINAL_ONE_LINE = visible_rule.ONE_LINE
_visible = visible_rule.shown


# Select Graphic Rendition (bold, colour, reset: ``\x1b[1m``, ``\x1b[0m``): styling a message carries
# (torch's weights_only error is bold in places). Dropped, so the words read as they are; every
# other escape sequence is made visible.
_SGR = re.compile("\x1b\\[[0-9;]*m")


def terminal(text: object, multiline: bool = True) -> str:
    """``text`` safe to print: colour and bold markers dropped, every other control character
    shown as ``\\x1b`` / ``\\u202e``.

    ``multiline``: newlines and tabs stay (a traceback, a bundle); otherwise they are shown too."""
    text = str(text)
    if text.isprintable():  # the common case, at C speed
        return text
    text = _SGR.sub("", text)
    return (_TERMINAL_MULTILINE if multiline else _TERMINAL_ONE_LINE).sub(_visible, text)


# ------------------------------------------------------------------------------------------ Markdown

_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
# What starts a block at the beginning of a line: a heading, a quote, a list item (``-``, ``+``, ``*``,
# ``1.``, ``1)``), a thematic break, a ``~~~`` fence (backticks are escaped everywhere). The
# backslash goes before the marker (after an ordered item's digits).
_BLOCK_START = re.compile(
    r"^( {0,3}\d{0,9})(#{1,6}(?=\s|$)|>|[-+*](?=\s|$)|[-*_](?:\s*[-*_]){2,}\s*$|~~~"
    r"|(?<=\d)[.)](?=\s|$))"
)
# Anywhere in a line: ``<`` (HTML: ``</details>``, ``<img>``), ``&`` that would start an entity, the
# backslash, backticks (code), the pipe (table cells), and the brackets of a link or an image
# (``](``, ``][``, ``]:``, ``![``); other brackets render as themselves.
_MD_INLINE = {
    "\\": "\\\\",
    "`": "\\`",
    "[": "\\[",
    "]": "\\]",
    "|": "\\|",
    "<": "&lt;",
    "&": "&amp;",
}
_MD_INLINE_RE = re.compile(r"[\\`|<]|&(?=#?\w+;)|\](?=[(\[:])|(?<=!)\[")
# Text that renders as itself: it starts with a letter and holds nothing Markdown or HTML reads.
_MD_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9 _.,:;=+/()'%?!~-]*")
ZWSP = "\u200b"  # after an @, so GitHub does not notify anyone


def _unmention(text: str) -> str:
    return _MENTION.sub("@" + ZWSP, text)


def md_text(text: object) -> str:
    """Plain text as one line of Markdown prose or a table cell: rendered as the same characters,
    never as HTML, a link, an image, a mention, a heading, a quote or a list."""
    line = str(text)
    return _md_line(line) if len(line) <= 300 else _md_line.__wrapped__(line)


@lru_cache(
    maxsize=4096
)  # a 2,000-cell summary repeats its verdicts, versions and extras in every row
def _md_line(text: str) -> str:
    line = " ".join(text.split())
    if _MD_PLAIN.fullmatch(line):  # most cells: names, versions, verdicts (at C speed)
        return line
    return _md_escaped(line, line_start=True)


def _md_escaped(text: str, line_start: bool) -> str:
    """One piece of a line as literal Markdown text; ``line_start``: it begins the line, so it
    cannot start a heading, quote or list either."""
    text = terminal(text)
    text = _MD_INLINE_RE.sub(lambda m: _MD_INLINE[m.group()], text)
    if line_start:
        text = _BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
    return _unmention(text)


# A code span in the tool's own advice (``add `setuptools<82` ``): one backtick each side, not
# touching another backtick (two spans side by side would read as one span in Markdown).
_CODE_SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")


def md_prose(text: object) -> str:
    """The tool's advice as one line of Markdown: its backtick spans (``torch.load(path,
    weights_only=False)``) render as inline code, everything else as ``md_text`` renders it (a lone
    backtick stays a literal backtick). For text the tool writes with code spans (the fix advice),
    never for a table cell: a code span does not escape the pipe."""
    line = " ".join(str(text).split())
    pieces: list[str] = []
    end = 0
    for span in _CODE_SPAN.finditer(line):
        pieces.append(_md_escaped(line[end : span.start()], line_start=end == 0))
        pieces.append(md_code(span.group(1)))
        end = span.end()
    pieces.append(_md_escaped(line[end:], line_start=end == 0))
    return "".join(pieces)


def md_html(text: object) -> str:
    """Text inside raw HTML of a Markdown page (``<summary>``): one line, HTML-escaped, no mention."""
    import html  # here: its entity table is large, and most commands write no HTML

    return _unmention(html.escape(terminal(" ".join(str(text).split())), quote=True))


def _longest_run(text: str, char: str) -> int:
    runs = re.findall(re.escape(char) + "+", text)
    return max((len(run) for run in runs), default=0)


def md_code(text: object, in_table: bool = False) -> str:
    """Inline code: a backtick fence longer than any run inside; one line. In a table cell the pipe
    is still escaped (GitHub splits cells before it parses code)."""
    line = terminal(" ".join(str(text).split()))
    if not line:
        return ""
    if in_table:
        line = line.replace("|", "\\|")
    fence = "`" * (_longest_run(line, "`") + 1)
    pad = " " if line[0] == "`" or line[-1] == "`" or (line[0] == " " == line[-1]) else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def md_fence(text: object, language: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside: nothing inside
    can close it."""
    body = terminal(str(text)).rstrip()
    fence = "`" * max(3, _longest_run(body, "`") + 1)
    return f"{fence}{language}\n{body}\n{fence}"


GITHUB_TITLE_CHARS = 256  # GitHub refuses a longer issue title


def md_title(text: object, limit: int = GITHUB_TITLE_CHARS) -> str:
    """An issue title: one line, no control characters, at most ``limit`` characters. GitHub keeps it
    as given, so the nightly can find its issue again by this exact text."""
    line = " ".join(terminal(" ".join(str(text).split()), multiline=False).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


# ------------------------------------------------------------------------------------------ shell


def shell_line(args: Iterable[object]) -> str:
    """A command line to print for copy and paste: each argument quoted where the shell needs it."""
    return " ".join(shlex.quote(str(arg)) for arg in args)
