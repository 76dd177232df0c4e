"""What a project's tests need to run (issue 44), for ``discover``: its test extras, a PEP 735 test
group, the requirement files a test session installs or that are named like test requirements,
the pytest plugins its options need, and the common distributions its test files import that its
metadata leaves out. Pure: functions of the files' texts.
"""

from __future__ import annotations

import re
from email.parser import Parser
from typing import Any, Iterable, Mapping, Sequence

from packaging.requirements import InvalidRequirement, Requirement

from torch_matrix.ecosystem.testconfig import PytestIni, Session, ini, toml

TEST_EXTRAS = ("test", "tests", "testing")
FALLBACK_EXTRAS = ("dev", "develop", "development")
REQUIREMENT_FILE_RE = re.compile(
    r"(?:^|/)(?:"
    r"requirements[-_.]?(?:test|tests|testing|dev)\.txt"
    r"|(?:test|tests|testing|dev)[-_.]?requirements\.txt"
    r"|requirements/(?:test|tests|testing|dev)\.txt"
    r"|(?:test|tests)/requirements\.txt"
    r")$",
    re.IGNORECASE,
)
# an option in addopts or a session's pytest call -> the plugin that defines it
PLUGIN_FLAGS = (
    ("--cov", "pytest-cov"),
    ("--no-cov", "pytest-cov"),
    ("-n", "pytest-xdist"),
    ("--numprocesses", "pytest-xdist"),
    ("--dist", "pytest-xdist"),
    ("--timeout", "pytest-timeout"),
    ("--benchmark", "pytest-benchmark"),
    ("--reruns", "pytest-rerunfailures"),
    ("--mpl", "pytest-mpl"),
    ("--randomly", "pytest-randomly"),
    ("--hypothesis", "hypothesis"),
    ("--nbval", "nbval"),
)
# ini keys that only a plugin reads
PLUGIN_INI_KEYS = (("asyncio_mode", "pytest-asyncio"), ("timeout", "pytest-timeout"))
# a requirement file's tools that lint, format, type-check, document or measure: never installed
TOOLS = frozenset(
    """black flake8 isort mypy pylint ruff pre-commit sphinx sphinx-rtd-theme
    sphinx-autodoc-typehints furo myst-parser nbsphinx coverage codecov twine build wheel
    bump2version pydocstyle autopep8 yapf""".split()
)
TORCH_FAMILY = ("torch", "torchvision")
SCANNED_FILE_RE = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test|conftest)\.py$")
# a module the tests import -> the distribution that provides it, for the common ones a project's
# metadata leaves out (its tests' own needs): added only where no requirement found names it
KNOWN_IMPORTS = {
    "numpy": "numpy",
    "scipy": "scipy",
    "pandas": "pandas",
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "matplotlib": "matplotlib",
    "hypothesis": "hypothesis",
    "torchvision": "torchvision",
    "networkx": "networkx",
    "h5py": "h5py",
    "tqdm": "tqdm",
    "einops": "einops",
    "parameterized": "parameterized",
    "pytest_mock": "pytest-mock",
    "mock": "mock",  # the backport of unittest.mock (torchbearer)
    "requests": "requests",
    "pkg_resources": "setuptools<82",  # uv venvs have none; setuptools 82 removed it
    "torchaudio": "torchaudio",  # pinned to the side's torch by the install's overrides
    "transformers": "transformers",
    "torchtestcase": "torchtestcase",  # nflows' tests: a PyPI helper its sdist does not declare
}
EGG_REQUIRES_RE = re.compile(r"^(?:src/)?[^/]+\.egg-info/requires\.txt$")
IMPORT_RE = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", re.MULTILINE)

# -- what the tests need ------------------------------------------------------------------------


def _metadata(texts: Mapping[str, str]) -> Any:
    return Parser().parsestr(texts.get("PKG-INFO", ""), headersonly=True)


def _declared_extras(texts: Mapping[str, str]) -> tuple[list[str], str]:
    """The project's extras and where they were read: PKG-INFO, pyproject, setup.cfg."""
    from_metadata = _metadata(texts).get_all("Provides-Extra") or []
    if from_metadata:
        return [str(e) for e in from_metadata], "PKG-INFO"
    egg = _egg_requires(texts)
    if len(egg) > 1:
        return [e for e in egg if e], "the sdist's egg-info/requires.txt"
    project = toml(texts.get("pyproject.toml")).get("project", {})
    optional = project.get("optional-dependencies") if isinstance(project, dict) else None
    if isinstance(optional, dict) and optional:
        return list(optional), "pyproject.toml [project.optional-dependencies]"
    parser = ini(texts.get("setup.cfg"))
    if parser is not None and parser.has_section("options.extras_require"):
        return list(dict(parser.items("options.extras_require", raw=True))), "setup.cfg"
    return [], ""


def _egg_requires(texts: Mapping[str, str]) -> dict[str, list[str]]:
    """An egg-info requires.txt (setuptools' sdists without Requires-Dist in PKG-INFO): its
    requirements by extra, "" the project's own."""
    found: dict[str, list[str]] = {}
    for path in sorted(texts):
        if not EGG_REQUIRES_RE.match(path):
            continue
        section = ""
        found[section] = []
        for line in texts[path].splitlines():
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1].split(":")[0]
                found.setdefault(section, [])
            elif line and _requirement(line):
                found[section].append(line)
        break
    return found


def dependencies(texts: Mapping[str, str], extras: Sequence[str] = ()) -> list[str]:
    """The project's own requirements (PKG-INFO's Requires-Dist, else its egg-info requires.txt,
    else pyproject's dependencies), and those of ``extras``."""
    return _base_requirements(texts) + _extra_requirements(texts, extras)


def _base_requirements(texts: Mapping[str, str]) -> list[str]:
    listed = [str(r) for r in _metadata(texts).get_all("Requires-Dist") or []]
    if listed:
        return [r for r in listed if "extra" not in r.partition(";")[2]]
    egg = _egg_requires(texts)
    if egg.get(""):
        return egg[""]
    project = toml(texts.get("pyproject.toml")).get("project", {})
    declared = project.get("dependencies") if isinstance(project, dict) else None
    return [str(r) for r in declared] if isinstance(declared, list) else []


def needs(
    texts: Mapping[str, str], session: Session | None, files: set[str], reasons: list[str]
) -> tuple[list[str], list[str]]:
    declared, where = _declared_extras(texts)
    normal = {_normal(e): e for e in declared}
    extras: list[str] = []
    requires: list[str] = []
    if session:
        for extra in session.extras:
            if _normal(extra) in normal:
                extras.append(normal[_normal(extra)])
        for dep in session.deps:
            match = re.fullmatch(r"(?:-e\s*)?\.\[([^\]]+)\]", dep.replace(" ", ""))
            if match:
                extras += [
                    normal[_normal(e)] for e in match.group(1).split(",") if _normal(e) in normal
                ]
            elif dep.startswith(("-r", "--requirement")):
                name = dep.split(None, 1)[-1].removeprefix("-r").strip().removeprefix("./")
                requires += _requirement_file(name, texts, reasons, f"installed by {session.where}")
            elif _requirement(dep):
                requires.append(dep)
        if extras or requires:
            reasons.append(f"needs: what {session.where} installs")
    if not extras:
        extras = [normal[e] for e in TEST_EXTRAS if e in normal]
        if extras:
            reasons.append(f"extras: the test extra(s) declared in {where}")
    group = _dependency_group(texts)
    if group:
        requires += group[1]
        reasons.append(f"needs: the [dependency-groups] {group[0]} of pyproject.toml")
    read = {r.split()[1] for r in reasons if r.startswith("needs: ") and r.endswith(")")}
    for path in sorted(texts):
        if REQUIREMENT_FILE_RE.search(path) and path not in read:
            requires += _requirement_file(path, texts, reasons, "named like test requirements")
    if not extras and not requires:
        extras = [normal[e] for e in FALLBACK_EXTRAS if e in normal]
        if extras:
            reasons.append(f"extras: no test extra; the dev extra declared in {where}")
    if not extras and not requires:
        reasons.append("needs: the project declares no test extra, group or requirement file")
    tools = [r for r in requires if name_of(r) in TOOLS]
    if tools:
        reasons.append(f"needs: left out, tools that test nothing: {', '.join(tools)}")
    return unique(extras), unique(r for r in requires if name_of(r) not in TOOLS)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dependency_group(texts: Mapping[str, str]) -> tuple[str, list[str]] | None:
    groups = toml(texts.get("pyproject.toml")).get("dependency-groups")
    if not isinstance(groups, dict):
        return None
    for name in (*TEST_EXTRAS, *FALLBACK_EXTRAS):
        if isinstance(groups.get(name), list):
            return name, _group(groups, name, set())
    return None


def _group(groups: dict[str, Any], name: str, seen: set[str]) -> list[str]:
    if name in seen:
        return []
    seen.add(name)
    found: list[str] = []
    for item in groups.get(name) or ():
        if isinstance(item, str) and _requirement(item):
            found.append(item)
        elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
            found += _group(groups, item["include-group"], seen)
    return found


def _requirement_file(
    path: str, texts: Mapping[str, str], reasons: list[str], why: str, depth: int = 0
) -> list[str]:
    text = texts.get(path)
    if text is None or depth > 4:
        return []
    found: list[str] = []
    folder = path.rpartition("/")[0]
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            other = line.split(None, 1)[1].strip()
            other = f"{folder}/{other}" if folder else other
            found += _requirement_file(other, texts, reasons, why, depth + 1)
        elif not line.startswith("-") and _requirement(line):
            found.append(line)
    if depth == 0:
        reasons.append(f"needs: {path} ({why})")
    return found


def _requirement(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def name_of(requirement: str) -> str:
    try:
        return _normal(Requirement(requirement).name)
    except InvalidRequirement:
        return ""


def imported(
    name: str,
    texts: Mapping[str, str],
    found: Sequence[str],
    extras: Sequence[str],
    reasons: list[str],
) -> list[str]:
    """The common distributions the test files import that no requirement found names (an
    extra's own requirements, from PKG-INFO, count as named)."""
    have = {name_of(r) for r in found}
    have |= {name_of(r) for r in _extra_requirements(texts, extras)} | {_normal(name)}
    modules: dict[str, str] = {}
    for path, text in texts.items():
        if SCANNED_FILE_RE.search(path):
            for module in IMPORT_RE.findall(text):
                modules.setdefault(module, path)
    added: list[str] = []
    for module, path in sorted(modules.items()):
        package = KNOWN_IMPORTS.get(module)
        if package and name_of(package) not in have and package not in added:
            added.append(package)
            reasons.append(f"needs: {package}, imported by {path} and required nowhere")
    return added


# what torch and pytest bring themselves: a test importing them needs no requirement of its own
BROUGHT = frozenset(
    """torch torchvision torchaudio pytest _pytest py pluggy iniconfig packaging pygments
    filelock typing_extensions sympy networkx jinja2 fsspec triton setuptools conftest""".split()
)


def unshipped(
    name: str,
    paths: Iterable[str],
    texts: Mapping[str, str],
    found: Sequence[str],
    extras: Sequence[str],
) -> list[str]:
    """What ``discover`` says of the modules the test files import that nothing provides: no
    ``M.py`` or ``M/`` anywhere in the sdist, not the standard library's, not a requirement's
    name, not one ``imported`` knows. Real sdists leave test helpers out (tntorch's ``util``,
    torch-lr-finder's ``task``, torchgeometry's ``utils``): their tests cannot collect on either
    side, whatever the run installs. Reasons only: it may also be a dependency under another
    name (``cv2``), which the projects file's ``requires`` then gives."""
    import sys

    listed = list(paths)
    # what ``import M`` reaches in a test run: the tree's top (and src/), and each test file's
    # own folder (pytest puts it on sys.path); a package's inner utils.py is not ``utils``
    places = {""} | {"src"} | {p.rpartition("/")[0] for p in listed if SCANNED_FILE_RE.search(p)}
    modules = {
        rest.split("/")[0].removesuffix(".py")
        for p in listed
        for place in places
        if (rest := p[len(place) + 1 :] if place else p)
        and (not place or p.startswith(place + "/"))
    }
    have = {name_of(r) for r in found} | {_normal(name)}
    have |= {name_of(r) for r in _extra_requirements(texts, extras)}
    importers: dict[str, str] = {}
    for path, text in sorted(texts.items()):
        if SCANNED_FILE_RE.search(path):
            for module in IMPORT_RE.findall(text):
                importers.setdefault(module, path)
    said: list[str] = []
    for module, path in sorted(importers.items()):
        if (
            module in modules
            or module in sys.stdlib_module_names
            or module in BROUGHT
            or module in KNOWN_IMPORTS
            or _normal(module) in have
        ):
            continue
        said.append(
            f"unshipped: {path} imports {module}, which the sdist does not ship and no "
            "requirement names (a test helper left out of the sdist: choose tests that do not "
            "import it; or a dependency under another name: add it to requires)"
        )
    return said


def _extra_requirements(texts: Mapping[str, str], extras: Sequence[str]) -> list[str]:
    wanted_extras = {_normal(e) for e in extras}
    found: list[str] = []
    for text in _metadata(texts).get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(str(text))
        except InvalidRequirement:
            continue
        marker = str(requirement.marker or "")
        named = {_normal(m) for m in re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)}
        if named & wanted_extras:
            found.append(requirement.name)
    for extra, items in _egg_requires(texts).items():
        if extra and _normal(extra) in wanted_extras:
            found += items
    project = toml(texts.get("pyproject.toml")).get("project", {})
    optional = project.get("optional-dependencies") if isinstance(project, dict) else None
    if isinstance(optional, dict):
        for extra, items in optional.items():
            if _normal(extra) in wanted_extras and isinstance(items, list):
                found += [str(i) for i in items if _requirement(str(i))]
    return found


def plugins(
    ini: PytestIni | None, args: Sequence[str], requires: Sequence[str], reasons: list[str]
) -> list[str]:
    """The pytest plugins the configured options need, where the needs found do not name them."""
    have = {name_of(r) for r in requires}
    found: list[str] = []
    options = [*(ini.addopts if ini else ()), *args]
    for option in options:
        for flag, plugin in PLUGIN_FLAGS:
            if (
                (
                    option == flag
                    or option.startswith(flag + "=")
                    or (flag.startswith("--") and option.startswith(flag + "-"))
                )
                and plugin not in have
                and plugin not in found
            ):
                found.append(plugin)
                reasons.append(
                    f"needs: {plugin}, for {option} in {ini.where if ini and option in ini.addopts else 'the session'}"
                )
    for key, plugin in PLUGIN_INI_KEYS:
        if ini and key in ini.keys and plugin not in have and plugin not in found:
            found.append(plugin)
            reasons.append(f"needs: {plugin}, for {key} in {ini.where}")
    for plugin in ini.required_plugins if ini else ():
        if _requirement(plugin) and name_of(plugin) not in have and plugin not in found:
            found.append(plugin)
            reasons.append(
                f"needs: {plugin}, a required_plugins entry of {ini.where if ini else ''}"
            )
    return found


def unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    found = []
    for item in items:
        if item not in seen:
            seen.add(item)
            found.append(item)
    return found
