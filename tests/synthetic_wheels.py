"""Tiny pure-Python stand-ins for torch / torchvision / numpy, and a local PEP 503 index.

The end-to-end test needs real resolver behaviour (exact pins between torchvision and
torch, a wheel that exists only for a Python tag we do not have) without the network or
gigabytes of wheels. Each wheel is a correct wheel (METADATA, WHEEL, RECORD with hashes)
so uv installs it like any other. The index also serves PEP 658 ``.metadata`` files so an
index reader can get ``Requires-Dist`` without downloading the wheel.

Stand-in behaviour: ``torch`` has ``__version__``, ``version.cuda`` (None: a CPU build),
``cuda.is_available()`` and a minimal ``tensor`` good enough for ``torchvision.ops.nms``.
A ``broken`` torchvision raises the same message a real mismatched pair raises.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

TORCH_INIT = '''\
"""Synthetic torch {version} (test stand-in)."""
__version__ = "{version}"
from . import version, cuda, _C
from ._tensor import Tensor, tensor, float32, int64, arange, zeros, ones, allclose, manual_seed
from .serialization import save, load
from . import utils

def is_tensor(obj):
    return isinstance(obj, Tensor)
'''

TORCH_VERSION = """\
__version__ = "{version}"
cuda = {cuda!r}
git_version = "synthetic"
hip = None
"""

TORCH_CUDA = """\
def is_available():
    return False

def device_count():
    return 0

def is_initialized():
    return False
"""

# torch._C: only what torch_matrix/probes/facts.py build_facts reads. A CPU build has no _cuda_getArchFlags.
TORCH_C_CPU = ""
TORCH_C_CUDA = """\
def _cuda_getArchFlags():
    return {arch_flags!r}
"""

TORCH_TENSOR = '''\
float32 = "float32"
int64 = "int64"


class Tensor:
    """Just enough of a tensor for the install-sanity probe: 1-D/2-D nested lists."""

    def __init__(self, data, dtype=None):
        self.data = [list(row) if isinstance(row, (list, tuple)) else row for row in data]
        self.dtype = dtype or float32

    def tolist(self):
        return [list(row) if isinstance(row, list) else row for row in self.data]

    def numel(self):
        return sum(len(row) if isinstance(row, list) else 1 for row in self.data)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        item = self.data[index]
        return Tensor(item, self.dtype) if isinstance(item, list) else item

    def __iter__(self):
        return iter(self.data)

    @property
    def shape(self):
        if self.data and isinstance(self.data[0], list):
            return (len(self.data), len(self.data[0]))
        return (len(self.data),)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def sum(self):
        return sum(sum(row) if isinstance(row, list) else row for row in self.data)

    def item(self):
        return self.data[0]

    def __eq__(self, other):
        other_data = other.data if isinstance(other, Tensor) else other
        return self.data == other_data

    # 1-D arithmetic with broadcasting of one-element tensors and numbers (examples/tinytrain).
    def _zip(self, other, op):
        left, right = self.data, other.data if isinstance(other, Tensor) else [other]
        n = max(len(left), len(right))
        return Tensor([op(left[i % len(left)], right[i % len(right)]) for i in range(n)], self.dtype)

    def __add__(self, other):
        return self._zip(other, lambda a, b: a + b)

    def __sub__(self, other):
        return self._zip(other, lambda a, b: a - b)

    def __mul__(self, other):
        return self._zip(other, lambda a, b: a * b)

    def __truediv__(self, other):
        return self._zip(other, lambda a, b: a / b)

    def __rsub__(self, other):
        return self._zip(other, lambda a, b: b - a)

    __radd__, __rmul__ = __add__, __mul__

    def mean(self):
        return Tensor([sum(self.data) / len(self.data)], self.dtype)

    def __float__(self):
        return float(self.data[0])

    def __repr__(self):
        return "tensor(%r)" % (self.data,)


def tensor(data, dtype=None, device=None):
    return Tensor(data, dtype)


def arange(n, dtype=None):
    return Tensor([float(i) for i in range(int(n))], dtype)


def zeros(n, dtype=None):
    return Tensor([0.0] * int(n), dtype)


def ones(n, dtype=None):
    return Tensor([1.0] * int(n), dtype)


def allclose(a, b, rtol=1e-5, atol=1e-8):
    return a.tolist() == b.tolist()


def manual_seed(seed):
    return None
'''

# torch.save / torch.load: pickle, and from 2.6 on (``weights_only_default``) a load that refuses
# every global but a few safe ones unless ``weights_only=False`` -- as the real 2.6 does.
TORCH_SERIALIZATION = """\
import os
import pickle

WEIGHTS_ONLY_DEFAULT = {weights_only_default!r}
_SAFE = {{("collections", "OrderedDict"), ("torch._tensor", "Tensor")}}


def add_safe_globals(classes):
    for cls in classes:
        _SAFE.add((cls.__module__, cls.__qualname__))


class UnpicklingError(pickle.UnpicklingError):
    pass


class _WeightsUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _SAFE:
            return super().find_class(module, name)
        raise UnpicklingError(
            "Weights only load failed. In PyTorch 2.6, we changed the default value of the "
            "`weights_only` argument in `torch.load` from `False` to `True`. WeightsUnpickler error: "
            "Unsupported global: GLOBAL %s.%s was not an allowed global by default." % (module, name))


def save(obj, f):
    with open(f, "wb") as handle:
        pickle.dump(obj, handle)


def load(f, map_location=None, weights_only=None):
    if weights_only is None:  # the old default back, as the real torch >= 2.6 reads it
        weights_only = WEIGHTS_ONLY_DEFAULT and os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD") != "1"
    with open(f, "rb") as handle:
        return (_WeightsUnpickler(handle) if weights_only else pickle.Unpickler(handle)).load()
"""

TORCH_UTILS_INIT = "from . import data\n"

# torch.utils.data: a Dataset base and a DataLoader whose workers are real processes.
TORCH_UTILS_DATA = """\
import multiprocessing

from .._tensor import Tensor


class Dataset:
    pass


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=False, num_workers=0):
        self.dataset, self.batch_size, self.num_workers = dataset, batch_size, num_workers

    def __iter__(self):
        indices = list(range(len(self.dataset)))
        if self.num_workers:
            with multiprocessing.get_context("fork").Pool(self.num_workers) as pool:
                items = pool.map(self.dataset.__getitem__, indices)
        else:
            items = [self.dataset[i] for i in indices]
        for start in range(0, len(items), self.batch_size):
            yield Tensor(items[start:start + self.batch_size])

    def __len__(self):
        return (len(self.dataset) + self.batch_size - 1) // self.batch_size
"""

TORCHVISION_INIT = '''\
"""Synthetic torchvision {version} (test stand-in)."""
__version__ = "{version}"
from . import ops, version
'''

TORCHVISION_VERSION = """\
__version__ = "{version}"
cuda = None
"""

TORCHVISION_OPS_GOOD = """\
import torch


def _iou(a, b):
    x1, y1 = max(a[0], b[0]), max(a[1], b[1])
    x2, y2 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / area if area else 0.0


def nms(boxes, scores, iou_threshold):
    boxes, scores = boxes.tolist(), scores.tolist()
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    keep = []
    for i in order:
        if all(_iou(boxes[i], boxes[j]) <= iou_threshold for j in keep):
            keep.append(i)
    return torch.tensor(keep, dtype=torch.int64)
"""

TORCHVISION_OPS_BROKEN = """\
def nms(boxes, scores, iou_threshold):
    raise RuntimeError("operator torchvision::nms does not exist")
"""

NUMPY_INIT = '''\
"""Synthetic numpy {version} (test stand-in)."""
__version__ = "{version}"
'''


@dataclass(frozen=True)
class WheelSpec:
    """One wheel to build. ``files`` maps archive paths to text."""

    name: str
    version: str
    files: dict[str, str | bytes]
    requires_dist: tuple[str, ...] = ()
    requires_python: str = ""
    python_tag: str = "py3"
    abi_tag: str = "none"
    platform_tag: str = "any"
    metadata_text: str = ""  # verbatim METADATA (a repackaged installed distribution)
    # Entries rewritten after RECORD was written, as a publisher's post-build edit leaves them
    # (PyPI's torch 1.x: ``+cu102`` cut from METADATA's ``Version:``); RECORD keeps the originals.
    after_record: dict[str, str | bytes] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        dist = canonicalize_name(self.name).replace("-", "_")
        return f"{dist}-{self.version}-{self.python_tag}-{self.abi_tag}-{self.platform_tag}.whl"

    @property
    def dist_info(self) -> str:
        return f"{canonicalize_name(self.name).replace('-', '_')}-{self.version}.dist-info"

    def metadata(self) -> str:
        if self.metadata_text:
            return self.metadata_text
        lines = [
            "Metadata-Version: 2.1",
            f"Name: {self.name}",
            f"Version: {self.version}",
            "Summary: synthetic test stand-in",
        ]
        if self.requires_python:
            lines.append(f"Requires-Python: {self.requires_python}")
        lines += [f"Requires-Dist: {req}" for req in self.requires_dist]
        return "\n".join(lines) + "\n"


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def build_wheel(spec: WheelSpec, dest: Path) -> Path:
    """Write ``spec`` as a wheel into ``dest`` (deterministic bytes) and return its path."""
    tag = f"{spec.python_tag}-{spec.abi_tag}-{spec.platform_tag}"
    wheel_meta = (
        f"Wheel-Version: 1.0\nGenerator: torch-matrix-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    )
    entries = dict(spec.files)
    entries[f"{spec.dist_info}/METADATA"] = spec.metadata()
    entries[f"{spec.dist_info}/WHEEL"] = wheel_meta
    record_path = f"{spec.dist_info}/RECORD"
    record_lines = []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in entries.items():
            data = text if isinstance(text, bytes) else text.encode()
            record_lines.append(f"{path},{_record_hash(data)},{len(data)}")
            edited = spec.after_record.get(path, data)
            data = edited if isinstance(edited, bytes) else edited.encode()
            archive.writestr(zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0)), data)
        record_lines.append(f"{record_path},,")
        archive.writestr(
            zipfile.ZipInfo(record_path, date_time=(2020, 1, 1, 0, 0, 0)),
            "\n".join(record_lines) + "\n",
        )
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / spec.filename
    path.write_bytes(buffer.getvalue())
    return path


def cuda_config_h(arch_flags: str) -> str:
    """``CUDAConfig.h`` as a real CUDA wheel writes it: a ``-gencode`` pair per cubin (``sm_XY``)
    and ``code=compute_XY`` for PTX."""
    flags = ";".join(
        f"-gencode;arch=compute_{entry.split('_', 1)[1]},code={entry}"
        for entry in arch_flags.split()
    )
    return f'#pragma once\n#define AT_CUDNN_ENABLED() 1\n#define NVCC_FLAGS_EXTRA "{flags}"\n'


def torch_wheel(
    version: str,
    python_tag: str = "py3",
    abi_tag: str = "none",
    cuda: str | None = None,
    requires_dist: tuple[str, ...] = (),
    weights_only_default: bool = False,
    arch_flags: str | None = None,
    build_version: str | None = None,
) -> WheelSpec:
    """``cuda`` and ``arch_flags`` (``"sm_50 ... sm_90"``) make a CUDA build's facts, as a real
    wheel answers them without a device (``torch.version.cuda``, ``torch._C._cuda_getArchFlags()``).
    ``build_version``: the ``__version__`` the build says it is where its metadata says less, as
    PyPI's CUDA wheels do (metadata ``2.4.1``, ``torch.__version__`` ``2.4.1+cu121``)."""
    fmt = {"version": build_version or version, "cuda": cuda}
    files = {
        "torch/_C.py": TORCH_C_CUDA.format(arch_flags=arch_flags) if arch_flags else TORCH_C_CPU,
        "torch/__init__.py": TORCH_INIT.format(**fmt),
        "torch/version.py": TORCH_VERSION.format(**fmt),
        "torch/cuda/__init__.py": TORCH_CUDA,
        "torch/_tensor.py": TORCH_TENSOR,
        "torch/serialization.py": TORCH_SERIALIZATION.format(
            weights_only_default=weights_only_default
        ),
        "torch/utils/__init__.py": TORCH_UTILS_INIT,
        "torch/utils/data.py": TORCH_UTILS_DATA,
    }
    if arch_flags:  # where a real CUDA wheel records its -gencode flags (judge/wheelbuild.py)
        files["torch/include/ATen/cuda/CUDAConfig.h"] = cuda_config_h(arch_flags)
    return WheelSpec(
        "torch", version, files, requires_dist=requires_dist, python_tag=python_tag, abi_tag=abi_tag
    )


def torchvision_wheel(
    version: str, torch_version: str, broken: bool = False, build_version: str | None = None
) -> WheelSpec:
    files = {
        "torchvision/__init__.py": TORCHVISION_INIT.format(version=build_version or version),
        "torchvision/version.py": TORCHVISION_VERSION.format(version=build_version or version),
        "torchvision/ops/__init__.py": TORCHVISION_OPS_BROKEN if broken else TORCHVISION_OPS_GOOD,
    }
    return WheelSpec("torchvision", version, files, requires_dist=(f"torch=={torch_version}",))


def numpy_wheel(version: str) -> WheelSpec:
    return WheelSpec("numpy", version, {"numpy/__init__.py": NUMPY_INIT.format(version=version)})


# The default synthetic world used by the end-to-end test:
#   torch 2.1.0 + torchvision 0.16.0  -> good pair
#   torch 2.2.0 + torchvision 0.17.0  -> torchvision's ops are broken (probe fails)
#   torch 2.3.0 (cp38-only wheel) + torchvision 0.18.0 -> unsatisfiable on Python 3.9+
#       (the planner sees the wheel tags: no install attempted)
#   torch 2.4.0 + torchvision 0.19.0 -> unsatisfiable by the resolver: torch 2.4.0 needs a
#       dependency the index does not have (as a real torch needs triton / nvidia-* wheels)
MISSING_DEPENDENCY = "triton==3.0.0"


def default_wheels() -> list[WheelSpec]:
    return [
        torch_wheel("2.1.0"),
        torch_wheel("2.2.0"),
        torch_wheel("2.3.0", python_tag="cp38", abi_tag="cp38"),
        torch_wheel("2.4.0", requires_dist=(MISSING_DEPENDENCY,)),
        torchvision_wheel("0.16.0", "2.1.0"),
        torchvision_wheel("0.17.0", "2.2.0", broken=True),
        torchvision_wheel("0.18.0", "2.3.0"),
        torchvision_wheel("0.19.0", "2.4.0"),
        numpy_wheel("1.26.4"),
        numpy_wheel("2.1.0"),
    ]


# The downstream world (examples/tinytrain, tests/test_example_downstream.py):
#   torch 2.3.0 -> fine, but the project's requirements.txt says torch>=2.4: unsatisfiable,
#       "your requirements exclude torch 2.3.0"
#   torch 2.4.0, 2.5.0 -> the project's tests pass
#   torch 2.6.0 -> torch.load defaults to weights_only=True: resuming a checkpoint that holds
#       an argparse.Namespace fails (tests/test_checkpoint.py::test_resume_from_checkpoint)
# plus real pytest and flit_core (the example's build backend), repackaged from this
# interpreter's own installed copies so the cells can install them offline.
DOWNSTREAM_TOOLS = ("pytest", "flit_core")


def downstream_wheels() -> list[WheelSpec]:
    return [
        torch_wheel("2.3.0"),
        torch_wheel("2.4.0"),
        torch_wheel("2.5.0"),
        torch_wheel("2.6.0", weights_only_default=True),
        *installed_wheels(DOWNSTREAM_TOOLS),
    ]


def installed_wheels(names: tuple[str, ...]) -> list[WheelSpec]:
    """Wheels of these installed distributions and everything they need here (markers evaluated
    for this interpreter). Raises ``PackageNotFoundError`` when one is not installed."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: dict[str, WheelSpec] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        dist = metadata.distribution(name)
        seen[name] = wheel_from_installed(dist)
        for text in dist.requires or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return list(seen.values())


def wheel_from_installed(dist) -> WheelSpec:
    """An installed distribution (``importlib.metadata.Distribution``) as a pure-Python wheel again:
    its files from RECORD, its own METADATA and entry points; RECORD and WHEEL written anew."""
    name, version = dist.metadata["Name"], dist.version
    spec = WheelSpec(name, version, {}, metadata_text=dist.read_text("METADATA") or "")
    generated = {entry.name for entry in dist.entry_points}  # launchers the installer writes anew
    files: dict[str, str | bytes] = {}
    for entry in dist.files or ():
        path = str(entry).replace("\\", "/")
        parts = path.split("/")
        if parts[0] == ".." and parts[-2:-1] == ["bin"] and parts[-1] not in generated:
            # a script the wheel itself carried (uv's binary): back into <name>.data/scripts
            data_dir = spec.dist_info.removesuffix(".dist-info") + ".data"
            files[f"{data_dir}/scripts/{parts[-1]}"] = Path(dist.locate_file(entry)).read_bytes()
            continue
        if parts[0] == ".." or "__pycache__" in parts or path.endswith(".pyc"):
            continue
        if parts[0].endswith(".dist-info"):
            if parts[-1] in (
                "RECORD",
                "INSTALLER",
                "REQUESTED",
                "direct_url.json",
                "METADATA",
                "WHEEL",
            ):
                continue
            path = "/".join([spec.dist_info, *parts[1:]])
        files[path] = Path(dist.locate_file(entry)).read_bytes()
    return WheelSpec(name, version, files, metadata_text=spec.metadata_text)


@dataclass
class LocalIndex:
    """A PEP 503 simple index on disk; ``url`` is its ``file://`` address."""

    root: Path
    wheels: list[Path] = field(default_factory=list)

    @property
    def simple_dir(self) -> Path:
        return self.root / "simple"

    @property
    def files_dir(self) -> Path:
        return self.root / "files"

    @property
    def url(self) -> str:
        return self.simple_dir.as_uri()


def build_index(root: Path, specs: list[WheelSpec] | None = None) -> LocalIndex:
    """Build every wheel and a PEP 503 index (with PEP 658 metadata files) under ``root``."""
    index = LocalIndex(Path(root))
    specs = default_wheels() if specs is None else specs
    by_project: dict[str, list[tuple[WheelSpec, Path]]] = {}
    for spec in specs:
        path = build_wheel(spec, index.files_dir)
        (index.files_dir / (path.name + ".metadata")).write_text(spec.metadata())
        index.wheels.append(path)
        by_project.setdefault(canonicalize_name(spec.name), []).append((spec, path))
    index.simple_dir.mkdir(parents=True, exist_ok=True)
    root_links = []
    for project, entries in sorted(by_project.items()):
        project_dir = index.simple_dir / project
        project_dir.mkdir(parents=True, exist_ok=True)
        links = []
        for spec, path in entries:
            wheel_hash = hashlib.sha256(path.read_bytes()).hexdigest()
            meta_hash = hashlib.sha256(spec.metadata().encode()).hexdigest()
            attrs = (
                f'href="../../files/{path.name}#sha256={wheel_hash}"'
                f' data-dist-info-metadata="sha256={meta_hash}"'
                f' data-core-metadata="sha256={meta_hash}"'
            )
            if spec.requires_python:
                attrs += f' data-requires-python="{html.escape(spec.requires_python)}"'
            links.append(f"    <a {attrs}>{path.name}</a><br/>")
        page = (
            '<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" '
            f'content="1.0"><title>Links for {project}</title></head><body>\n'
            f"<h1>Links for {project}</h1>\n" + "\n".join(links) + "\n</body></html>\n"
        )
        (project_dir / "index.html").write_text(page)
        root_links.append(f'    <a href="{project}/">{project}</a><br/>')
    (index.simple_dir / "index.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n" + "\n".join(root_links) + "\n</body></html>\n"
    )
    return index


if __name__ == "__main__":  # build one by hand: python tests/synthetic_wheels.py DIR
    import sys

    built = build_index(Path(sys.argv[1]))
    print(built.url)
