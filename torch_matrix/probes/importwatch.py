"""Observe what ``import torch`` does to CUDA, on machines with or without a GPU.

A query made during import is visible even when it returns nothing: we wrap the
functions that query or initialise CUDA as soon as the modules defining them load
(a ``sys.meta_path`` finder wraps their loaders), record every call made while the
watch is active, and unwrap them afterwards. Native evidence (the driver or NVML
libraries newly mapped into the process, from /proc/self/maps) is recorded as well.

Stdlib only, Python 3.8+. The runner's zygote uses this around its own ``import
torch``, so observing costs nothing extra; ``lazy_cuda_init`` uses it directly when it
runs in an interpreter that has not imported torch yet.
"""

import functools
import os
import sys
import time
import traceback

# Functions that query or initialise the CUDA runtime/driver when called.
WATCHED = {
    "torch._C": (
        "_cuda_init",
        "_cuda_getDeviceCount",
        "_cuda_getDevice",
        "_cuda_setDevice",
        "_cuda_isDriverSufficient",
        "_cuda_getDriverVersion",
        "_cuda_exchangeDevice",
        "_cuda_maybeExchangeDevice",
    ),
    "torch.cuda": (
        "init",
        "_lazy_init",
        "is_available",
        "device_count",
        "_device_count_nvml",
        "_raw_device_count_nvml",
        "current_device",
        "get_device_properties",
        "get_device_capability",
        "get_device_name",
        "mem_get_info",
    ),
}
# Loading the driver API or NVML is what a device query does at the native level.
NATIVE_LIBS = ("libcuda.so", "libnvidia-ml.so")
MAX_CALLS_KEPT = 20
FRAMES_KEPT = 8


def mapped_libraries():
    """Paths of shared objects mapped into this process (empty where /proc is absent)."""
    paths = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(None, 5)
                if len(parts) == 6 and ".so" in parts[5]:
                    paths.add(parts[5].strip())
    except OSError:
        pass
    return paths


def _interesting(path):
    base = os.path.basename(path)
    return any(base.startswith(lib) for lib in NATIVE_LIBS)


class _PatchingLoader(object):
    """Delegates to the real loader, then wraps the watched functions of the new module."""

    def __init__(self, loader, name, watch):
        self._loader = loader
        self._name = name
        self._watch = watch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._watch.patch(self._name, module)

    def __getattr__(self, attr):
        return getattr(self._loader, attr)


class _Finder(object):
    def __init__(self, watch):
        self._watch = watch

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in WATCHED:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, fullname, self._watch)
        return spec


class ImportWatch(object):
    """Record CUDA queries between ``start()`` and ``stop()``; ``phase`` labels each call."""

    def __init__(self):
        self.active = False
        self.phase = ""
        self.calls = []
        self.call_count = 0
        self._patched = []  # (module, attr, original)
        self._finder = _Finder(self)
        self._maps_before = set()
        self.preloaded = []
        self.new_native = []
        self.seconds = 0.0
        self._started = 0.0

    def start(self, phase="import torch"):
        self.phase = phase
        self._maps_before = mapped_libraries()
        self.preloaded = [name for name in WATCHED if name in sys.modules]
        for name in self.preloaded:
            self.patch(name, sys.modules[name])
        sys.meta_path.insert(0, self._finder)
        self.active = True
        self._started = time.time()

    def stop(self):
        """Remove the hooks and restore the original functions; return the observation."""
        self.seconds = time.time() - self._started
        self.active = False
        try:
            sys.meta_path.remove(self._finder)
        except ValueError:
            pass
        for module, attr, original in reversed(self._patched):
            try:
                setattr(module, attr, original)
            except Exception:
                pass
        self._patched = []
        after = mapped_libraries()
        self.new_native = sorted(p for p in after - self._maps_before if _interesting(p))
        return self.result()

    def patch(self, name, module):
        for attr in WATCHED.get(name, ()):
            original = getattr(module, attr, None)
            if (
                original is None
                or not callable(original)
                or getattr(original, "_importwatch", False)
            ):
                continue
            try:
                setattr(module, attr, self._wrap(name + "." + attr, original))
            except Exception:
                continue
            self._patched.append((module, attr, original))

    def _wrap(self, qualname, original):
        watch = self

        @functools.wraps(original)
        def watched(*args, **kwargs):
            if watch.active:
                watch._record(qualname)
            return original(*args, **kwargs)

        watched._importwatch = True
        return watched

    def _record(self, qualname):
        self.call_count += 1
        if len(self.calls) >= MAX_CALLS_KEPT:
            return
        frames = [
            f
            for f in traceback.extract_stack()[:-2]
            if "importlib._bootstrap" not in f.filename and f.filename != __file__
        ]
        stack = ["%s:%d in %s" % (f.filename, f.lineno, f.name) for f in frames[-FRAMES_KEPT:]]
        self.calls.append(
            {
                "function": qualname,
                "phase": self.phase,
                "caller": stack[-1] if stack else "",
                "stack": stack,
            }
        )

    def result(self):
        return {
            "calls": list(self.calls),
            "call_count": self.call_count,
            "functions": sorted(set(c["function"] for c in self.calls)),
            "native_libraries_loaded": list(self.new_native),
            "preloaded": list(self.preloaded),
            "seconds": round(self.seconds, 4),
        }


def observe_import(module_name="torch"):
    """Import ``module_name`` under the watch. Returns (observation, exception or None)."""
    watch = ImportWatch()
    watch.start("import " + module_name)
    error = None
    try:
        __import__(module_name)
    except BaseException as exc:  # a broken install still tells us what was queried before it broke
        error = exc
    finally:
        observation = watch.stop()
    return observation, error
