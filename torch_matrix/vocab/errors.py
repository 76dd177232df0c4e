"""User-facing errors: what is wrong (file, key, value) and how to fix it, exit code 2.

Raise ``UserError`` anywhere bad input is detected; the CLI and the noxfile (the only
places that print it, through ``render``) turn it into uv-style lines on stderr with no
traceback::

    torch-matrix: error: <where>: <what>
      hint: <how to fix it>

``one_line`` is the first line alone (what tests and logs match on).
"""

from __future__ import annotations

from collections.abc import Iterable

EXIT_BAD_INPUT = 2
PREFIX = "torch-matrix: error: "
HINT_PREFIX = "  hint: "


class UserError(Exception):
    """Bad input (spec, version, interpreter, results file): the user can fix it."""

    def __init__(self, message: str, where: str = "", hint: str = "") -> None:
        super().__init__(message)
        self.where = where
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        return PREFIX + " ".join(text.split())

    def render(self) -> str:
        """The error line, then the hint line when there is one (no trailing newline)."""
        if not self.hint:
            return self.one_line()
        return self.one_line() + "\n" + HINT_PREFIX + " ".join(self.hint.split())


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``did you mean 'torchvision'? `` for a near miss (a typo, a case slip), else ``""``."""
    by_lower = {item.lower(): item for item in known}
    import difflib  # here: only a misspelt name needs it

    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"did you mean {by_lower[close[0]]!r}? " if close else ""
