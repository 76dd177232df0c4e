"""Fetch one corpus project's sdist from PyPI and lay its spec beside it.

    python examples/corpus/fetch.py lampe DEST

reads the version from ``examples/corpus/<name>/matrix.toml`` (its first line names it),
downloads that release's sdist through PyPI's JSON API (the project's page), checks its sha256, unpacks it into
``DEST/<name>-<version>/`` and copies the spec there as ``matrix.toml``. It prints the project's
directory: ``cd`` there and run ``torch-matrix run``. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
INDEX = "https://pypi.org/pypi"


def spec_version(name: str) -> str:
    """The release a corpus spec was run on: its first line, ``# <name> <version>, ...``."""
    first = (HERE / name / "matrix.toml").read_text("utf-8").splitlines()[0]
    found = re.match(rf"# {re.escape(name)} (\S+?),", first)
    if not found:
        raise SystemExit(f"{name}/matrix.toml: the first line does not name the release")
    return found.group(1)


def fetch(name: str, dest: Path) -> Path:
    version = spec_version(name)
    url = f"{INDEX}/{name}/json"
    with urllib.request.urlopen(url, timeout=60) as answer:
        files = json.load(answer)["releases"].get(version, [])
    sdists = [f for f in files if f["packagetype"] == "sdist"]
    if not sdists:
        raise SystemExit(f"{name} {version}: PyPI has no sdist")
    sdist = sdists[0]
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / sdist["filename"]
        with urllib.request.urlopen(urllib.parse.urljoin(url, sdist["url"]), timeout=300) as src:
            archive.write_bytes(src.read())
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != sdist["digests"]["sha256"]:
            raise SystemExit(f"{sdist['filename']}: sha256 {digest} is not PyPI's")
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            top = {Path(m.name).parts[0] for m in tar.getmembers()}
            if len(top) != 1:
                raise SystemExit(f"{sdist['filename']}: not one top-level directory: {top}")
            tar.extractall(dest, filter="data")
    project = dest / top.pop()
    shutil.copyfile(HERE / name / "matrix.toml", project / "matrix.toml")
    return project


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print(fetch(argv[0], Path(argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
