"""Facts about the interpreter, platform, packages and GPU, for the cell result.

Everything except ``gpu_facts`` works without importing torch. ``gpu_facts`` imports
torch and may initialise CUDA, so the runner calls it in a forked child (the zygote
stays CUDA-clean) or in a throwaway subprocess.

Also a script: ``torch-matrix`` runs ``python -I torch_matrix/probes/facts.py interpreter`` to confirm
an interpreter and read a venv's base interpreter, and ``... versions torch numpy`` to
read each package's own ``__version__`` when it verifies an install; ``torch-matrix check``
runs ``python torch_matrix/probes/facts.py environment`` (not isolated: the environment as its user runs
it) for the interpreter, its prefix, the installed versions and the build torch says it is.
``... record`` is the install check (every file against its wheel's RECORD, ``installcheck.py``
beside this file); ``record DIR`` checks a ``--target`` directory instead (the prefetch, to hash
ahead what a cell will hardlink).
Every Python that runs here is a cell's, so keep it stdlib-only and Python 3.8 compatible.
"""

import ast
import importlib
import importlib.util
import json
import os
import platform
import socket
import sys

PACKAGES = ("torch", "torchvision", "numpy")


def python_facts():
    return {
        "version": platform.python_version(),
        "executable": sys.executable,
        "implementation": sys.implementation.name,
        "providers": module_providers(),
    }


def _canonical(name):
    return "".join("_" if ch in "-." else ch for ch in name.lower())


def module_providers():
    """The importable top-level names each installed distribution provides (from its RECORD), for
    the distributions whose names differ from the single module they ship: ``setuptools`` ->
    ``[_distutils_hack, pkg_resources, setuptools]``, ``pillow`` -> ``[PIL]``. A missing module is
    then mapped to a distribution, in this cell or in another (``import yaml`` needs PyYAML)."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return {}
    providers = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
            record = dist.read_text("RECORD") or ""
        except Exception:
            continue
        if not name:
            continue
        tops = set()
        for first in set(line.split(",", 1)[0].split("/", 1)[0] for line in record.splitlines()):
            if first in ("..", "__pycache__") or first.endswith(
                (".dist-info", ".egg-info", ".data", ".pth")
            ):
                continue
            if first.endswith((".py", ".so", ".pyd")):
                first = first.split(".")[0]
            if first.isidentifier():
                tops.add(first)
        if tops and tops != {_canonical(name)}:
            providers[name] = sorted(tops)
    return providers


def platform_facts():
    libc_name, libc_version = platform.libc_ver()
    return {
        "system": platform.system(),
        "machine": platform.machine(),
        "release": platform.release(),
        "libc": ("%s %s" % (libc_name, libc_version)).strip() if libc_name else "",
        "host": socket.gethostname(),
    }


def installed_version(name):
    """The installed distribution's version from its metadata, or None (never imports it)."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        return metadata.version(name)
    except Exception:
        return None


def package_facts(names=PACKAGES):
    return {name: installed_version(name) for name in names}


def driver_version():
    """The NVIDIA kernel driver version from /proc, without touching CUDA; None without a driver."""
    try:
        with open("/proc/driver/nvidia/version") as handle:
            text = handle.read()
    except OSError:
        return None
    for token in text.split():
        parts = token.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            return token
    return None


def physical_gpu_count():
    """GPUs the driver knows about (/proc/driver/nvidia/gpus), without touching CUDA."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def gpu_facts():
    """CUDA facts as torch sees them. Initialises CUDA: call it in a throwaway process."""
    facts = {"cuda_available": False, "torch_cuda": None, "devices": [], "driver": driver_version()}
    if installed_version("torch") is None:
        return facts
    try:
        import torch
    except Exception as exc:
        facts["error"] = "import torch failed: %s: %s" % (
            type(exc).__name__,
            str(exc).splitlines()[:1],
        )
        return facts
    version = getattr(torch, "version", None)
    facts["torch_cuda"] = getattr(version, "cuda", None)
    try:
        facts["build"] = build_facts()
    except Exception as exc:
        facts["build"] = {"error": "%s: %s" % (type(exc).__name__, _first_line(exc))}
    try:
        facts["cuda_available"] = bool(torch.cuda.is_available())
        if facts["cuda_available"]:
            for index in range(torch.cuda.device_count()):
                major, minor = torch.cuda.get_device_capability(index)
                facts["devices"].append(
                    {
                        "index": index,
                        "name": torch.cuda.get_device_name(index),
                        "capability": "%d.%d" % (major, minor),
                    }
                )
            arch_list = getattr(torch.cuda, "get_arch_list", None)
            if arch_list is not None:
                facts["arch_list"] = list(arch_list())
            cudnn = getattr(torch.backends, "cudnn", None)
            if cudnn is not None and cudnn.is_available():
                facts["cudnn"] = cudnn.version()
    except Exception as exc:
        facts["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[:1])
    return facts


def _torchvision_build(torch, facts):
    """torchvision's CUDA version two ways: ``torchvision.version.cuda`` and its compiled ops'
    ``torch.ops.torchvision._cuda_version()`` (an int such as 12010; -1 or 0 for a CPU build)."""
    try:
        import torchvision
    except Exception as exc:
        facts["torchvision_error"] = "%s: %s" % (type(exc).__name__, _first_line(exc))
        return
    facts["torchvision_cuda"] = getattr(getattr(torchvision, "version", None), "cuda", None)
    try:
        facts["torchvision_ops_cuda"] = int(torch.ops.torchvision._cuda_version())
    except (
        Exception
    ) as exc:  # ops not loadable: a mismatched pair ("operator torchvision::nms does not exist")
        facts["torchvision_ops_cuda"] = None
        facts["torchvision_ops_error"] = "%s: %s" % (type(exc).__name__, _first_line(exc))


def _first_line(exc):
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def build_facts():
    """What the installed torch (and torchvision) were built for, read without a device:
    ``torch._C._cuda_getArchFlags()`` (the compiled SASS ``sm_XY`` and PTX ``compute_XY``
    entries; ``torch.cuda.get_arch_list()`` says [] without a device before torch 2.13),
    ``torch.version.cuda`` / ``.hip``, torchvision's CUDA version, and torch's own table of its
    release variants' architectures (``torch.cuda.PYTORCH_RELEASES_CODE_CC``, where it has one).
    Imports torch: call it in a throwaway process. ``torch_matrix.judge.hardware`` judges targets from it.
    """
    facts = {
        "torch": installed_version("torch"),
        "torchvision": installed_version("torchvision"),
        "python": platform.python_version(),
    }
    if facts["torch"] is None:
        return facts
    try:
        import torch
    except Exception as exc:
        facts["error"] = "import torch failed: %s: %s" % (type(exc).__name__, _first_line(exc))
        return facts
    version = getattr(torch, "version", None)
    facts["torch_cuda"] = getattr(version, "cuda", None)
    facts["torch_hip"] = getattr(version, "hip", None)
    getter = getattr(torch._C, "_cuda_getArchFlags", None)
    try:
        flags = getter() if getter is not None else None
    except Exception as exc:
        flags = None
        facts["error"] = "torch._C._cuda_getArchFlags() failed: %s: %s" % (
            type(exc).__name__,
            _first_line(exc),
        )
    facts["arch_flags"] = flags
    facts["arch_list"] = flags.split() if flags else []
    try:
        facts["get_arch_list_without_device"] = list(torch.cuda.get_arch_list())
    except Exception as exc:
        facts["get_arch_list_without_device"] = "%s: %s" % (type(exc).__name__, _first_line(exc))
    table = getattr(torch.cuda, "PYTORCH_RELEASES_CODE_CC", None)
    if isinstance(
        table, dict
    ):  # {cuda: {host arch: {cc}}} in 2.13; {cuda: {cc}} earlier (any host)
        try:
            facts["release_variants_code_cc"] = dict(
                (
                    str(cuda),
                    dict((str(arch), sorted(ccs)) for arch, ccs in by.items())
                    if isinstance(by, dict)
                    else {"any": sorted(by)},
                )
                for cuda, by in table.items()
            )
        except Exception as exc:
            facts["release_variants_code_cc"] = {
                "error": "%s: %s" % (type(exc).__name__, _first_line(exc))
            }
    runtimes = {}
    for name in (
        "nvidia-cuda-runtime-cu11",
        "nvidia-cuda-runtime-cu12",
        "nvidia-cuda-runtime-cu13",
        "nvidia-cuda-runtime",
    ):
        found = installed_version(name)
        if found:
            runtimes[name] = found
    facts["cuda_runtime_packages"] = runtimes
    if facts["torchvision"]:
        _torchvision_build(torch, facts)
    return facts


def interpreter_identity():
    """Who is running: version, implementation, executable and the base interpreter of a venv."""
    return {
        "version": platform.python_version(),
        "implementation": sys.implementation.name,
        "executable": sys.executable,
        "base": getattr(sys, "_base_executable", sys.executable),
    }


def _version_literals(directory, names=("__version__",)):
    """{name: value} of the literal assignments to ``names`` in ``<package>/version.py`` (torch's
    ``__version__``, ``cuda: Optional[str] = '12.1'``, ``hip``), without importing the package."""
    path = os.path.join(directory, "version.py")
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except Exception:
        return {}
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = [getattr(t, "id", "") for t in node.targets]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [getattr(node.target, "id", "")]
        else:
            continue
        for target in targets:
            if target in names:
                try:
                    found[target] = ast.literal_eval(node.value)
                except Exception:
                    found.pop(target, None)
    return found


def _literal_version(directory):
    """``__version__`` from ``<package>/version.py`` when it is a literal (torch, torchvision): no import."""
    return _version_literals(directory).get("__version__")


def version_file(name):
    """The build an installed package says it is in its ``version.py``, read without importing it:
    ``{"version": "2.4.1+cu121", "cuda": "12.1", "hip": None}``. PyPI's CUDA wheels carry no local
    label in their metadata (``2.4.1``); the build's own ``__version__`` and ``torch.version.cuda`` do.
    None when there is no such file or no literal ``__version__`` in it."""
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    for base in (spec.submodule_search_locations or []) if spec is not None else []:
        found = _version_literals(base, ("__version__", "cuda", "hip"))
        if isinstance(found.get("__version__"), str):
            build = {"version": found["__version__"]}
            for key in ("cuda", "hip"):
                build[key] = found.get(key) if isinstance(found.get(key), str) else None
            return build
    return None


def own_versions(names):
    """{import name: {"version": ...} or {"error": ...}}: each package's own version string.

    ``version.py`` is read without importing the package when it holds a literal
    ``__version__`` (importing torch costs seconds); otherwise the package is imported.
    """
    out = {}
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except Exception as exc:
            out[name] = {"error": repr(exc)}
            continue
        if spec is None:
            out[name] = {"error": "not importable"}
            continue
        found = None
        for base in spec.submodule_search_locations or []:
            found = _literal_version(base)
            if found:
                break
        if not isinstance(found, str):
            try:
                found = str(importlib.import_module(name).__version__)
            except Exception as exc:
                out[name] = {"error": "%s: %s" % (type(exc).__name__, exc)}
                continue
        out[name] = {"version": found}
    return out


def environment_facts():
    """What ``torch-matrix check`` reads before probing an existing environment: the interpreter,
    where its environment lives, and the installed versions (from metadata: torch is not imported)."""
    facts = python_facts()
    facts.update(
        prefix=sys.prefix,
        base_prefix=getattr(sys, "base_prefix", sys.prefix),
        version_info=list(sys.version_info[:3]),
    )
    builds = {}
    for name in ("torch", "torchvision"):
        build = version_file(name) if installed_version(name) else None
        if build is not None:
            builds[name] = build
    return {
        "python": facts,
        "platform": platform_facts(),
        "packages": package_facts(),
        "builds": builds,
    }


def install_check():
    """``installcheck`` (the RECORD check), imported by its package name, or loaded from this
    file's folder by its path when this file runs as a script: ``python -I`` puts no folder on
    ``sys.path``, and we add none (the cell's packages must never see ours)."""
    if __package__:
        from torch_matrix.probes import installcheck

        return installcheck
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "installcheck.py")
    spec = importlib.util.spec_from_file_location("torch_matrix_installcheck", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv):
    if argv[:1] == ["interpreter"]:
        print(json.dumps(interpreter_identity()))
    elif argv[:1] == ["environment"]:
        print(json.dumps(environment_facts()))
    elif argv[:1] == ["versions"]:
        print(json.dumps(own_versions(argv[1:])))
    elif argv[:1] == ["build"]:
        print(json.dumps(build_facts(), sort_keys=True))
    elif argv[:1] == ["record"]:
        print(json.dumps(install_check().incomplete_installs(argv[1:] or None)))
    else:
        sys.stderr.write(
            "usage: python -I facts.py interpreter | versions NAME... | environment | build | record [DIR...]\n"
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
