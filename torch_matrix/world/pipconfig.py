"""pip's configuration files, read the way pip reads them, so ``plan`` can say what they hold.

torch-matrix installs with uv, which reads neither pip's files nor its variables. It honours
pip's environment variables (``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``PIP_FIND_LINKS``)
where the spec sets no ``[index]`` key, and it does **not** honour pip's configuration files:
an extra index means something else to uv (the first index that has a package wins) than to
pip (the best version across all indexes), so adopting one silently would change which
wheels a cell gets. ``plan`` lists every index setting found in those files, each with its
file, and whether the run uses the same locations anyway.

The files, in pip's order (a later one wins; within a file ``[install]`` over ``[global]``):
``$XDG_CONFIG_DIRS/pip/pip.conf`` (default ``/etc/xdg``) and ``/etc/pip.conf``; the user's
``~/.pip/pip.conf`` and ``$XDG_CONFIG_HOME/pip/pip.conf`` (default ``~/.config``), skipped when
``$PIP_CONFIG_FILE`` names a file that exists; ``<prefix>/pip.conf`` of the interpreter
running torch-matrix; then ``$PIP_CONFIG_FILE``. ``PIP_CONFIG_FILE=/dev/null`` reads none.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

KEYS = ("index-url", "extra-index-url", "find-links")
SECTIONS = ("global", "install")


@dataclass(frozen=True)
class PipSetting:
    """One index setting of pip's files: ``extra-index-url = <value>`` from ``origin``."""

    key: str
    values: tuple[str, ...]
    origin: str  # "/root/.config/pip/pip.conf [global]"

    def to_json(self) -> dict[str, object]:
        return {"key": self.key, "values": list(self.values), "from": self.origin}


def config_files(environ: Mapping[str, str], prefix: str) -> list[Path]:
    """The files pip would read, in its order of precedence (lowest first)."""
    env_file = environ.get("PIP_CONFIG_FILE", "")
    if env_file == os.devnull:
        return []
    files = [
        Path(d) / "pip" / "pip.conf"
        for d in (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")
        if d
    ]
    files.append(Path("/etc/pip.conf"))
    if not (env_file and os.path.exists(env_file)):
        home = environ.get("HOME", "")
        if home:
            files.append(Path(home) / ".pip" / "pip.conf")
        config_home = environ.get("XDG_CONFIG_HOME") or (
            os.path.join(home, ".config") if home else ""
        )
        if config_home:
            files.append(Path(config_home) / "pip" / "pip.conf")
    files.append(Path(prefix) / "pip.conf")
    if env_file:
        files.append(Path(env_file))
    return files


def settings_from(texts: Sequence[tuple[str, str]]) -> list[PipSetting]:
    """The effective index settings of these (path, text) files, pip's precedence. Pure."""
    found: dict[str, PipSetting] = {}
    for path, text in texts:
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(text, source=path)
        except configparser.Error:
            continue  # pip refuses such a file itself; nothing of it is used
        for section in SECTIONS:
            if not parser.has_section(section):
                continue
            for name, value in parser.items(section):
                key = name.strip().lower().replace("_", "-")
                if key in KEYS:
                    found[key] = PipSetting(key, tuple(value.split()), f"{path} [{section}]")
    return [found[key] for key in KEYS if key in found]


def read_settings(environ: Mapping[str, str], prefix: str) -> list[PipSetting]:
    """The index settings in pip's configuration files on this machine (unreadable files skipped)."""
    texts = []
    for path in config_files(environ, prefix):
        try:
            texts.append((str(path), path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return settings_from(texts)
