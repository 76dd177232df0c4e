"""The spec's small typed readers (pure): one TOML value checked and read, or one ``UserError``.

``TableReader`` reads a string, a list of strings, a boolean, a table, a version, a specifier, an
extras pin, a path (``~`` and relative to the spec's directory), an index URL; each error names
the file, the dotted key and the bad value (``show_value``), with the hint that says where the key
is documented (``spec_hint``). ``spec.parse`` reads the spec's sections with it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from torch_matrix.vocab.errors import UserError, did_you_mean

CHECK_HINT = "`torch-matrix plan` checks a spec without installing anything"


def spec_hint(key: str) -> str:
    """The fix for a bad spec value: where its key is documented, and how to check again."""
    section = key.split(".")[0].split("[")[0] if key else ""
    where = (
        f"`{section}` is described in `torch-matrix help spec {section}`"
        if section
        else "the format is in `torch-matrix help spec`"
    )
    return f"{where}; {CHECK_HINT}"


def unknown_key_hint(name: str, allowed: Iterable[str], key: str) -> str:
    """The nearest known key, and the reference section that lists the keys of ``key``'s table."""
    section = key.split(".")[0].split("[")[0] or "keys"
    return f"{did_you_mean(name, allowed)}the keys are in `torch-matrix help spec {section}`; {CHECK_HINT}"


class TableReader:
    """Reads one spec file's values: each reader checks the type and the form, or raises."""

    def __init__(self, where: str, environ: Mapping[str, str], base_dir: str) -> None:
        self.where = where  # the file, as errors name it
        self.environ = environ  # HOME for `~` in paths
        self.base_dir = base_dir  # relative paths are relative to it

    def error(self, key: str, message: str, hint: str = "") -> UserError:
        return UserError(
            message,
            where=f"{self.where}: {key}" if key else self.where,
            hint=hint or spec_hint(key),
        )

    def check_keys(self, table: Mapping[str, Any], allowed: tuple[str, ...], key: str) -> None:
        for name in table:
            if name not in allowed:
                dotted = f"{key}.{name}" if key else name
                raise self.error(
                    dotted,
                    f"unknown key {name!r} (expected one of: {', '.join(allowed)})",
                    hint=unknown_key_hint(name, allowed, key),
                )

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {show_value(value)}")
        return value

    def string_list(self, value: Any, key: str, *, allow_empty: bool = False) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise self.error(key, f"expected a list of strings, got {show_value(value)}")
        items = tuple(self.string(item, f"{key}[{i}]") for i, item in enumerate(value))
        if not items and not allow_empty:
            raise self.error(key, "must not be empty")
        seen: set[str] = set()
        for i, item in enumerate(items):
            if item in seen:
                raise self.error(f"{key}[{i}]", f"duplicate value {item!r}")
            seen.add(item)
        return items

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {show_value(value)}")
        return value

    def table(self, value: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table, got {show_value(value)}")
        return value

    def version(self, value: Any, key: str) -> str:
        text = self.string(value, key).strip()
        try:
            parsed = Version(text)
        except InvalidVersion:
            raise self.error(key, f"invalid version {text!r}") from None
        if parsed.local:
            raise self.error(
                key,
                f"{text!r}: local labels (+cu124) are chosen by `variant`, give the public version",
            )
        return str(parsed)

    def specifier(self, value: Any, key: str) -> str:
        text = self.string(value, key).strip()
        try:
            return str(SpecifierSet(text))
        except InvalidSpecifier:
            raise self.error(key, f"invalid version specifier {text!r}") from None

    def pin(self, value: Any, key: str) -> str:
        """An extras value: a specifier (``<2``), or a bare version meaning ``==``."""
        text = self.string(value, key).strip()
        if text and text[0].isdigit():
            self.version(text, key)
            text = "==" + text
        if not text:
            raise self.error(key, "empty value (use a specifier such as '<2' or a version)")
        return self.specifier(text, key)

    def path(self, value: Any, key: str) -> str:
        text = self.string(value, key)
        if "://" in text:
            return text
        if text == "~" or text.startswith("~/"):
            home = self.environ.get("HOME", "")
            if not home:
                raise UserError(
                    f"cannot expand {text!r}: HOME is not set",
                    where=f"{self.where}: {key}",
                    hint="write the absolute path, or set HOME",
                )
            text = home + text[1:]
        return os.path.normpath(os.path.join(self.base_dir, text))

    def url(self, value: Any, key: str, *, allow_empty: bool = False) -> str:
        text = self.string(value, key).strip()
        if not text and allow_empty:
            return ""
        if not re.match(r"^(https?|file)://\S+$", text):
            raise self.error(key, f"invalid index URL {text!r} (expected http(s):// or file://)")
        return text


def show_value(value: Any) -> str:
    kind = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} {text}"
