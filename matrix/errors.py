"""User-facing errors: one line that names the file, key or value, and exit code 2.

Raise ``UserError`` anywhere bad input is detected; the CLI and the noxfile turn it
into ``torch-matrix: error: <where>: <what>`` on stderr, with no traceback.
"""

from __future__ import annotations

EXIT_BAD_INPUT = 2


class UserError(Exception):
    """Bad input (spec, version, interpreter, results file): the user can fix it."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where
        self.message = message

    def one_line(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        return "torch-matrix: error: " + " ".join(text.split())
