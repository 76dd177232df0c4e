"""The cell has what it asked for: versions, CUDA build, and torchvision's compiled ops."""

import re

from torch_matrix.probes.api import Fail, probe

REPRO = """import torch, torchvision
print(torch.__version__, torch.version.cuda, torchvision.__version__)
boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 11., 11.], [50., 50., 60., 60.]])
print(torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5))  # tensor([0, 2])
"""


def _split(version):
    """(release tuple without trailing zeros, normalised suffix, local label) of a version string."""
    text = str(version).strip().lower()
    if text.startswith("v"):
        text = text[1:]
    public, _, local = text.partition("+")
    match = re.match(r"^(\d+(?:\.\d+)*)(.*)$", public)
    if not match:
        return None
    release = [int(part) for part in match.group(1).split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    suffix = re.sub(r"[-_.]", "", match.group(2))
    return tuple(release), suffix, re.sub(r"[-_]", ".", local)


def versions_match(installed, expected):
    """True when ``installed`` is the version asked for.

    The public versions must be equal (``2.5`` == ``2.5.0``); a local label (``+cpu``,
    ``+cu121``) on the installed side is ignored unless the expected version names one.
    """
    have, want = _split(installed), _split(expected)
    if have is None or want is None:
        return str(installed).strip() == str(expected).strip()
    if have[:2] != want[:2]:
        return False
    return not want[2] or have[2] == want[2]


def expected_cuda(variant):
    """The ``torch.version.cuda`` a variant implies: cu124 -> "12.4", cu92 -> "9.2", cpu -> None.

    Returns (known, value); unknown variants (default, rocm..., xpu) give (False, None).
    """
    if variant == "cpu":
        return True, None
    match = re.match(r"^cu(\d)(\d+)$", variant or "")
    if match and len(variant) == 4:  # cu92
        return True, "%s.%s" % (match.group(1), match.group(2))
    match = re.match(r"^cu(\d+)(\d)$", variant or "")
    if match:
        return True, "%s.%s" % (match.group(1), match.group(2))
    return False, None


def _installed_version(name):
    from torch_matrix.probes.facts import installed_version

    return installed_version(name)


def _nms_check(torch, torchvision):
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [50.0, 50.0, 60.0, 60.0]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    keep = torchvision.ops.nms(boxes, scores, 0.5)
    return [int(i) for i in keep.tolist()]


def _import_torch(ctx):
    """``torch``, imported; ``Fail`` when it is not installed or its import failed."""
    import_failure = ctx.import_error("torch")
    if import_failure is None and _installed_version("torch") is None:
        expected_torch = ctx.expected.get("torch")
        raise Fail(
            "torch is not installed%s"
            % (" (expected %s)" % expected_torch if expected_torch else ""),
            observed=None,
            expected=expected_torch,
            repro="import torch",
        )
    if import_failure is not None:
        raise Fail(
            "import torch failed: %s" % import_failure.get("error"),
            observed=import_failure.get("error"),
            expected="import torch succeeds",
            repro="import torch",
            traceback=import_failure.get("traceback", ""),
        )
    import torch

    return torch


def _import_torchvision(ctx, modules, evidence):
    """Import torchvision where it is installed (into ``modules``): (its error, its traceback)."""
    tv_failure = ctx.import_error("torchvision")
    if tv_failure is not None:
        return tv_failure.get("error", ""), tv_failure.get("traceback", "")
    if _installed_version("torchvision") is None:
        return None, ""
    try:
        import torchvision
    except Exception as exc:
        error = "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0])
        return error, _frames(exc)
    modules["torchvision"] = torchvision
    evidence["torchvision"] = str(torchvision.__version__)
    return None, ""


def _version_problems(ctx, modules, evidence):
    """1. The installed versions against the ones asked for."""
    problems = []
    for name, wanted in sorted(ctx.expected.items()):
        module = modules.get(name)
        found = (
            str(getattr(module, "__version__", ""))
            if module is not None
            else _installed_version(name)
        )
        evidence.setdefault("versions", {})[name] = found
        if found is None:
            problems.append(
                (name, "%s is not installed (expected %s)" % (name, wanted), None, wanted)
            )
        elif not versions_match(found, wanted):
            problems.append((name, "%s is %s, expected %s" % (name, found, wanted), found, wanted))
    return problems


def _build_problems(ctx, cuda_build, evidence):
    """2. The CUDA (or ROCm) build against the variant."""
    known, wanted_cuda = expected_cuda(ctx.variant)
    if known:
        evidence["expected_cuda"] = wanted_cuda
        if wanted_cuda is None and cuda_build is not None:
            return [
                (
                    "cuda_build",
                    "variant cpu but torch is a CUDA %s build" % cuda_build,
                    cuda_build,
                    None,
                )
            ]
        if wanted_cuda is not None and (
            cuda_build is None or _cuda_major_minor(cuda_build) != wanted_cuda
        ):
            return [
                (
                    "cuda_build",
                    "variant %s expects CUDA %s, torch.version.cuda is %s"
                    % (ctx.variant, wanted_cuda, cuda_build),
                    cuda_build,
                    wanted_cuda,
                )
            ]
    elif ctx.variant.startswith("rocm"):
        hip = evidence["torch_hip"]
        if not hip or not str(hip).startswith(ctx.variant[4:]):
            return [
                (
                    "cuda_build",
                    "variant %s but torch.version.hip is %s" % (ctx.variant, hip),
                    hip,
                    ctx.variant[4:],
                )
            ]
    return []


def _ops_problems(torch, modules, torchvision_error, evidence):
    """3. torchvision's compiled ops: (problems, the traceback of an ops call that raised)."""
    if torchvision_error is not None:
        problem = (
            "torchvision_ops",
            "import torchvision failed: %s" % torchvision_error,
            torchvision_error,
            "import torchvision succeeds",
        )
        return [problem], None
    if "torchvision" not in modules:
        evidence["torchvision"] = None
        return [], None
    try:
        keep = _nms_check(torch, modules["torchvision"])
    except Exception as exc:
        message = (str(exc).strip().splitlines() or [""])[0]
        problem = (
            "torchvision_ops",
            "torchvision.ops.nms failed: %s: %s" % (type(exc).__name__, message),
            "%s: %s" % (type(exc).__name__, message),
            [0, 2],
        )
        return [problem], _frames(exc)
    evidence["nms_keep"] = keep
    if keep != [0, 2]:
        problem = (
            "torchvision_ops",
            "torchvision.ops.nms returned %s, expected [0, 2]" % keep,
            keep,
            [0, 2],
        )
        return [problem], None
    return [], None


@probe(
    "install_sanity",
    doc="installed versions are the ones asked for, the CUDA build matches the variant, "
    "torchvision's compiled ops (nms) load and run",
)
def install_sanity(ctx):
    evidence = {"variant": ctx.variant}
    torch = _import_torch(ctx)
    cuda_build = getattr(torch.version, "cuda", None)
    evidence.update(
        torch=str(torch.__version__),
        torch_cuda=cuda_build,
        torch_hip=getattr(torch.version, "hip", None),
        torch_file=getattr(torch, "__file__", None),
    )
    ctx.note("torch", evidence["torch"])
    modules = {"torch": torch}
    torchvision_error, cause_traceback = _import_torchvision(ctx, modules, evidence)
    problems = _version_problems(ctx, modules, evidence)  # (check, message, observed, expected)
    problems += _build_problems(ctx, cuda_build, evidence)
    ops_problems, ops_traceback = _ops_problems(torch, modules, torchvision_error, evidence)
    problems += ops_problems
    if ops_traceback is not None:
        cause_traceback = ops_traceback
    if problems:
        raise Fail(
            "; ".join(p[1] for p in problems),
            observed={p[0]: p[2] for p in problems},
            expected={p[0]: p[3] for p in problems},
            repro=REPRO,
            evidence=evidence,
            traceback=cause_traceback,
        )
    return evidence


def _frames(exc):
    from torch_matrix.probes.execute import last_frames

    return last_frames(exc)


def _cuda_major_minor(version):
    parts = str(version).split(".")
    return ".".join(parts[:2])
