"""Find probes: every module of ``torch_matrix.probes.standard`` and every ``*.py`` file of a probe directory.

Importing a probe module only registers functions (``@probe``); it never imports torch.
Each ProbeSpec gets a ``source`` (``module:torch_matrix.probes.standard.x`` or ``file:/abs/path.py``)
so that a fresh interpreter can load the same probe again. A module that fails to
import becomes a ``LoadProblem``, reported as an ``error`` result instead of aborting.
"""

import hashlib
import importlib
import importlib.util
import os
import pkgutil
import sys
import traceback

from torch_matrix.probes import api

# The standard probes, in the order they run and are shown: the one list (a module per name in
# probes/standard/; docs/contracts.md and docs/probe-catalog.md list them, tests/test_docs.py holds
# them equal). A standard module missing here would follow alphabetically; a test forbids it.
STANDARD_PROBES = (
    "install_sanity",
    "lazy_cuda_init",
    "cuda_devices",
    "determinism",
    "training_step",
    "numpy_interop",
    "checkpoint_roundtrip",
    "dataloader_workers",
    "distributed_gloo",
    "mixed_precision",
    "torchscript",
    "torch_compile",
    "torch_export",
    "onnx_export",
    "torchvision_transforms",
    "torchvision_model",
    "torchvision_ops",
)


class LoadProblem(object):
    def __init__(self, name, source, message, traceback_text, refused=False):
        self.name = name
        self.source = source
        self.message = message
        self.traceback = traceback_text
        self.refused = (
            refused  # ``@probe`` refused a name (api.InvalidProbeName): an authoring mistake
        )


def _new_specs(before, source):
    specs = api.registered()[before:]
    for spec in specs:
        spec.source = source
    return specs


def _alias_old_name():
    """Probe files written for torch-matrix 0.1 say ``from probes.api import probe``: the suite's
    old top-level name. Serve it as an alias of ``torch_matrix.probes`` unless a ``probes`` of
    the environment's own is importable (that one wins, as it would have before)."""
    if "probes" in sys.modules:
        return
    try:
        if importlib.util.find_spec("probes") is not None:
            return
    except (ImportError, ValueError):
        return
    package = sys.modules[__name__.rpartition(".")[0]]
    sys.modules["probes"] = package
    sys.modules["probes.api"] = api


def _import_source(source):
    """Import a probe module named by its source string; return the module."""
    kind, _, target = source.partition(":")
    if kind == "module":
        return importlib.import_module(target)
    _alias_old_name()
    path = os.path.abspath(target)
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    module_name = "probes_custom_%s_%s" % (digest, os.path.splitext(os.path.basename(path))[0])
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def load_source(source):
    """Import one probe module; return (specs, problem or None)."""
    before = len(api.registered())
    try:
        _import_source(source)
    except BaseException as exc:
        kind, _, target = source.partition(":")
        stem = (
            target.rsplit(".", 1)[-1]
            if kind == "module"
            else os.path.splitext(os.path.basename(target))[0]
        )
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:])
        if isinstance(exc, api.InvalidProbeName):
            return _new_specs(before, source), LoadProblem(
                stem, source, "%s: %s" % (target, exc), text, True
            )
        message = "probe module %s failed to import: %s: %s" % (source, type(exc).__name__, exc)
        return _new_specs(before, source), LoadProblem(stem, source, message, text)
    return _new_specs(before, source), None


def standard_sources():
    import torch_matrix.probes.standard as standard

    names = [m.name for m in pkgutil.iter_modules(standard.__path__) if not m.name.startswith("_")]
    order = {name: index for index, name in enumerate(STANDARD_PROBES)}
    names.sort(key=lambda n: (order.get(n, len(order)), n))
    return ["module:torch_matrix.probes.standard." + name for name in names]


def directory_sources(directory):
    files = sorted(f for f in os.listdir(directory) if f.endswith(".py") and not f.startswith("_"))
    return ["file:" + os.path.abspath(os.path.join(directory, f)) for f in files]


def discover(probe_dirs=(), standard=True):
    """All probes, in run order; returns (specs, problems). Duplicate names become problems."""
    sources = standard_sources() if standard else []
    for directory in probe_dirs:
        sources.extend(directory_sources(directory))
    specs, problems, seen = [], [], {}
    for source in sources:
        found, problem = load_source(source)
        if problem is not None:
            problems.append(problem)
        for spec in found:
            if spec.name in seen:
                problems.append(
                    LoadProblem(
                        spec.name,
                        source,
                        "probe name %r is defined twice: in %s and %s"
                        % (spec.name, seen[spec.name], source),
                        "",
                    )
                )
                continue
            seen[spec.name] = source
            specs.append(spec)
    return specs, problems


def find_spec(source, name):
    """Load ``source`` (if needed) and return the probe called ``name``."""
    for spec in api.registered():
        if spec.name == name:
            return spec
    found, problem = load_source(source)
    for spec in found:
        if spec.name == name:
            return spec
    if problem is not None:
        raise RuntimeError(problem.message)
    raise LookupError("no probe %r in %s" % (name, source))
