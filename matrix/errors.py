"""User-facing errors: one line that names the file, key or value, and exit code 2.

Raise ``UserError`` anywhere bad input is detected; the CLI and the noxfile turn it
into ``torch-matrix: error: <where>: <what>`` on stderr, with no traceback, followed
(uv style) by ``  hint: <how to fix it>`` when the error knows the fix.
"""

from __future__ import annotations

EXIT_BAD_INPUT = 2


class UserError(Exception):
    """Bad input (spec, version, interpreter, results file): the user can fix it."""

    def __init__(self, message: str, where: str = "", hint: str = "") -> None:
        super().__init__(message)
        self.where = where
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        line = "torch-matrix: error: " + " ".join(text.split())
        if self.hint:
            line += "\n  hint: " + " ".join(self.hint.split())
        return line
