"""A Ctrl-C to the unix port, delivered as a board takes it (the relay's
mixin CtrlC; relay.py's docstring says what it hides). The unix port sees
Ctrl-C only as SIGINT: the relay delivers it only where it lands (the
interpreter reads the terminal raw, or catches SIGINT), sends again a SIGINT
lost in native code, and boots again an interpreter a KeyboardInterrupt left
waiting on its own mutex. What the /proc of the interpreter says decides."""
import os
import select
import signal
import termios
import time

SIGINT_SILENCE = 0.3  # seconds without output after a SIGINT before it counts as lost
SIGINT_RESENDS = 5  # times a lost SIGINT is sent again, for one Ctrl-C
DEADLOCK_WATCH = 30.0  # seconds after a SIGINT during which a self-deadlock is looked for
DEADLOCK_S = 0.3  # seconds an interpreter waits on itself before it counts as deadlocked


def _sigint_caught(pid):
    """True when process pid has a SIGINT handler installed."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    except (OSError, ValueError):
        pass
    return False


def _self_deadlocked(pid):
    """True when process pid has one thread and it waits on a futex: nobody
    is left to wake it (the unix port's qstr or GC mutex, held by code that a
    KeyboardInterrupt left: see Relay._watch_deadlock)."""
    try:
        if len(os.listdir("/proc/%d/task" % pid)) != 1:
            return False
        with open("/proc/%d/wchan" % pid) as f:
            return "futex" in f.read()
    except OSError:
        return False


def _mapped(pid, name):
    """True when process pid has a file whose path contains name mapped."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            return any(name in line for line in f)
    except OSError:
        return False


class CtrlC:
    """Relay's Ctrl-C delivery (its attributes: _mb, _pid, _last_sigint, ...)."""

    def _ctrl_c_lands(self):
        """How a Ctrl-C would reach the interpreter now: "char" (its REPL
        reads the terminal raw), "signal" (it catches SIGINT) or None (SIGINT
        would kill the unix port here, as it starts or between a command and
        the next prompt: a board keeps the byte)."""
        try:
            lflag = termios.tcgetattr(self._mb)[3]
        except termios.error:
            return None
        if not lflag & termios.ISIG:
            return "char"
        if not self._mp_loaded:
            if not _mapped(self._pid, "micropython_run"):
                return None  # CPython is still starting the interpreter
            self._mp_loaded = True
        return "signal" if _sigint_caught(self._pid) else None

    def _resend_sigint(self):
        """A SIGINT the interpreter gave no sign of (no output at all for
        SIGINT_SILENCE) was lost in native code (module docstring): send it
        again, up to SIGINT_RESENDS times. Output ends this, as a second
        KeyboardInterrupt after the first was handled would hit whatever the
        REPL runs next. Not while the interpreter waits on itself
        (_watch_deadlock's case), never where SIGINT would kill it."""
        if (not self._sigint_unanswered or self._pid is None or self._pid != self._pid_sigint
                or self._deadlock_kill or self._stuck_since is not None
                or time.monotonic() - self._last_sigint < SIGINT_SILENCE):
            return
        if self._sigint_resends >= SIGINT_RESENDS:
            self._sigint_unanswered = False
            return
        if select.select([self._mb], [], [], 0)[0]:
            return  # output not read yet
        if self._ctrl_c_lands() != "signal":
            return
        # A signal, not a byte on pty B: a byte could wait behind unread
        # input, or be read as a character if the terminal went raw.
        try:
            os.kill(self._pid, signal.SIGINT)
        except ProcessLookupError:
            return
        self._sigint_resends += 1
        self._last_sigint = time.monotonic()
        self.log("no answer to a Ctrl-C for %.1f s; SIGINT again (%d)" % (SIGINT_SILENCE, self._sigint_resends))

    def _watch_deadlock(self):
        """The unix port raises KeyboardInterrupt from its SIGINT handler
        (MICROPY_ASYNC_KBD_INTR), wherever the interpreter is: a Ctrl-C that
        lands while it holds its qstr (or GC) mutex leaves that mutex locked,
        and the next new qstr (the traceback's ``import io``, any REPL input)
        waits on it forever; every later Ctrl-C lands back in the same wait.
        A board raises KeyboardInterrupt only between bytecodes and never
        hangs so. After a Ctrl-C, an interpreter that waits on a futex with
        no other thread to release it for DEADLOCK_S is killed and booted
        again as a board interrupted in main.py is: no boot.py or main.py,
        'KeyboardInterrupt', the REPL, which then reads what was sent after
        the Ctrl-C (the deadlocked interpreter never read it)."""
        if not self._pid or time.monotonic() - self._last_sigint > DEADLOCK_WATCH:
            self._stuck_since = None
            return
        if not _self_deadlocked(self._pid):
            self._stuck_since = None
            return
        now = time.monotonic()
        if self._stuck_since is None:
            self._stuck_since = now
        elif now - self._stuck_since >= DEADLOCK_S:
            self.log("interpreter deadlocked after a Ctrl-C (unix port: asynchronous "
                     "KeyboardInterrupt); booting it again as interrupted")
            self._stuck_since = None
            self._deadlock_kill = True
            self._kill_child()
            self._replay_after_sigint()

    def _replay_after_sigint(self):
        # What followed the Ctrl-C was never read by the interpreter that
        # took it: a board's UART still holds it for its REPL.
        if self._after_sigint is not None:
            self._to_dev[:0] = self._after_sigint
        self._after_sigint = bytearray()
