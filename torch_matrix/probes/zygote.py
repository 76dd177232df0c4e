"""The zygote: one interpreter pays for ``import torch, torchvision`` once, then forks a child per probe.

Server side (``python -m torch_matrix.probes.zygote``): imports torch under ``ImportWatch`` (that import
is the one ``lazy_cuda_init`` judges), then torchvision, discovers the probes, reports
``ready`` and serves requests. It never initialises CUDA or runs a torch op itself, so
forking stays safe; each probe runs in a forked child in its own process group, with
its output redirected to a file, and dies with whatever global state it poisoned.

Client side (``Zygote``, used by the runner, which never imports torch): starts the
server, notices when it dies while importing (a segfaulting or raising torchvision),
records that as the import's failure and restarts it with fewer imports, so that every
probe still gets a result.

Protocol: requests are JSON lines on the server's stdin; events are JSON lines on a
dedicated pipe (``--resp-fd``), because torch may print to stdout: ``importing``,
``ready``, ``started`` (child pid), ``result``, ``facts``.
"""

import json
import os
import select
import signal
import subprocess
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


def kill_group(pid):
    """Kill the probe's process group (the probe and any workers it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


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
        kill_group(pid)
        os.waitpid(pid, 0)
        how, code = "timeout", None
    else:
        kill_group(pid)  # leftovers: workers the probe started and did not stop
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


# ----------------------------------------------------------------------------- client


class ZygoteDied(Exception):
    pass


class Zygote(object):
    """The runner's handle on a zygote server; restarts it with fewer imports when an import kills it."""

    MAX_STARTS = 4

    def __init__(
        self,
        modules,
        probe_dirs,
        standard,
        tmpdir,
        env,
        import_timeout=600.0,
        log=None,
        prewarm=PREWARM,
    ):
        self.modules = list(modules)
        self.prewarm_modules = list(prewarm)
        self.prewarm = {}
        self.probe_dirs = list(probe_dirs)
        self.standard = standard
        self.tmpdir = tmpdir
        self.env = env
        self.import_timeout = import_timeout
        self.log = log or (lambda text: None)
        self.proc = None
        self.reader = None
        self.buffer = b""
        self.imports = {}  # final import outcomes, including imports that killed a zygote
        self.observations = {}
        self.starts = 0
        self.ready_seconds = 0.0
        self.child_pid = None
        self.log_path = ""

    # process management
    def _spawn(self):
        self.starts += 1
        read_fd, write_fd = os.pipe()
        self.log_path = os.path.join(self.tmpdir, "zygote-%d.log" % self.starts)
        log = open(self.log_path, "wb")
        command = [
            sys.executable,
            "-m",
            "torch_matrix.probes.zygote",
            "--resp-fd",
            str(write_fd),
            "--imports",
            ",".join(self.modules),
            "--prewarm",
            ",".join(self.prewarm_modules),
        ]
        for directory in self.probe_dirs:
            command += ["--probe-dir", directory]
        if not self.standard:
            command.append("--no-standard")
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                env=self.env,
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
            log.close()
        self.reader = read_fd
        self.buffer = b""

    def _next_event(self, deadline):
        """The next event, or raise ZygoteDied (EOF) / TimeoutError (deadline)."""
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError()
            ready, _, _ = select.select([self.reader], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.reader, 65536)
            if not chunk:
                raise ZygoteDied()
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line.decode("utf-8", "replace"))

    def _death(self):
        """Reap a dead (or killed) zygote; describe how it ended."""
        if self.child_pid:
            kill_group(self.child_pid)
            self.child_pid = None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        code = self.proc.wait()
        for stream in (self.proc.stdin,):
            try:
                stream.close()
            except Exception:
                pass
        try:
            os.close(self.reader)
        except OSError:
            pass
        self.proc = None
        if code < 0:
            return execute.signal_name(-code)
        return "exit code %d" % code

    @property
    def alive(self):
        return self.proc is not None

    def start(self):
        """Start a zygote and wait until it is ready; an import that kills it is recorded and left out."""
        started = time.time()
        while True:
            if self.starts >= self.MAX_STARTS:
                return False
            self._spawn()
            current = None
            deadline = time.monotonic() + self.import_timeout
            try:
                while True:
                    event = self._next_event(deadline)
                    if event["event"] == "importing":
                        current = event["module"]
                        self.log(
                            current.replace("prewarm:", "prewarming ")
                            if current.startswith("prewarm:")
                            else "importing %s" % current
                        )
                    elif event["event"] == "ready":
                        self.prewarm = event.get("prewarm") or {}
                        if self.prewarm.get("tainted"):
                            self.log(
                                "restarting the zygote without prewarm: %s"
                                % self.prewarm["tainted"]
                            )
                            self._send({"op": "exit"})
                            self._death()
                            self.prewarm_modules = []
                            break
                        self.imports.update(event["imports"])
                        self.observations.update(event["observations"])
                        self.ready_seconds = time.time() - started
                        return True
            except (ZygoteDied, TimeoutError) as exc:
                timed_out = isinstance(exc, TimeoutError)
                how = self._death()
                tail = execute.tail_of(self.log_path)
                if current is not None and current.startswith("prewarm:"):
                    self.log(
                        "the zygote died (%s) while prewarming %s; restarting without prewarm"
                        % (how, current[len("prewarm:") :])
                    )
                    self.prewarm = {
                        "tainted": "died while prewarming %s (%s)"
                        % (current[len("prewarm:") :], how)
                    }
                    self.prewarm_modules = []
                    continue
                if current is None:
                    self.log("zygote died before importing anything (%s): %s" % (how, tail[-500:]))
                    return False
                if timed_out:
                    message = "import %s did not finish within %gs" % (current, self.import_timeout)
                else:
                    message = "the interpreter died (%s) while importing %s" % (how, current)
                self.log(message)
                self.imports[current] = {
                    "ok": False,
                    "error": message,
                    "traceback": tail,
                    "output_tail": tail,
                }
                self.modules = self.modules[: self.modules.index(current)]

    def _send(self, request):
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()

    def run(self, request):
        """Run one shared probe; a zygote that dies meanwhile gives the probe a ``crash``."""
        if not self.alive and not self.start():
            return None
        deadline = time.monotonic() + float(request["timeout"]) + CHILD_EXIT_GRACE_S
        started = time.time()
        try:
            self._send(dict(request, op="run", imports=self.imports))
            while True:
                event = self._next_event(deadline)
                if event["event"] == "started":
                    self.child_pid = event["pid"]
                elif event["event"] == "result":
                    self.child_pid = None
                    return event["result"]
        except (ZygoteDied, TimeoutError, OSError) as exc:
            how = self._death()
            status = "timeout" if isinstance(exc, TimeoutError) else "crash"
            return {
                "name": request["name"],
                "status": status,
                "isolation": "shared",
                "duration_s": round(time.time() - started, 4),
                "message": "the zygote running the probe ended (%s)" % how,
                "output_tail": execute.tail_of(request["output_path"])
                or execute.tail_of(self.log_path),
                "repro": execute.rerun_command(
                    request["name"], request.get("expected"), request.get("variant", "default")
                ),
            }

    def gpu_facts(self, request):
        if not self.alive:
            return None
        try:
            self._send(dict(request, op="facts"))
            deadline = time.monotonic() + float(request["timeout"]) + CHILD_EXIT_GRACE_S
            while True:
                event = self._next_event(deadline)
                if event["event"] == "facts":
                    return event["facts"]
        except (ZygoteDied, TimeoutError, OSError):
            self._death()
            return None

    def close(self):
        if self.proc is None:
            return
        try:
            self._send({"op": "exit"})
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            pass
        self._death()


if __name__ == "__main__":
    sys.exit(server_main())
