"""`import torch` leaves CUDA alone, so CUDA_VISIBLE_DEVICES set after the import still applies.

Two parts:

1. Import-time check, on any machine (no GPU or driver needed): the CUDA query and
   init functions are wrapped while ``import torch`` runs (``torch_matrix.probes.importwatch``);
   any call is a failure, and so is NVML being loaded. The runner's zygote performs
   its own ``import torch`` under this watch, so in the normal run this probe only
   reads that observation. Run on its own in a fresh interpreter, it imports torch
   under the watch itself.
2. Behaviour, on a GPU runner: after the import, restrict CUDA_VISIBLE_DEVICES (to the
   first device, or to none where there is one) and compare ``torch.cuda.device_count()``.
   It runs in the probe's disposable process, which the import left CUDA-clean.
"""

import os
import sys

from torch_matrix.probes.api import Fail, Skip, probe

REPRO_TEMPLATE = """import sys
WATCHED = %r
seen = []
def watch(frame, event, arg):  # the call is visible even when there is no GPU or driver
    if event == "c_call":
        owner = getattr(getattr(arg, "__self__", None), "__name__", None) or getattr(arg, "__module__", "")
        name, caller = "%%s.%%s" %% (owner, getattr(arg, "__name__", "")), frame
    elif event == "call":
        name, caller = "%%s.%%s" %% (frame.f_globals.get("__name__"), frame.f_code.co_name), frame.f_back
    else:
        return
    if name in WATCHED:
        seen.append("%%s at %%s:%%d" %% (name, caller.f_code.co_filename, caller.f_lineno))
sys.setprofile(watch)
import torch
sys.setprofile(None)
print("\\n".join(seen) or "no CUDA query during import torch")
"""

BEHAVIOUR_REPRO = """import os, torch
os.environ["CUDA_VISIBLE_DEVICES"] = %r  # after the import, before any CUDA use
print(torch.cuda.device_count(), "expected", %d)
"""


def _observation(ctx):
    """The observation of `import torch`: the runner's, else our own import under the watch."""
    observed = ctx.observations.get("import_torch")
    if observed is not None:
        return observed, "runner"
    if "torch" in sys.modules:
        raise Fail(
            "torch was imported before this probe could observe the import",
            observed="torch in sys.modules",
            expected="a fresh interpreter",
            repro="python -m torch_matrix.probes --select lazy_cuda_init",
        )
    from torch_matrix.probes.facts import installed_version
    from torch_matrix.probes.importwatch import observe_import

    if installed_version("torch") is None:
        raise Skip("torch is not installed")
    observed, error = observe_import("torch")
    if error is not None:
        observed["import_error"] = "%s: %s" % (
            type(error).__name__,
            (str(error).strip().splitlines() or [""])[0],
        )
    return observed, "probe"


def _behaviour(ctx):
    """On a GPU machine: does restricting CUDA_VISIBLE_DEVICES after the import still work?"""
    from torch_matrix.probes.facts import physical_gpu_count

    physical = physical_gpu_count()
    if physical == 0:
        return {"behaviour": "skipped: %s" % "no CUDA device (no NVIDIA driver)"}
    current = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = (
        [d for d in current.split(",") if d.strip()]
        if current is not None
        else [str(i) for i in range(physical)]
    )
    if len(visible) >= 2:
        restricted, wanted = visible[0], 1
    else:
        restricted, wanted = "", 0
    import torch

    os.environ["CUDA_VISIBLE_DEVICES"] = restricted
    count = torch.cuda.device_count()
    result = {
        "behaviour": "checked",
        "physical_gpus": physical,
        "visible_before": visible,
        "restricted_to": restricted,
        "device_count_after": count,
    }
    if count != wanted:
        raise Fail(
            "CUDA_VISIBLE_DEVICES=%r set after `import torch` was ignored: device_count() is %d, expected %d"
            % (restricted, count, wanted),
            observed=count,
            expected=wanted,
            repro=BEHAVIOUR_REPRO % (restricted, wanted),
            evidence=result,
        )
    return result


@probe(
    "lazy_cuda_init",
    doc="`import torch` neither initialises nor queries CUDA; CUDA_VISIBLE_DEVICES set "
    "after it still applies",
)
def lazy_cuda_init(ctx):
    observed, source = _observation(ctx)
    evidence = {
        "observed_by": source,
        "functions_called": observed.get("functions", []),
        "call_count": observed.get("call_count", 0),
        "native_libraries_loaded": observed.get("native_libraries_loaded", []),
    }
    if observed.get("preloaded"):
        evidence["preloaded"] = observed["preloaded"]
    calls = observed.get("calls", [])
    nvml = [p for p in evidence["native_libraries_loaded"] if "libnvidia-ml" in os.path.basename(p)]
    if calls or nvml:
        names = sorted(set(c["function"] for c in calls)) or ["torch._C._cuda_getDeviceCount"]
        first = calls[0] if calls else None
        where = " (first: %s from %s)" % (first["function"], first["caller"]) if first else ""
        message = (
            "`import torch` queried CUDA: %d call(s) to %s%s"
            % (
                observed.get("call_count", len(calls)),
                ", ".join(evidence["functions_called"]),
                where,
            )
            if calls
            else "`import torch` loaded NVML: %s" % ", ".join(nvml)
        )
        evidence["calls"] = calls[:5]
        raise Fail(
            message,
            observed={"functions": evidence["functions_called"], "nvml_loaded": nvml},
            expected="no CUDA query or initialisation during import torch",
            repro=REPRO_TEMPLATE % (tuple(names),),
            evidence=evidence,
        )
    failure = ctx.import_error("torch")
    if observed.get("import_error") or failure:
        raise RuntimeError(
            "import torch failed: %s" % (observed.get("import_error") or failure.get("error"))
        )
    evidence.update(_behaviour(ctx))
    return evidence
