"""The zygote: one interpreter pays for ``import torch, torchvision`` once, then forks a child per probe.

Server side (``python -m torch_matrix.probes.zygote``): imports torch under ``ImportWatch`` (that import
is the one ``lazy_cuda_init`` judges), then torchvision, discovers the probes, reports
``ready`` and serves requests. It never initialises CUDA or runs a torch op itself, so
forking stays safe; each probe runs in a forked child in its own process group, with
its output redirected to a file, and dies with whatever global state it poisoned.

Client side: ``torch_matrix.probes.zygoteclient.Zygote``, used by the runner (which never
imports torch): it starts this server and restarts it with fewer imports when it dies importing.

Protocol: requests are JSON lines on the server's stdin; events are JSON lines on a
dedicated pipe (``--resp-fd``), because torch may print to stdout: ``importing``,
``ready``, ``started`` (child pid), ``result``, ``facts``.
"""

import json
import os
import select
import signal
import sys
import time

from torch_matrix.probes import execute

CHILD_EXIT_GRACE_S = 30.0
_exit = os._exit


# Imported after torch, before forking: lazily imported by common training code, expensive.
PREWARM = ("torch._dynamo",)


# ----------------------------------------------------------------------------- server


def _thread_count():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def wait_child(pid, timeout):
    """Wait for ``pid`` up to ``timeout`` seconds: its wait status, or None on timeout."""
    deadline = time.monotonic() + timeout
    pidfd = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = None
    delay = 0.001
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if pidfd is not None:
                select.select([pidfd], [], [], remaining)
            else:
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, 0.05)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _enter_child(output_path, close_fds, workdir):
    """Prepare a forked child: own process group, output to a file, no core dumps."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    fd = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except Exception:
        pass
    import faulthandler

    faulthandler.enable(file=sys.stderr, all_threads=True)
    if workdir:
        os.chdir(workdir)


def fork_and_wait(request, body, close_fds=(), on_started=None, check=True):
    """Run ``body()`` in a forked child and return a ProbeResult-shaped dict.

    ``body`` writes the result file itself; a child that dies first is classified
    from its wait status, and one that runs past ``request["timeout"]`` is killed.
    ``check``: the file holds a probe's result, checked here (``execute.finish_result``).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.time()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            _enter_child(request["output_path"], close_fds, request.get("workdir"))
            body()
        except BaseException:
            code = 70
            try:
                import traceback

                traceback.print_exc()
            except BaseException:
                pass
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                _exit(
                    code
                )  # bound at import: a probe that rebinds os._exit must not outlive itself
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    if on_started is not None:
        on_started(pid)
    status = wait_child(pid, float(request["timeout"]))
    if status is None:
        execute.kill_group(pid)
        os.waitpid(pid, 0)
        how, code = "timeout", None
    else:
        execute.kill_group(pid)  # leftovers: workers the probe started and did not stop
        if os.WIFSIGNALED(status):
            how, code = "signaled", os.WTERMSIG(status)
        else:
            how, code = "exited", os.WEXITSTATUS(status)
    return execute.finish_result(request, how, code, time.time() - started, check=check)


class _Server(object):
    def __init__(self, resp_fd):
        self.resp_fd = resp_fd
        self.resp = os.fdopen(resp_fd, "w", buffering=1)
        self.specs = {}
        self.imports = {}
        self.observations = {}

    def send(self, event, **fields):
        fields["event"] = event
        self.resp.write(json.dumps(fields, default=repr) + "\n")
        self.resp.flush()

    def import_modules(self, modules):
        import importlib.util

        from torch_matrix.probes.importwatch import ImportWatch

        for name in modules:
            if name != "torch" and not self.imports.get("torch", {}).get("ok", False):
                continue  # torch itself is broken or absent: importing its add-ons says nothing new
            try:
                if importlib.util.find_spec(name) is None:
                    continue
            except Exception:
                continue
            self.send("importing", module=name)
            watch = ImportWatch()
            watch.start("import " + name)
            started = time.time()
            info = {"ok": True}
            try:
                module = __import__(name)
                info["version"] = str(getattr(module, "__version__", ""))
            except BaseException as exc:
                info = {
                    "ok": False,
                    "error": execute.one_line(exc),
                    "traceback": execute.last_frames(exc),
                }
                self._forget(name)
            finally:
                self.observations["import_" + name] = watch.stop()
            info["seconds"] = round(time.time() - started, 3)
            self.imports[name] = info

    @staticmethod
    def _forget(name):
        """Drop a failed package's half-imported modules so a probe's own import starts afresh."""
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]

    def prewarm(self, modules):
        """Import heavy lazily-imported modules once, so forked children do not each pay for them.

        torch's first optimizer step imports torch._dynamo (5-20 s here); without this every
        probe that trains would re-import it in its child. Imports only, no torch ops. If a
        prewarm import queried CUDA or started threads, fork safety is gone: the client
        then restarts the zygote without prewarming (``tainted``).
        """
        import importlib.util

        from torch_matrix.probes.importwatch import ImportWatch

        report = {"modules": [], "seconds": 0.0, "tainted": ""}
        if not self.imports.get("torch", {}).get("ok", False):
            return report
        threads_before = _thread_count()
        watch = ImportWatch()
        watch.start("prewarm")
        started = time.time()
        try:
            for name in modules:
                try:
                    if importlib.util.find_spec(name) is None:
                        continue
                    self.send("importing", module="prewarm:" + name)
                    __import__(name)
                    report["modules"].append(name)
                except BaseException as exc:
                    report.setdefault("failed", {})[name] = execute.one_line(exc)
        finally:
            observed = watch.stop()
        report["seconds"] = round(time.time() - started, 3)
        if observed["calls"]:
            report["tainted"] = "prewarm imports queried CUDA: %s" % ", ".join(
                observed["functions"]
            )
        elif _thread_count() > threads_before:
            report["tainted"] = "prewarm imports started threads (%d -> %d)" % (
                threads_before,
                _thread_count(),
            )
        return report

    def discover(self, probe_dirs, standard):
        from torch_matrix.probes import discovery

        specs, _problems = discovery.discover(probe_dirs, standard)  # the runner reports problems
        self.specs = {spec.name: spec for spec in specs}

    def serve(self, requests):
        for line in requests:
            request = json.loads(line)
            op = request.get("op")
            if op == "exit":
                return
            if op == "run":
                self.send("result", result=self.run(request))
            elif op == "facts":
                self.send("facts", facts=self.gpu_facts(request))

    def run(self, request):
        spec = self.specs.get(request["name"])
        if spec is None:
            return {
                "name": request["name"],
                "status": "error",
                "isolation": "shared",
                "duration_s": 0.0,
                "message": "the zygote does not know probe %r" % request["name"],
            }
        imports = dict(
            request.get("imports") or {}
        )  # the client's: includes imports that killed a zygote
        imports.update(self.imports)
        request = dict(request, imports=imports, observations=self.observations)

        def body():
            ctx = execute.make_context(request)
            execute.write_json_atomic(request["result_path"], execute.run_probe(spec, ctx))

        return fork_and_wait(
            request,
            body,
            close_fds=(self.resp_fd,),
            on_started=lambda pid: self.send("started", pid=pid),
        )

    def gpu_facts(self, request):
        from torch_matrix.probes import facts

        def body():
            execute.write_json_atomic(request["result_path"], {"facts": facts.gpu_facts()})

        outcome = fork_and_wait(
            dict(request, name="gpu_facts"), body, close_fds=(self.resp_fd,), check=False
        )
        if outcome.get("facts") is not None:
            return outcome["facts"]
        return {
            "cuda_available": False,
            "torch_cuda": None,
            "devices": [],
            "driver": facts.driver_version(),
            "error": outcome.get("message", "gathering GPU facts failed"),
        }


def server_main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(prog="python -m torch_matrix.probes.zygote")
    parser.add_argument("--resp-fd", type=int, required=True)
    parser.add_argument("--imports", default="torch,torchvision")
    parser.add_argument("--probe-dir", action="append", default=[])
    parser.add_argument("--no-standard", action="store_true")
    parser.add_argument("--prewarm", default="")
    args = parser.parse_args(argv)
    server = _Server(args.resp_fd)
    server.import_modules([m for m in args.imports.split(",") if m])
    prewarm = server.prewarm([m for m in args.prewarm.split(",") if m])
    server.discover(args.probe_dir, not args.no_standard)
    server.send(
        "ready",
        imports=server.imports,
        observations=server.observations,
        prewarm=prewarm,
        pid=os.getpid(),
    )
    server.serve(sys.stdin)
    # Nothing to clean up, and tearing down an interpreter holding torch takes seconds.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(server_main())
