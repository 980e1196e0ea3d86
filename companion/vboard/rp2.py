"""An emulated Raspberry Pi Pico: the real MicroPython rp2 firmware on a pseudo-terminal.

``companion vboard --board rp2-pico --firmware RPI_PICO.uf2`` runs the
firmware a user would flash on a Pico (a UF2 from micropython.org) in the
rp2040js emulator (companion/vboard/rp2emu/run.mjs, Node.js) and puts the board's
USB-CDC serial line on a pseudo-terminal, so that ``companion deploy``,
``sync`` and ``mpremote connect PTY`` talk to it as to ``/dev/ttyACM0``::

    companion --- /dev/pts/N (kept for the board's life)
                     |  relay (this module: one process, one select loop)
                  node run.mjs (stdin/stdout: the CDC byte stream)

The board's 2 MiB flash is a file (``--flash``, default ./vboard-rp2-pico.flash):
``--firmware`` writes a UF2 into it as dragging it onto the Pico's drive
does (the filesystem region is kept); later starts boot what the file holds.
Every flash erase and program reaches the file as it happens, so killing
the board (``RP2VBoard.kill``, SIGKILL) is a power cut: what the flash chip
had finished is there at the next start, nothing else. ``--image`` places a
LittleFS image (``companion image --board rp2-pico``) at the filesystem
offset. ``machine.reset()`` and the watchdog reset the chip; the flash and
the pseudo-terminal stay. Time is paced to the wall clock unless
``--unpaced`` (the emulated clock then skips idle time); while the emulator
is slower than the chip, the board's clock falls behind the wall rather
than jumping ahead later (see run.mjs).

The boot ROM (16 KiB, RP2040 B1, raspberrypi/pico-bootrom, BSD-3) is given
like the firmware (``--bootrom`` or ``$SPORADIC_RP2_BOOTROM``); the firmware
also by ``$SPORADIC_RP2_UF2``. Node.js and the pinned rp2040js are installed
with ``npm ci --prefix <companion>/rp2emu`` (``emulator_dir()``).
Debugging: ``SPORADIC_VBOARD_TRACE=FILE`` logs every byte both ways, as for
the unix board.

Differences from a Pico on a USB cable: the pseudo-terminal does not vanish
at a reset (a USB device re-enumerates); DTR is always asserted, so output
printed while no program holds the port is kept (up to 256 KiB) rather than
dropped; one core only (``_thread`` hangs); ``machine.lightsleep()`` without
a duration never returns; after a watchdog reset ``machine.reset_cause()``
reads WDT_RESET, as on silicon.
"""

import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import tty

from companion.vboard.process import BoardProcess, descendants, drain_wakeup

__all__ = ["RP2VBoard", "RP2Relay", "emulator_dir", "emulator_argv", "missing"]

BOARD = "rp2-pico"
OUT_BUFFER_MAX = 256 * 1024
_PR_SET_PDEATHSIG = 1


class RP2VBoardError(Exception):
    pass


def emulator_dir():
    """The folder of run.mjs, package.json and package-lock.json."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "rp2emu")


def _modules_dir():
    return os.environ.get("SPORADIC_RP2EMU_MODULES") or os.path.join(emulator_dir(), "node_modules")


def node_command():
    return os.environ.get("SPORADIC_NODE") or shutil.which("node")


def missing(firmware=None, bootrom=None):
    """What is missing to run an emulated Pico, as one sentence, or None."""
    if not node_command():
        return "Node.js is not installed (node 18 or later; it runs the rp2040js emulator)"
    if not os.path.isfile(os.path.join(_modules_dir(), "rp2040js", "package.json")):
        return "the emulator is not installed: npm ci --prefix %s" % emulator_dir()
    bootrom = bootrom or os.environ.get("SPORADIC_RP2_BOOTROM")
    if not bootrom:
        return ("no RP2040 boot ROM: --bootrom FILE or SPORADIC_RP2_BOOTROM (rp2040 B1 boot ROM, "
                "16 KiB, built from github.com/raspberrypi/pico-bootrom)")
    if not os.path.isfile(bootrom):
        return "boot ROM %s not found" % bootrom
    if firmware is not None and not os.path.isfile(firmware):
        return "firmware %s not found" % firmware
    return None


def _fs_region():
    from sporadic_boards import load

    fs = load(BOARD)["fs"]
    return fs["offset"], fs["size"]


def emulator_argv(flash, firmware=None, bootrom=None, image=None, unpaced=False, stats=None, verbose=False):
    bootrom = bootrom or os.environ.get("SPORADIC_RP2_BOOTROM")
    argv = [node_command(), os.path.join(emulator_dir(), "run.mjs"), "--bootrom", os.path.abspath(bootrom),
            "--flash", os.path.abspath(flash)]
    if firmware:
        argv += ["--firmware", os.path.abspath(firmware)]
    if image:
        offset, size = _fs_region()
        if os.path.getsize(image) > size:
            raise RP2VBoardError("image %s is larger than the %s filesystem (%d KiB)"
                                 % (image, BOARD, size // 1024))
        argv += ["--image", os.path.abspath(image), "--image-offset", hex(offset)]
    if unpaced:
        argv.append("--unpaced")
    if stats:
        argv += ["--stats", os.path.abspath(stats)]
    if verbose:
        argv.append("-v")
    return argv


def _die_with_parent():
    """In the emulator's process: die when the relay dies (a SIGKILL of the
    board is a power cut of the whole board, emulator included)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


class RP2Relay:
    """The pseudo-terminal <-> the emulator's stdin/stdout."""

    def __init__(self, argv, log=None):
        self.argv = argv
        self.log = log or (lambda msg: None)
        self.path = None
        self._ma = self._sa = None
        self._proc = None
        self._to_dev = bytearray()
        self._to_user = bytearray()
        self._stop = False
        self._reset_requested = False
        self._stats_requested = False
        self.wakeup_fd = None
        self.parent_pid = None
        self.exit_status = 0
        self.trace = False  # log() every byte both ways (SPORADIC_VBOARD_TRACE)

    def open(self):
        self._ma, self._sa = os.openpty()
        tty.setraw(self._sa)
        self.path = os.ttyname(self._sa)
        os.set_blocking(self._ma, False)
        return self.path

    def request_stop(self, *_):
        self._stop = True

    def request_reset(self, *_):
        self._reset_requested = True

    def request_stats(self, *_):
        self._stats_requested = True

    def _signal_child(self, sig):
        if self._proc and self._proc.poll() is None:
            self._proc.send_signal(sig)

    def power_on(self, timeout=60.0):
        """Start the emulator; return once its flash file is ready and the
        chip runs (False: it exited, its reason is on stderr)."""
        if self._ma is None:
            self.open()
        rfd, wfd = os.pipe()
        env = dict(os.environ, SPORADIC_RP2EMU_READY_FD=str(wfd))
        self._proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                      pass_fds=(wfd,), preexec_fn=_die_with_parent)
        os.close(wfd)
        got = b""
        deadline = time.monotonic() + timeout
        try:
            while not got.endswith(b"\n") and time.monotonic() < deadline:
                r, _, _ = select.select([rfd], [], [], max(0.0, deadline - time.monotonic()))
                chunk = os.read(rfd, 64) if r else b""
                if not chunk:
                    break
                got += chunk
        finally:
            os.close(rfd)
        if got != b"ready\n":
            self.exit_status = self._proc.wait() or 1
            return False
        return True

    def run(self):
        if self._proc is None and not self.power_on():
            self.close()
            return self.exit_status
        cin, cout = self._proc.stdin.fileno(), self._proc.stdout.fileno()
        os.set_blocking(cin, False)
        os.set_blocking(cout, False)
        self.log("emulator pid %d" % self._proc.pid)
        try:
            while not self._stop:
                if self.parent_pid is not None and os.getppid() != self.parent_pid:
                    break
                if self._reset_requested:
                    self._reset_requested = False
                    self._signal_child(signal.SIGUSR1)
                if self._stats_requested:
                    self._stats_requested = False
                    self._signal_child(signal.SIGUSR2)
                rl = [self._ma, cout] + ([self.wakeup_fd] if self.wakeup_fd is not None else [])
                wl = ([cin] if self._to_dev else []) + ([self._ma] if self._to_user else [])
                try:
                    r, w, _ = select.select(rl, wl, [], 0.5)
                except InterruptedError:
                    continue
                if self.wakeup_fd is not None and self.wakeup_fd in r:
                    drain_wakeup(self.wakeup_fd)
                if self._ma in r:
                    try:
                        data = os.read(self._ma, 65536)
                    except (BlockingIOError, OSError):
                        data = b""
                    if data and self.trace:
                        self.log("user> %r" % data)
                    self._to_dev += data
                if cout in r:
                    try:
                        data = os.read(cout, 65536)
                    except BlockingIOError:
                        data = None
                    if data == b"":
                        status = self._proc.wait()
                        self.log("emulator exited (%s)" % status)
                        self.exit_status = status or 1
                        break
                    if data:
                        if self.trace:
                            self.log("dev> %r" % data)
                        self._to_user += data
                        if len(self._to_user) > OUT_BUFFER_MAX:
                            del self._to_user[: len(self._to_user) - OUT_BUFFER_MAX]
                if self._to_dev and cin in w:
                    try:
                        del self._to_dev[: os.write(cin, bytes(self._to_dev[:65536]))]
                    except BlockingIOError:
                        pass
                if self._to_user and self._ma in w:
                    try:
                        del self._to_user[: os.write(self._ma, bytes(self._to_user[:65536]))]
                    except BlockingIOError:
                        pass
        finally:
            self.close()
        return self.exit_status

    def close(self):
        self._stop = True
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()  # a clean stop: the emulator syncs its flash file
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            for f in (self._proc.stdin, self._proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self._proc = None
        for fd in (self._ma, self._sa):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._ma = self._sa = None


class RP2VBoard(BoardProcess):
    """An emulated Pico in its own process; ``start()`` returns its device path.

    flash:    the board's 2 MiB flash file (created blank if missing).
    firmware: a MicroPython RPI_PICO UF2 written into the flash at start
              (needed the first time; $SPORADIC_RP2_UF2 is not read here).
    bootrom:  the RP2040 boot ROM (default $SPORADIC_RP2_BOOTROM).
    image:    a LittleFS image placed at the filesystem offset at start.
    unpaced:  skip idle time instead of waiting for the wall clock.
    stats:    a file the emulator writes its instruction count to (``stats()``).
    """

    STOP_TIMEOUT = 15.0
    error = RP2VBoardError

    def __init__(self, flash, firmware=None, bootrom=None, image=None, unpaced=False, stats=None):
        self.flash = os.path.abspath(flash)
        self.firmware = firmware
        self.bootrom = bootrom
        self.image = image
        self.unpaced = unpaced
        self.stats_file = stats

    def start(self, timeout=30.0):
        why = missing(self.firmware, self.bootrom)
        if why:
            raise RP2VBoardError(why)
        argv = ["--board", BOARD, "--flash", self.flash]
        for opt, val in (("--firmware", self.firmware), ("--bootrom", self.bootrom), ("--image", self.image),
                         ("--stats", self.stats_file)):
            if val:
                argv += [opt, os.path.abspath(val)]
        if self.unpaced:
            argv.append("--unpaced")
        return self._launch(argv, os.environ, timeout, "emulated Pico")

    def emulator_pids(self):
        return descendants(self.pid) if self.pid else []

    def reset(self):
        """Press the reset button: the chip reboots from its flash."""
        if self.alive():
            self.proc.send_signal(signal.SIGUSR1)

    def stats(self, timeout=10.0):
        """The emulator's counters now: {"instructions", "cycles", "emulated_s", ...}."""
        import json

        if not self.stats_file or not self.alive():
            raise RP2VBoardError("no stats file, or the board is not running")
        # the answer is the file the emulator renames into place after this
        # request: the old one goes first (an mtime cannot tell two answers
        # written within one tick of the kernel's clock apart)
        try:
            os.remove(self.stats_file)
        except FileNotFoundError:
            pass
        self.proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.stats_file):
                with open(self.stats_file) as f:
                    text = f.read()
                if text.endswith("\n"):
                    return json.loads(text)
            time.sleep(0.02)
        raise RP2VBoardError("the emulator did not write its stats")

    def set_unpaced(self, unpaced):
        """From now on skip idle time (True) or run at the wall clock's pace
        (False), as --unpaced does from the start: through the stats file
        (FILE.pace, read by the emulator at the next stats request)."""
        with open(self.stats_file + ".pace", "w") as f:
            f.write("unpaced" if unpaced else "paced")
        self.unpaced = unpaced
        return self.stats()

    def kill(self):
        """Power cut: the relay and the emulator die at once (SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            pids = self.emulator_pids()
            self.proc.kill()
            self.proc.wait()
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5
            while any(os.path.exists("/proc/%d" % p) and not _zombie(p) for p in pids) and time.monotonic() < deadline:
                time.sleep(0.01)



def _zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
