"""Helpers shared by the standard probes. Stdlib only, Python 3.8+, never imports torch at module level."""

import contextlib
import multiprocessing
import os
import re
import socket
import tempfile
import traceback
import warnings

from torch_matrix.probes.api import Fail, Skip


def _import_optional(name, label):
    """Import an optional package: Skip when absent, Fail when present but broken (e.g. a mismatched build)."""
    try:
        return __import__(name)
    except ImportError as exc:
        if getattr(exc, "name", None) == name:  # the package itself, not one of its dependencies
            raise Skip("%s not installed" % label)
        raise Fail(
            "import %s failed: %s" % (name, first_line(exc)),
            observed=first_line(exc),
            expected="import %s succeeds" % name,
            repro="import torch, %s" % name,
        )
    except Exception as exc:  # torchvision against the wrong torch raises RuntimeError here
        raise Fail(
            "import %s failed: %s" % (name, first_line(exc)),
            observed=first_line(exc),
            expected="import %s succeeds" % name,
            repro="import torch, %s" % name,
        )


def require_torchvision(ctx=None):
    """The torchvision module; Skip when absent, Fail when the runner's own import of it already failed."""
    failed = (
        ctx.import_error("torchvision")
        if ctx is not None and hasattr(ctx, "import_error")
        else None
    )
    if failed:
        message = str(failed.get("error") or failed.get("message") or "import failed")
        if "No module named 'torchvision'" in message:
            raise Skip("torchvision not installed")
        raise Fail(
            "import torchvision failed: %s" % message.strip().splitlines()[0][:300],
            observed=message[:500],
            expected="import torchvision succeeds",
            repro="import torch, torchvision",
        )
    return _import_optional("torchvision", "torchvision")


def require_numpy():
    return _import_optional("numpy", "numpy")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def first_line(exc):
    """The exception as one short line: type and the first line of its message."""
    text = [line.strip() for line in _ANSI.sub("", str(exc)).strip().splitlines() if line.strip()]
    head = text[0] if text else ""
    if head.endswith(":") and len(text) > 1:  # "backend='inductor' raised:" says nothing by itself
        head = head + " " + text[1]
    return "%s: %s" % (type(exc).__name__, head[:300])


@contextlib.contextmanager
def caught_warnings():
    """Record warnings (e.g. deprecations) raised inside the block as one-line strings; filled when it exits."""
    found = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield found
    for item in caught:
        found.append(
            "%s: %s"
            % (
                item.category.__name__,
                str(item.message).strip().splitlines()[0][:200]
                if str(item.message).strip()
                else "",
            )
        )


def scratch_dir(ctx):
    """A fresh directory for the probe's files: inside the runner's workdir, never the caller's cwd."""
    base = ctx.workdir if ctx.workdir and os.path.abspath(ctx.workdir) != os.getcwd() else None
    return tempfile.mkdtemp(prefix="probe-", dir=base)


def free_port():
    """A TCP port on loopback that is free right now."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _child_main(func, args, queue):
    try:
        queue.put(("ok", func(*args)))
    except BaseException as exc:  # report everything: the parent decides
        queue.put(("error", "%s\n%s" % (first_line(exc), "".join(traceback.format_exc()[-2000:]))))


def run_in_children(func, arg_lists, timeout, start_method=None):
    """Run ``func(*args)`` in one child process per entry of ``arg_lists`` and collect the results.

    Bounded: children still alive after ``timeout`` seconds are killed and reported as
    ("timeout", ...). A child that dies without reporting gives ("died", exitcode).
    ``func`` must be a module-level function (picklable for spawn/forkserver).
    """
    method = start_method or (
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    )
    mp = multiprocessing.get_context(method)
    queues = [mp.Queue() for _ in arg_lists]
    procs = [
        mp.Process(target=_child_main, args=(func, tuple(args), q), daemon=True)
        for args, q in zip(arg_lists, queues)
    ]
    for proc in procs:
        proc.start()
    results = [None] * len(procs)
    try:
        import queue as queue_module
        import time

        deadline = time.monotonic() + timeout
        for index, (proc, queue) in enumerate(zip(procs, queues)):
            while results[index] is None:
                try:
                    results[index] = queue.get(timeout=0.2)
                except queue_module.Empty:
                    if not proc.is_alive():
                        try:  # it may have reported just before exiting
                            results[index] = queue.get(timeout=0.5)
                        except queue_module.Empty:
                            results[index] = ("died", proc.exitcode)
                    elif time.monotonic() > deadline:
                        results[index] = ("timeout", timeout)
    finally:
        for proc in procs:
            proc.join(2)
            if proc.is_alive():
                proc.kill()
                proc.join(2)
        for queue in queues:
            queue.close()
    return results


# How dynamo says it refuses this interpreter ("Dynamo is not supported on Python 3.12+",
# "Python 3.12+ not yet supported for torch.compile", "... not supported on Python 3.13").
_PYTHON_REFUSAL = re.compile(
    r"(not (yet )?supported (on|for) Python|Python 3\.\d+\+? not (yet )?supported)", re.IGNORECASE
)


def raise_if_python_refused(exc, facts=None):
    """Unsupported, with one reason shared by every probe built on dynamo (torch.compile,
    torch.export), when ``exc`` is dynamo refusing this Python by design; else return."""
    import sys

    from torch_matrix.probes.api import Unsupported

    message = first_line(exc)
    if _PYTHON_REFUSAL.search(message):
        raise Unsupported(
            "dynamo (torch.compile, torch.export) does not support Python %d.%d in this "
            "torch version: %s" % (sys.version_info[0], sys.version_info[1], message),
            evidence=facts or {},
        )
