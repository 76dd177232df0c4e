"""The zygote's client (``Zygote``, used by the runner, which never imports torch).

It starts the server (``python -m torch_matrix.probes.zygote``), notices when it dies while
importing (a segfaulting or raising torchvision), records that as the import's failure and
restarts it with fewer imports, so that every probe still gets a result. Requests are JSON lines
on the server's stdin; events come back on their own pipe (the protocol: ``probes.zygote``).
Stdlib only, Python 3.8+."""

import json
import os
import select
import subprocess
import sys
import time

from torch_matrix.probes import execute
from torch_matrix.probes.zygote import CHILD_EXIT_GRACE_S, PREWARM


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
            execute.kill_group(self.child_pid)
            self.child_pid = None
        execute.kill_group(self.proc.pid)
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
