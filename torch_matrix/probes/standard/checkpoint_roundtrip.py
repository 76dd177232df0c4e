"""Save and load a checkpoint shaped like real training code's, loaded the way such code loads it."""

import argparse
import os
from dataclasses import dataclass

from torch_matrix.probes.api import Fail, probe
from torch_matrix.probes.standard._util import caught_warnings, first_line, scratch_dir


@dataclass
class RunConfig:
    """Stands in for a training run's config object pickled into its checkpoints."""

    lr: float = 0.1
    batch_size: int = 8
    arch: str = "tiny"


REPRO = """import argparse, numpy as np, torch
model = torch.nn.Linear(4, 2); opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
            "epoch": 3, "best_metric": np.float64(0.91), "config": argparse.Namespace(lr=0.1)}, "ckpt.pt")
ckpt = torch.load("ckpt.pt")  # what training code does; torch>=2.6 defaults to weights_only=True
print(ckpt["epoch"], ckpt["config"])
"""


def build(torch):
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    return model, optimizer, scheduler


def load_with_safe_globals(torch, path, needed):
    """torch.load(path) with ``needed`` allowlisted, adding what each refusal names; (result, names, api, error)."""
    import re

    serialization = torch.serialization
    if hasattr(serialization, "safe_globals"):
        api = "torch.serialization.safe_globals / add_safe_globals"
    elif hasattr(
        serialization, "add_safe_globals"
    ):  # global state: fine, the probe runs in its own child
        api = "torch.serialization.add_safe_globals"
    else:
        return None, [], "", "no safe-globals API in this version"
    needed = list(needed)
    error = ""
    for _ in range(8):
        try:
            if hasattr(serialization, "safe_globals"):
                with serialization.safe_globals(needed):
                    return torch.load(path), qualified_names(needed), api, ""
            serialization.add_safe_globals(needed)
            return torch.load(path), qualified_names(needed), api, ""
        except Exception as exc:
            error = first_line(exc)
            named = re.findall(
                r"got <class '([\w.]+)'>|Unsupported global: GLOBAL ([\w.]+)", str(exc)
            )
            extra = resolve_globals([a or b for a, b in named])
            if not extra or any(item in needed for item in extra):
                break
            needed.extend(extra)
    return None, qualified_names(needed), api, error


def advice_names(names):
    """The allowlist as advice for users: this probe's own classes (``RunConfig``) stand in for the
    user's, so they are named as "your own classes", never by the probe's module path."""
    own = RunConfig.__module__ + "."
    theirs = [name for name in names if not name.startswith(own)]
    return "%s%s" % (
        theirs,
        " + your own classes pickled in the checkpoint" if len(theirs) < len(names) else "",
    )


def qualified_names(objects):
    return sorted(
        set(
            "%s.%s" % (getattr(o, "__module__", "?"), getattr(o, "__qualname__", repr(o)))
            for o in objects
        )
    )


def unsafe_globals(torch, path):
    """The globals a weights-only load would refuse, as reported by torch itself where it can say."""
    finder = getattr(torch.serialization, "get_unsafe_globals_in_checkpoint", None)
    return finder(path) if finder else []


def resolve_globals(names):
    import importlib

    found = []
    for name in names:
        module, _, attr = name.rpartition(".")
        try:
            found.append(getattr(importlib.import_module(module), attr))
        except Exception:
            pass
    return found


def _checkpoint(torch, np, model, optimizer, scheduler):
    """What real training code saves: the three states, epoch, metric, a config object, numpy values."""
    checkpoint = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": 3,
        "best_metric": 0.91,
        "config": argparse.Namespace(lr=0.1, arch="tiny"),
        "run_config": RunConfig(),
    }
    if np is not None:
        checkpoint["best_metric"] = np.float64(0.91)
        checkpoint["val_curve"] = np.array([0.5, 0.8, 0.91])
    return checkpoint


def _default_load(torch, path, facts):
    """1. The way training code loads it: ``torch.load(path)``, default arguments. Returns what
    loaded (``None`` when refused) and records the outcome in ``facts``."""
    loaded, default_error = None, None
    with caught_warnings() as load_warnings:
        try:
            loaded = torch.load(path)
        except Exception as exc:
            default_error = first_line(exc)
            detail = [
                line.strip()
                for line in str(exc).splitlines()
                if "Unsupported global" in line
                or "but got <class" in line
                or "weights_only" in line
            ]
            if detail:
                facts["default_load_detail"] = detail[0][:300]
    facts["default_load"] = "ok" if default_error is None else default_error
    if load_warnings:
        facts["default_load_warnings"] = load_warnings[:3]
    return loaded


def _load_otherwise(torch, path, facts):
    """2. What this version requires instead of the default load: the checkpoint as loaded that
    way, and ``facts["requires"]``; ``Fail`` when nothing loads it."""
    needed_names = unsafe_globals(torch, path)
    facts["unsafe_globals"] = needed_names
    requirements = []
    loaded = None
    safe_loaded, allowlist, api, safe_error = load_with_safe_globals(
        torch, path, resolve_globals(needed_names) + [argparse.Namespace, RunConfig]
    )
    if safe_loaded is not None:
        loaded = safe_loaded
        requirements.append("%s(%s)" % (api, advice_names(allowlist)))
    elif api:
        facts["safe_globals_load"] = safe_error
    try:
        loaded_unsafe = torch.load(path, weights_only=False)
        requirements.insert(0, "weights_only=False")
        loaded = loaded if loaded is not None else loaded_unsafe
    except Exception as exc:
        facts["weights_only_false_load"] = first_line(exc)
    if loaded is None:
        raise Fail(
            "the checkpoint cannot be loaded at all",
            observed=facts,
            expected="some way to load it",
            repro=REPRO,
        )
    facts["requires"] = requirements
    return loaded


def _map_locations(ctx, torch, path, workdir, facts):
    """3. ``map_location`` the ways training code passes it: each must put the tensors on the CPU."""
    locations = {}
    for label, location in (
        ("'cpu'", "cpu"),
        ("lambda storage, loc: storage", lambda storage, loc: storage),
        ("{'cuda:0': 'cpu'}", {"cuda:0": "cpu"}),
        ("torch.device('cpu')", torch.device("cpu")),
    ):
        try:
            mapped = (
                torch.load(path, map_location=location, weights_only=False)
                if facts["default_load"] != "ok"
                else torch.load(path, map_location=location)
            )
            locations[label] = str(mapped["model"]["0.weight"].device)
        except Exception as exc:
            locations[label] = first_line(exc)
    facts["map_location"] = locations
    if any(value != "cpu" for value in locations.values()):
        raise Fail(
            "map_location did not put tensors on the CPU",
            observed=locations,
            expected="cpu for each",
            repro=REPRO,
        )
    if ctx.cuda_available():
        cuda_path = os.path.join(workdir, "cuda.pt")
        torch.save({"w": torch.ones(2, device="cuda")}, cuda_path)
        facts["cuda_saved_map_location_cpu"] = str(
            torch.load(cuda_path, map_location="cpu")["w"].device
        )


def _restore_mismatches(torch, np, loaded, model, optimizer, scheduler):
    """4. Restore into fresh objects, as resuming does, and compare: what differs."""
    fresh_model, fresh_optimizer, fresh_scheduler = build(torch)
    fresh_model.load_state_dict(loaded["model"])
    fresh_optimizer.load_state_dict(loaded["optimizer"])
    fresh_scheduler.load_state_dict(loaded["scheduler"])
    mismatches = [
        name
        for name, value in model.state_dict().items()
        if not torch.equal(value, fresh_model.state_dict()[name])
    ]
    momentum_old = [s["momentum_buffer"] for s in optimizer.state.values()]
    momentum_new = [s["momentum_buffer"] for s in fresh_optimizer.state.values()]
    if len(momentum_old) != len(momentum_new) or not all(
        torch.equal(a, b) for a, b in zip(momentum_old, momentum_new)
    ):
        mismatches.append("optimizer momentum buffers")
    if (
        fresh_scheduler.last_epoch != scheduler.last_epoch
        or fresh_scheduler.get_last_lr() != scheduler.get_last_lr()
    ):
        mismatches.append("scheduler state")
    if (
        loaded["epoch"],
        float(loaded["best_metric"]),
        loaded["config"].lr,
        loaded["run_config"],
    ) != (3, 0.91, 0.1, RunConfig()):
        mismatches.append("epoch/best_metric/config")
    if np is not None and loaded["val_curve"].tolist() != [0.5, 0.8, 0.91]:
        mismatches.append("numpy array")
    return mismatches


@probe(
    "checkpoint_roundtrip",
    doc="model+optimizer+scheduler state, epoch, best metric, config object, numpy "
    "values survive torch.save/torch.load(path); records weights_only needs",
)
def checkpoint_roundtrip(ctx):
    import torch

    try:
        import numpy as np
    except ImportError:
        np = None
    torch.manual_seed(0)
    model, optimizer, scheduler = build(torch)
    model(torch.randn(4, 4)).sum().backward()
    optimizer.step()
    scheduler.step()
    workdir = scratch_dir(ctx)
    path = os.path.join(workdir, "ckpt.pt")
    torch.save(_checkpoint(torch, np, model, optimizer, scheduler), path)
    facts = {"numpy_values": np is not None}
    loaded = _default_load(torch, path, facts)
    ctx.note("default_load", facts["default_load"])
    if facts["default_load"] != "ok":
        loaded = _load_otherwise(torch, path, facts)
    _map_locations(ctx, torch, path, workdir, facts)
    mismatches = _restore_mismatches(torch, np, loaded, model, optimizer, scheduler)
    if mismatches:
        raise Fail(
            "checkpoint did not round-trip",
            observed=mismatches,
            expected="identical state",
            repro=REPRO,
        )
    import inspect

    facts["weights_only_parameter"] = "weights_only" in inspect.signature(torch.load).parameters
    if facts.get("requires"):
        # A changed default (torch 2.6 flipped weights_only to True): the plain call that training
        # code makes breaks, and only a non-default argument loads the checkpoint. Users' code
        # breaks, so this is a finding: a fail, with the workaround as its advice.
        workaround = " or ".join(facts["requires"])
        facts["advice"] = "load with %s (torch.load's default changed)" % workaround
        raise Fail(
            "changed default: torch.load(path) refuses this checkpoint (%s); it loads with %s"
            % (facts["default_load"], workaround),
            observed=facts["default_load"],
            expected="torch.load(path) with the default arguments loads it",
            repro=REPRO,
            evidence=facts,
        )
    return facts
