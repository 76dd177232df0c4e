"""Which of the noxfile's sessions a nox command line runs, and in what order: read from the
command line itself (``-s``, ``-p``, ``-t``, ``-k`` and their variables), the way nox's manifest
filters them, so the tool keeps its own queue instead of reading nox's private one.

nox has no public view of the sessions it has queued; what it selects is a function of its
command line and the noxfile's parametrization, both ours to read. Where the command line asks
for something this reading does not follow (``--extra-python``, ``--force-python``, an
abbreviated option, a keyword expression that does not evaluate), the answer is ``None``:
"unknown", never a guess.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from torch_matrix.vocab.layout import MATRIX_SESSION

# nox's options that select sessions, by field (``nox --help``, group "sessions").
_SESSIONS = ("-s", "-e", "--session", "--sessions")
_PYTHONS = ("-p", "--python", "--pythons")
_TAGS = ("-t", "--tags")
_KEYWORDS = ("-k", "--keywords")
# Options that change the selection in a way read_selection does not follow.
_UNFOLLOWED = ("-P", "--force-python", "--force-pythons", "--extra-python", "--extra-pythons")
_LISTS = (("sessions", _SESSIONS), ("pythons", _PYTHONS), ("tags", _TAGS))
_ENV = {"sessions": "NOXSESSION", "pythons": "NOXPYTHON"}
_UNFOLLOWED_ENV = ("NOXEXTRAPYTHON", "NOXFORCEPYTHON")
# Every long option nox has that starts like one of ours: argparse takes an unambiguous prefix
# (``--sess``), and a prefix of these is not read here.
_LONG = tuple(o for o in (*_SESSIONS, *_PYTHONS, *_TAGS, *_KEYWORDS, *_UNFOLLOWED) if o[:2] == "--")


@dataclass(frozen=True)
class Selection:
    """What a nox command line selects. ``None`` for a field means "not given"."""

    sessions: tuple[str, ...] | None = None
    pythons: tuple[str, ...] = ()
    tags: tuple[str, ...] | None = None
    keywords: str = ""
    followed: bool = True  # False: it selects in a way this module does not reproduce

    def names(self, default: Sequence[str]) -> tuple[str, ...] | None:
        """The session names selected by name (nox: unless ``-t`` or ``-k`` is given, then
        every session is a candidate and ``None`` is returned); ``default`` when none is named
        (the noxfile's ``nox.options.sessions``)."""
        if self.tags is not None or self.keywords:
            return None
        return self.sessions if self.sessions is not None else tuple(default)


@dataclass(frozen=True)
class Candidate:
    """One session nox could run: ``name`` (``matrix``), ``signature`` (``matrix(<id>)``)."""

    name: str
    signature: str
    python: str
    tags: tuple[str, ...] = ()


def _options(argv: Sequence[str]) -> Iterator[tuple[str, str | None]]:
    """(option, attached value or None) and (``""``, positional) for nox's argv before ``--``."""
    for arg in argv:
        if arg == "--":
            return
        if arg.startswith("--"):
            option, equals, value = arg.partition("=")
            yield option, value if equals else None
        elif arg.startswith("-") and len(arg) > 1:
            yield arg[:2], arg[2:] or None
        else:
            yield "", arg


def read_selection(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> Selection:
    """nox's session filters as its argv (without the program name) and environment give them."""
    found: dict[str, list[str]] = {}
    keywords: str | None = None
    followed = not any(environ.get(name) for name in _UNFOLLOWED_ENV)
    collecting: list[str] | None = None  # a list option takes every token up to the next option
    wants_keywords = False  # ``-k`` takes exactly the next token
    for option, value in _options(argv):
        if option == "":
            if wants_keywords and value is not None:
                keywords, wants_keywords = value, False
            elif collecting is not None and value is not None:
                collecting.append(value)
            continue
        collecting, wants_keywords = None, False
        field = next((name for name, flags in _LISTS if option in flags), None)
        if field is not None:
            collecting = found[field] = []  # argparse: the last one given wins
            if value is not None:
                collecting.append(value)
        elif option in _KEYWORDS:
            keywords, wants_keywords = value, value is None
        elif option in _UNFOLLOWED or (
            option.startswith("--")
            and option not in _LONG
            and any(known.startswith(option) for known in _LONG)
        ):
            followed = False
    for field, variable in _ENV.items():
        if field not in found and environ.get(variable):
            found[field] = environ[variable].split(",")
    if keywords:
        try:
            ast.parse(keywords, mode="eval")
        except SyntaxError:
            followed = False  # nox refuses it and runs nothing
    sessions, tags = found.get("sessions"), found.get("tags")
    return Selection(
        sessions=tuple(s.strip() for s in sessions) if sessions is not None else None,
        pythons=tuple(found.get("pythons", ())),
        tags=tuple(tags) if tags is not None else None,
        keywords=keywords or "",
        followed=followed,
    )


def wants_matrix(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> bool:
    """False only when the command line clearly selects sessions other than the matrix.

    ``nox -s report`` (a CI merge job, say) should not need the index just to be listed.
    Anything not read for sure (``-l``, ``-k``, ``-t``, no ``-s``) plans.
    """
    names = read_selection(argv, environ).sessions
    if not names:
        return True
    return any(n.strip().startswith(MATRIX_SESSION) for name in names for n in name.split(","))


def _matches(name: str, candidate: Candidate) -> bool:
    """nox's ``_normalized_session_match``: the name, a signature, or the same Python expression."""
    if name in (candidate.name, candidate.signature):
        return True
    return _normalized(name) == _normalized(candidate.signature)


def _normalized(text: str) -> str:
    try:
        return ast.dump(ast.parse(text))
    except (SyntaxError, ValueError):
        return text


class _Keywords(Mapping[str, bool]):
    """nox's keyword locals: a name is true when it is a substring of one of the keywords."""

    def __init__(self, keywords: Sequence[str]) -> None:
        self._keywords = frozenset(keywords)

    def __getitem__(self, name: str) -> bool:
        return any(name in keyword for keyword in self._keywords)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keywords)

    def __len__(self) -> int:
        return len(self._keywords)


def selected(
    selection: Selection, candidates: Sequence[Candidate], default: Sequence[str]
) -> list[Candidate] | None:
    """The candidates nox runs, in its order (nox's ``filter_manifest``: by name, else all;
    then Python, tags, keywords); ``None`` when the selection is not followed here."""
    if not selection.followed:
        return None
    names = selection.names(default)
    if names is None:
        chosen = list(candidates)
    else:
        chosen, seen = [], set()
        for name in names:  # nox keeps the order the names were given in
            for candidate in candidates:
                if candidate.signature not in seen and _matches(name, candidate):
                    chosen.append(candidate)
                    seen.add(candidate.signature)
    if selection.pythons:
        chosen = [c for c in chosen if c.python in selection.pythons]
    if selection.tags is not None:
        chosen = [c for c in chosen if set(c.tags) & set(selection.tags)]
    if selection.keywords:
        try:
            code = compile(selection.keywords, "<-k>", "eval")
            chosen = [
                c
                for c in chosen
                if eval(code, {}, _Keywords([c.signature, *c.tags, c.name]))  # noqa: S307 - nox's rule
            ]
        except Exception:  # noqa: BLE001 - nox would stop; what it runs is unknown here
            return None
    return chosen
