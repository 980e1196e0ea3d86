"""The relay of a virtual board (runs in the board's own process, started by
vboard.VBoard or ``companion vboard``): the MicroPython unix port on a
pseudo-terminal, booted again on every soft reboot, its flash a folder or a
LittleFS image.

How: two pseudo-terminals and a relay.

    companion --- /dev/pts/N (pty A, kept for the board's life)
                      |  relay (this module, one process, one select loop)
                  pty B (new for each boot) --- micropython vboard_boot.py

The unix port sees Ctrl-C only as SIGINT, so pty B is the interpreter's
controlling terminal (``pty.fork``: setsid + TIOCSCTTY) with ISIG on (and
NOFLSH, so the bytes after a Ctrl-C are kept, as a board's UART buffer keeps
them; VQUIT/VSUSP disabled so no other byte raises a signal). The unix port
exits where a board soft-reboots; the relay then starts a new interpreter on
a new pty B while pty A, the path the companion holds, stays open.

Differences the relay hides, so that nothing is learned on the virtual
board that a real one does not do:

* a Ctrl-C is delivered only when the interpreter either reads it as a
  character (its REPL has the terminal in raw mode) or catches SIGINT; in the
  windows where the unix port leaves SIGINT at its default (start-up, between
  a command and the next prompt) the byte waits, where it would kill the
  process. Two Ctrl-C less than 0.1 s apart while code runs are spaced out
  (the unix port exits on a second SIGINT before the first was handled).
* the unix port raises KeyboardInterrupt from its SIGINT handler, wherever
  the interpreter is; one that lands while it holds its qstr mutex
  deadlocks it for good (a board raises it between bytecodes). An
  interpreter found waiting on itself after a Ctrl-C is booted again as a
  board interrupted in main.py (the REPL, no boot.py or main.py).
* so too a KeyboardInterrupt raised inside native code that takes any
  exception for a failure of its own (the parser's constant folding; the
  import machinery's stat of a Python VFS, where a board loses it as well)
  is lost without a trace. A SIGINT after which the interpreter prints
  nothing for 0.3 s, and still catches SIGINT, is sent again (at most 5
  times for one Ctrl-C; the companion would try again only after 5 s). Any
  output (a traceback, a prompt) ends that: a second KeyboardInterrupt once
  the first was handled would hit the REPL's next command. The cost: a
  program that takes a Ctrl-C in silence (an ``except KeyboardInterrupt``
  that prints nothing) gets it again.
* output: a ``\\n`` not preceded by ``\\r`` is sent as ``\\r\\n``, as a board's
  cooked stdout does for ``print`` (disable with ``cooked=False`` /
  ``--raw-output``).
* output nobody reads is buffered up to 256 KiB, then the oldest is dropped
  (a board's UART does not block its program when no cable is attached).

The boot shim (vboard_boot.py) hides two more: a Ctrl-C landing as the
interpreter starts acts as a board interrupted at boot (no main.py, REPL),
and ``import os`` gets os with ``rename`` mended, because the unix port's
``VfsPosix.rename`` of two absolute paths renames the wrong file. With
``image=`` the flash is instead a LittleFS v2 image on a file-backed block
device, as a board's (files are committed when closed, sizes are finite).

The relay is also the board's watchdog (a board's is hardware): the shim
gives ``machine`` a ``WDT(timeout=MS)`` whose creation and ``feed()`` reach
the relay through a pipe (``SPORADIC_VBOARD_WDT``, its file descriptor).
Once started it runs across Ctrl-C and soft reboots, as on a board; not fed
for its timeout, the relay kills the interpreter and boots it as after a
reset (main.py runs; the watchdog is off until started again). So a board
left in the raw REPL by a companion that died mid-sync is back in its loop
within the timeout (8 s, as a Pico's: the shim's feed of the unix board module).

Known differences: code run through raw-paste runs with the terminal in raw
mode on the unix port, so Ctrl-C cannot interrupt it (mpremote and SerialLink
execute through raw-paste); there is no machine.reset/deepsleep; ``-X
heapsize`` bounds the heap but the C stack and speed are those of the host; a
folder flash has no size limit (use an image for that).

"""
import os
import pty
import re
import select
import signal
import sys
import termios
import time
import tty

from companion.vboard.process import drain_wakeup
from companion.vboard.sigint import DEADLOCK_WATCH, CtrlC
from companion.vboard.unixport import VBoardError, frozen_shim, heap_arg, micropython_command, size_arg

__all__ = ["Relay"]

BOOT_SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onboard", "vboard_boot.py")

RAW_BANNER = b"raw REPL; CTRL-B to exit\r\n"
FRIENDLY_BANNER = b'Type "help()" for more information.\r\n'
SOFT_REBOOT = b"MPY: soft reboot\r\n"
OUT_BUFFER_MAX = 256 * 1024
SIGINT_SPACING = 0.1  # seconds between two SIGINTs delivered while code runs
CRASH_AFTER_SIGINT = 1.0  # seconds: an interpreter failing this soon after a SIGINT died of it
AFTER_SIGINT_MAX = 4096  # bytes sent after a SIGINT kept for a deadlocked interpreter's successor

class Relay(CtrlC):
    """Pty A (the board's serial line) <-> interpreter on pty B, with reboots."""

    def __init__(self, flash_dir, heap="64K", env=None, cooked=True, command=None, log=None,
                 image=None, flash_size="2M"):
        self.image = os.path.abspath(image) if image else None
        self.flash_size = size_arg(flash_size)
        if flash_dir is None and self.image is None:
            raise VBoardError("a virtual board needs a flash folder or an image")
        self.flash_dir = os.path.abspath(flash_dir) if flash_dir else os.path.dirname(self.image)
        self.heap = heap_arg(heap)
        self.env = dict(env or {})
        self.cooked = cooked
        self.command = command or micropython_command()
        self.log = log or (lambda msg: None)
        self.path = None
        self._ma = self._sa = None  # pty A master / our own slave fd
        self._mb = None  # pty B master (interpreter)
        self._pid = None
        self._to_dev = bytearray()
        self._to_user = bytearray()
        self._stop = False
        self._reset_requested = False
        self._mode = "boot"  # 'boot' | 'raw' | 'friendly' (last REPL seen)
        self._tail = b""
        self._last_cr = False
        self._raw_boot = None  # bytearray while suppressing a friendly banner
        self._last_sigint = 0.0
        self._pid_sigint = None  # the interpreter the last SIGINT went to
        self._stuck_since = None  # interpreter seen waiting on itself since (see _watch_deadlock)
        self._deadlock_kill = False  # the interpreter was killed for it: boot as interrupted
        self._sigint_sent = False  # the next byte written is a SIGINT
        self._sigint_unanswered = False  # no output since the last SIGINT (see _resend_sigint)
        self._sigint_resends = 0
        self._after_sigint = bytearray()  # bytes written since the last SIGINT (None: too many)
        self._exits_unasked = []  # when interpreters ended with nothing sent to them (crash loop guard)
        self._fed = False  # bytes went to the running interpreter since it booted
        self._configured = False  # pty B has the termios the child sets
        # Through the PyPI package the interpreter is CPython running
        # MicroPython as an extension: until the extension is loaded, a caught
        # SIGINT is CPython's, not MicroPython's.
        self._wrapped = self.command[:2] == [sys.executable, "-c"]
        self._mp_loaded = not self._wrapped
        self._raw_sent = False
        self.wakeup_fd = None  # read end of a signal.set_wakeup_fd pipe
        self.parent_pid = None  # stop when this process is no longer our parent
        self.trace = False  # log every byte through self.log
        self._wdt_r = self._wdt_w = None  # the watchdog's pipe (the interpreter writes)
        self._wdt_ms = None  # its timeout once started, None while off
        self._wdt_fed = 0.0  # monotonic time of the last feed
        self._wdt_buf = b""

    # -- pty A ---------------------------------------------------------
    def open(self):
        self._ma, self._sa = os.openpty()
        tty.setraw(self._sa)  # 8-bit clean for any reader, cat included
        self.path = os.ttyname(self._sa)
        os.set_blocking(self._ma, False)
        self._wdt_r, self._wdt_w = os.pipe()
        os.set_blocking(self._wdt_r, False)
        os.set_inheritable(self._wdt_w, True)
        os.makedirs(self.flash_dir, exist_ok=True)
        if self.image and not os.path.exists(self.image):
            with open(self.image, "wb") as f:  # blank flash: the board formats it
                f.truncate(self.flash_size)
        return self.path

    def request_stop(self, *_):
        self._stop = True

    def request_reset(self, *_):
        self._reset_requested = True

    # -- interpreter -----------------------------------------------------
    def _spawn(self, kind):
        env = dict(os.environ)
        env.pop("HOME", None)  # no REPL history written to the host
        env.pop("MICROPYPATH", None)
        env.pop("MICROPYINSPECT", None)
        env.update(self.env)
        if self.image:
            env["SPORADIC_VBOARD_IMAGE"] = self.image
        else:
            env["SPORADIC_VBOARD_FLASH"] = self.flash_dir
        env["SPORADIC_VBOARD_BOOT"] = kind
        # a port with a ROM segment (micropython-romfs) maps it and mounts /rom (#31)
        env.pop("MICROPY_ROMFS", None)
        if env.get("SPORADIC_VBOARD_ROMFS"):
            env["MICROPY_ROMFS"] = env["SPORADIC_VBOARD_ROMFS"]
        env["SPORADIC_VBOARD_WDT"] = str(self._wdt_w)
        # a ROM build's frozen shim (only those builds freeze it)
        shim = ["-m", "vboard_boot"] if env.get("MICROPY_ROMFS") and frozen_shim(self.command) else [BOOT_SHIM]
        argv = list(self.command) + ["-X", "heapsize=" + self.heap] + shim
        pid, mb = pty.fork()
        if pid == 0:  # child: pty B is already our controlling terminal
            try:
                attrs = termios.tcgetattr(0)
                iflag, oflag, cflag, lflag, ispeed, ospeed, cc = attrs
                iflag = 0
                oflag = 0  # no ONLCR: the port writes its own \r\n
                cflag = (cflag & ~(termios.CSIZE | termios.PARENB)) | termios.CS8 | termios.CREAD
                lflag = termios.ISIG | termios.NOFLSH
                cc[termios.VINTR] = b"\x03"
                for name in ("VQUIT", "VSUSP", "VDSUSP", "VSTART", "VSTOP", "VLNEXT", "VDISCARD"):
                    if hasattr(termios, name):
                        cc[getattr(termios, name)] = b"\x00"
                cc[termios.VMIN] = 1
                cc[termios.VTIME] = 0
                termios.tcsetattr(0, termios.TCSANOW, [iflag, oflag, cflag, lflag, ispeed, ospeed, cc])
                os.chdir(self.flash_dir)
                os.execvpe(argv[0], argv, env)
            except BaseException as e:  # pragma: no cover - reported through the pty
                os.write(2, ("vboard: cannot start %s: %s\r\n" % (argv[0], e)).encode())
            os._exit(127)
        os.set_blocking(mb, False)
        self._pid, self._mb = pid, mb
        self._mode = "boot"
        self._tail = b""
        self._configured = False
        self._mp_loaded = not self._wrapped
        self._sigint_unanswered = False
        self._fed = False
        self.log("boot (%s) pid %d" % (kind, pid))
        # After a raw-REPL soft reboot, enter the raw REPL as a board does and
        # hide the friendly banner the unix port prints first; the Ctrl-A goes
        # out with the interpreter's first output (its terminal is set by then).
        self._raw_boot = bytearray() if kind == "raw" else None
        self._raw_sent = False

    def _reap(self):
        """The interpreter closed its terminal: collect it, decide the reboot."""
        pid, status = self._pid, 0
        try:
            os.close(self._mb)
        except OSError:
            pass
        self._mb = None
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        self._pid = None
        if self._raw_boot is not None:
            self._emit(bytes(self._raw_boot))
            self._raw_boot = None
        if self._stop:
            return
        asked = self._fed or self._reset_requested  # the line sent it something, or the reset button
        signalled = os.WIFSIGNALED(status)
        deadlocked, self._deadlock_kill = self._deadlock_kill, False
        if (not signalled and os.WEXITSTATUS(status) != 0 and self._pid_sigint == pid
                and time.monotonic() - self._last_sigint < CRASH_AFTER_SIGINT):
            # The asynchronous KeyboardInterrupt again: one landing in the
            # garbage collector (heap locked) ends the port in "FATAL:
            # uncaught NLR". A board would have raised it in main.py: boot
            # as interrupted, and its REPL reads what followed the Ctrl-C.
            self.log("interpreter died after a Ctrl-C (status %#x); booting it again as interrupted" % status)
            deadlocked = True
            self._replay_after_sigint()
        if self._reset_requested or (signalled and not deadlocked):
            # Reset button / watchdog / crash: a power-on boot runs main.py,
            # the watchdog off
            self._reset_requested = False
            self._wdt_ms = None
            kind = "main"
            self.log("hard reset (status %#x)" % status)
        elif deadlocked:
            # A board interrupted by Ctrl-C: no boot.py, no main.py, the REPL.
            kind = "interrupted"
        else:
            kind = "raw" if self._mode == "raw" else "main"
            self._emit(SOFT_REBOOT)
        # A main.py that ends the interpreter at once would boot it again and
        # again as fast as the host can: hold such a loop back. Reboots the
        # line asked for (Ctrl-D, a reset; a sync makes two) are not one.
        now = time.monotonic()
        recent = [t for t in self._exits_unasked if now - t < 2.0]
        if not asked:
            recent.append(now)
        if len(recent) >= 5:
            self.log("interpreter keeps exiting; waiting 1 s before booting again")
            time.sleep(1.0)
        self._exits_unasked = recent
        self._spawn(kind)

    # -- the watchdog ------------------------------------------------------
    def _wdt_read(self):
        try:
            data = os.read(self._wdt_r, 4096)
        except BlockingIOError:
            return
        lines = (self._wdt_buf + data).split(b"\n")
        self._wdt_buf = lines.pop()
        now = time.monotonic()
        for line in lines:
            if line[:2] == b"S ":  # machine.WDT(timeout=MS): started (or set again), fed
                try:
                    self._wdt_ms = max(1, int(line[2:]))
                except ValueError:
                    continue
                self._wdt_fed = now
                self.log("watchdog started (%d ms)" % self._wdt_ms)
            elif line == b"F" and self._wdt_ms is not None:
                self._wdt_fed = now

    def _wdt_left(self):
        """Seconds until the watchdog fires (None: off)."""
        if self._wdt_ms is None or not self._pid:
            return None
        return self._wdt_ms / 1000.0 - (time.monotonic() - self._wdt_fed)

    def _wdt_check(self):
        left = self._wdt_left()
        if left is not None and left <= 0:
            self.log("watchdog not fed for %d ms: reset" % self._wdt_ms)
            self._wdt_ms = None
            self._reset_requested = True
            self._kill_child()

    def _kill_child(self, sig=signal.SIGKILL):
        if self._pid:
            try:
                os.kill(self._pid, sig)
            except ProcessLookupError:
                pass

    # -- output (interpreter -> user) --------------------------------------
    def _from_dev(self, data):
        if self._raw_boot is not None:
            if not self._raw_sent:
                self._raw_sent = True
                os.write(self._mb, b"\x01")
            self._raw_boot += data
            buf = bytes(self._raw_boot)
            i = buf.find(RAW_BANNER)
            if i < 0:
                return
            self._raw_boot = None
            j = buf.find(b"MicroPython ")  # boot.py output comes before it
            keep = buf[:j] if 0 <= j < i else b""
            data = keep + buf[i:]
        self._track_mode(data)
        self._emit(data)

    def _track_mode(self, data):
        scan = self._tail + data
        r, f = scan.rfind(RAW_BANNER), scan.rfind(FRIENDLY_BANNER)
        if r >= 0 or f >= 0:
            self._mode = "raw" if r > f else "friendly"
        self._tail = scan[-64:]

    def _emit(self, data):
        if not data:
            return
        if self.cooked:
            start = b""
            if self._last_cr and data[:1] == b"\n":
                start, data = b"\n", data[1:]
            data = start + re.sub(rb"(?<!\r)\n", b"\r\n", data)
            self._last_cr = data[-1:] == b"\r"
        self._to_user += data
        if len(self._to_user) > OUT_BUFFER_MAX:
            del self._to_user[: len(self._to_user) - OUT_BUFFER_MAX]

    # -- input (user -> interpreter) ---------------------------------------
    def _deliverable(self):
        """How many bytes of _to_dev may go to the interpreter now."""
        if self._mb is None or self._raw_boot is not None or self._deadlock_kill:
            return 0
        if not self._configured:
            try:
                if termios.tcgetattr(self._mb)[3] & termios.ICANON:
                    return 0  # the child has not set its terminal up yet
            except termios.error:
                return 0
            self._configured = True
        buf = self._to_dev
        i = buf.find(b"\x03")
        if i != 0:
            return len(buf) if i < 0 else i
        # A Ctrl-C is next.
        how = self._ctrl_c_lands()
        if how == "char":
            return 1
        if how != "signal" or time.monotonic() - self._last_sigint < SIGINT_SPACING:
            return 0
        self._last_sigint = time.monotonic()
        self._pid_sigint = self._pid
        self._sigint_sent = True
        return 1

    # -- the loop ------------------------------------------------------------
    def run(self):
        if self._ma is None:
            self.open()
        self._spawn("main")
        try:
            while not self._stop:
                if self.parent_pid is not None and os.getppid() != self.parent_pid:
                    break  # whoever started us is gone: so is the board
                if self._reset_requested and self._pid:
                    self._kill_child()
                self._wdt_check()
                if self._pid and not self._deadlock_kill and time.monotonic() - self._last_sigint < DEADLOCK_WATCH:
                    self._watch_deadlock()
                    self._resend_sigint()
                rl, wl = [self._ma, self._wdt_r], []
                if self.wakeup_fd is not None:
                    rl.append(self.wakeup_fd)
                if self._mb is not None:
                    rl.append(self._mb)
                n = self._deliverable() if self._to_dev else 0
                if n:
                    wl.append(self._mb)
                if self._to_user:
                    wl.append(self._ma)
                timeout = 0.005 if (self._to_dev and not n) else 0.5
                if self._pid and time.monotonic() - self._last_sigint < DEADLOCK_WATCH:
                    timeout = min(timeout, 0.1)
                left = self._wdt_left()
                if left is not None:
                    timeout = max(0.0, min(timeout, left + 0.001))
                try:
                    r, w, _ = select.select(rl, wl, [], timeout)
                except InterruptedError:
                    continue
                if self.wakeup_fd is not None and self.wakeup_fd in r:
                    drain_wakeup(self.wakeup_fd)
                    continue
                if self._wdt_r in r:
                    self._wdt_read()
                if self._ma in r:
                    try:
                        data = os.read(self._ma, 65536)
                        if self.trace:
                            self.log("user> %r" % data)
                        self._to_dev += data
                    except BlockingIOError:
                        pass
                    except OSError:
                        # Nobody holds the slave (cannot happen: we keep one).
                        time.sleep(0.01)
                if self._mb is not None and self._mb in r:
                    try:
                        data = os.read(self._mb, 65536)
                    except BlockingIOError:
                        data = None
                    except OSError:  # EIO: the interpreter is gone
                        data = b""
                    if data:
                        self._sigint_unanswered = False
                        if self.trace:
                            self.log("dev> %r" % data)
                        self._from_dev(data)
                    elif data == b"":
                        self._reap()
                        continue
                if n and self._mb is not None and self._mb in w:
                    try:
                        k = os.write(self._mb, bytes(self._to_dev[:n]))
                        self._fed = self._fed or k > 0
                        if self.trace:
                            self.log(">dev %r" % bytes(self._to_dev[:k]))
                        if self._sigint_sent:
                            self._sigint_sent = False
                            self._after_sigint = bytearray()
                            self._sigint_unanswered = True
                            self._sigint_resends = 0
                        elif self._after_sigint is not None:
                            self._after_sigint += self._to_dev[:k]
                            if len(self._after_sigint) > AFTER_SIGINT_MAX:
                                self._after_sigint = None  # too much to replay
                        del self._to_dev[:k]
                    except BlockingIOError:
                        pass
                    except OSError:
                        pass  # reaped on the next read
                if self._to_user and self._ma in w:
                    try:
                        k = os.write(self._ma, bytes(self._to_user[:65536]))
                        del self._to_user[:k]
                    except BlockingIOError:
                        pass
        finally:
            self.close()

    def close(self):
        self._stop = True
        if self._pid:
            self._kill_child()
            try:
                os.waitpid(self._pid, 0)
            except ChildProcessError:
                pass
            self._pid = None
        for fd in (self._mb, self._ma, self._sa, self._wdt_r, self._wdt_w):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._mb = self._ma = self._sa = self._wdt_r = self._wdt_w = None
