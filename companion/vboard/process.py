"""The life cycle every virtual board shares (the unix-port one of vboard.py,
the emulated Pico of vboard/rp2.py): a relay process started with
``python -m companion.commands.vboard ... --with-parent`` that prints the board's
device path on its first line, asked to stop (SIGTERM), cut when it does not.
"""
import os
import select
import subprocess
import sys
import time

__all__ = ["BoardProcess", "descendants"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def descendants(pid):
    """Pids of every process below pid (Linux /proc)."""
    out = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                for c in f.read().split():
                    out.append(int(c))
                    out += descendants(int(c))
    except OSError:
        pass
    return out


class BoardProcess:
    """A virtual board's process in self.proc; subclasses give start() (which
    calls _launch) and kill() (a power cut); stop() asks it to end, then cuts.
    ``error``: the exception class a failed start raises."""
    STOP_TIMEOUT = 5.0
    error = RuntimeError
    proc = None
    path = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _launch(self, argv, env, timeout, what):
        """Start ``argv`` (a relay) with this tree importable; return the
        device path it prints, or raise self.error after ``timeout``."""
        if self.proc is not None:
            raise self.error("virtual board already started")
        env = dict(env)
        env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen([sys.executable, "-m", "companion.commands.vboard"] + list(argv) + ["--with-parent"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env,
                                     start_new_session=True)
        line = b""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while not line.endswith(b"\n"):
            r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 256) if r else b""
            if not chunk:
                self.stop()
                raise self.error("%s did not start (no device path within %.0f s)" % (what, timeout))
            line += chunk
        self.path = line.decode().strip()
        return self.path

    def stop(self, timeout=None):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.STOP_TIMEOUT if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


def relay_log(verbose=False, trace=None):
    """The one log of a relay process (unix board and emulated Pico alike):
    a line to stderr when verbose, and every line, timed, appended to the
    file trace when given ($SPORADIC_VBOARD_TRACE: every byte both ways)."""
    import sys
    import time

    def log(msg):
        if verbose:
            sys.stderr.write("vboard: %s\n" % msg)
            sys.stderr.flush()
        if trace:
            with open(trace, "a") as f:
                f.write("%.4f %s\n" % (time.monotonic(), msg))
    return log


def take_signals(relay, stats=False):
    """The relay process's signals: TERM, INT and HUP stop it, USR1 presses
    reset (USR2 asks the emulator's stats); a wakeup pipe ends its select()."""
    import signal
    signal.signal(signal.SIGTERM, relay.request_stop)
    signal.signal(signal.SIGINT, relay.request_stop)
    signal.signal(signal.SIGHUP, relay.request_stop)
    signal.signal(signal.SIGUSR1, relay.request_reset)
    if stats:
        signal.signal(signal.SIGUSR2, relay.request_stats)
    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)
    os.set_blocking(wfd, False)
    signal.set_wakeup_fd(wfd)
    relay.wakeup_fd = rfd


def drain_wakeup(fd):
    """Empty the wakeup pipe take_signals made (a signal arrived)."""
    try:
        os.read(fd, 512)
    except OSError:
        pass
