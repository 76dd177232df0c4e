"""Text made safe to show on a terminal: the one rule, kept on the probe side because the probe
runner prints too (stdlib only, Python 3.8+); ``torch_matrix.vocab.escaping.terminal`` applies it
to everything the tool prints.

C0 controls (but newline and tab where the text is multi-line), DEL, C1 controls, lone surrogates
(unprintable, and unencodable in UTF-8), Unicode line/paragraph separators and the bidirectional
overrides (they reorder what a terminal shows) are shown as ``\\x1b`` / ``\\u202e``.
"""

import re

CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
MULTILINE = re.compile("[" + CONTROL + "]")
ONE_LINE = re.compile("[" + CONTROL + "\n\t]")


def shown(match: "re.Match[str]") -> str:
    """One control character as it is shown: ``\\x1b``, ``\\u202e``."""
    code = ord(match.group())
    return "\\x%02x" % code if code <= 0xFF else "\\u%04x" % code


def visible(text: str) -> str:
    """``text`` with every control character but newline and tab shown, not sent."""
    return text if text.isprintable() else MULTILINE.sub(shown, text)
