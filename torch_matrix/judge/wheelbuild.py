"""A build's hardware facts from the text of its wheel's own files, before it is installed.

Pure: functions of the members' text (``torch_matrix.world.wheelfacts`` reads them by range
requests). They give the same record ``torch_matrix/probes/facts.py build_facts`` gives from an
installed build, so ``torch_matrix.judge.hardware`` judges both alike:

- ``torch/version.py``: ``__version__`` (``2.8.0+cu128``), ``cuda`` (``'12.8'`` or None), ``hip``;
- ``torch/include/ATen/cuda/CUDAConfig.h``: ``NVCC_FLAGS_EXTRA``, the ``-gencode`` flags the build
  was compiled with (``arch=compute_90,code=sm_90`` is an ``sm_90`` cubin, ``code=compute_90`` PTX),
  which is what ``torch._C._cuda_getArchFlags()`` reports at run time;
- ``torchvision/version.py``: torchvision's ``cuda``, the runtime its compiled ops were built for.

A CUDA build whose header records no ``-gencode`` flags (older releases wrote none there) has no
arch list from its wheel: the record says why in ``error`` and nothing is judged from it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

TORCH_VERSION_FILE = "torch/version.py"
CUDA_CONFIG_FILE = "torch/include/ATen/cuda/CUDAConfig.h"
TORCHVISION_VERSION_FILE = "torchvision/version.py"
SOURCE = "wheel"  # build_facts["source"]: read from the wheel's files, not the installed build

_NVCC_FLAGS = re.compile(r'#define\s+NVCC_FLAGS_EXTRA\s+"([^"]*)"')
_GENCODE = re.compile(r"arch=(compute_\w+),code=(\[[^\]]*\]|[\w]+)")


def version_literals(text: str) -> dict[str, Any]:
    """The top-level literal assignments of a ``version.py`` (``__version__``, ``cuda``, ``hip``),
    read without running it; annotated ones (``cuda: Optional[str] = '12.8'``) too."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                found[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return found


def arch_flags(header: str) -> str | None:
    """``CUDAConfig.h``'s ``-gencode`` flags as ``_cuda_getArchFlags()`` spells them
    (``"sm_70 sm_75 ... compute_90"``: each cubin, then a PTX entry for each ``code=compute_XY``);
    None when the header records no ``-gencode`` flag."""
    found = _NVCC_FLAGS.search(header)
    if found is None:
        return None
    entries: list[str] = []
    for _arch, code in _GENCODE.findall(found.group(1)):
        for item in code.strip("[]").split(","):
            item = item.strip()
            if re.fullmatch(r"(sm|compute)_\d{2,3}[af]?", item) and item not in entries:
                entries.append(item)
    if not entries:
        return None
    cubins = [e for e in entries if e.startswith("sm_")]
    return " ".join(cubins + [e for e in entries if e.startswith("compute_")])


def torch_build_facts(
    version_py: str | None, cuda_config_h: str | None, filename: str = ""
) -> dict[str, Any]:
    """``build_facts`` (the shape ``probes/facts.py`` writes) from a torch wheel's two files."""
    where = f" in {filename}" if filename else ""
    if version_py is None:
        return {"source": SOURCE, "error": f"no {TORCH_VERSION_FILE}{where}"}
    literals = version_literals(version_py)
    version = literals.get("__version__")
    if not isinstance(version, str) or not version:
        return {"source": SOURCE, "error": f"{TORCH_VERSION_FILE}{where} names no __version__"}
    cuda, hip = literals.get("cuda"), literals.get("hip")
    facts: dict[str, Any] = {
        "source": SOURCE,
        "torch": version,
        "torch_cuda": cuda if isinstance(cuda, str) else None,
        "torch_hip": hip if isinstance(hip, str) else None,
    }
    if not facts["torch_cuda"]:
        return facts  # a CPU (or ROCm) build: no arch list to read
    flags = arch_flags(cuda_config_h) if cuda_config_h is not None else None
    if flags is None:
        missing = (
            f"no {CUDA_CONFIG_FILE}{where}"
            if cuda_config_h is None
            else f"{CUDA_CONFIG_FILE}{where} records no -gencode flags (NVCC_FLAGS_EXTRA)"
        )
        return {**facts, "error": f"the arch list is not in the wheel: {missing}"}
    return {**facts, "arch_flags": flags, "arch_list": flags.split()}


def with_torchvision(facts: Mapping[str, Any], version_py: str | None) -> dict[str, Any]:
    """``facts`` with torchvision's version and the CUDA runtime of its ops, from its version.py."""
    if version_py is None:
        return dict(facts)
    literals = version_literals(version_py)
    cuda = literals.get("cuda")
    version = literals.get("__version__")
    return {
        **facts,
        "torchvision": version if isinstance(version, str) else "",
        "torchvision_cuda": cuda if isinstance(cuda, str) else None,
    }
