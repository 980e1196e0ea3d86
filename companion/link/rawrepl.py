"""The raw REPL on the wire: the bytes that make a MicroPython board run code
and give back what it printed (class RawRepl, which link/serial.py's
SerialLink builds its requests and files on).

Why the project keeps its own raw REPL rather than mpremote's (this is the
one place that says so): mpremote's ``SerialTransport`` reads a byte per
call with a 10 ms sleep when the line is idle, waits without a deadline for
raw-paste's window bytes, returns from a silence timeout without saying so
and has one error type. This link must read in bulk (a full sync is
~670 KB), give up on a silent board after ``timeout`` (while a board at
work keeps it alive with 0x06 bytes), stream data under the board's flow
control and fail with the LinkError subclass that says what happened:
nearly every method of mpremote's would be overridden. mpremote stays the
user's tool (and the benches' yardstick) on the same line.

Opening interrupts whatever the board runs (Ctrl-C; main.py stops, also
inside ``time.sleep``; Ctrl-C is repeated if a program swallows one) and
enters the raw REPL *without* a soft reset, so nothing on the board
restarts. Code goes by raw-paste where the board has it (its window
credits, 128 bytes on most ports), else in 256-byte pieces.

Streams: one execution reads raw bytes from stdin with Ctrl-C off
(onboard/stream_in.py), under the same flow control as raw-paste: the board
grants two windows and one more each time it has consumed one, so no UART
buffer overflows. A board cut off mid-stream is unstuck with filler bytes
(which fail the stream's digest: never taken for data) and gives up after
STREAM_IDLE_MS of silence.

``soft_reset()``: Ctrl-D at the raw prompt (main.py does not run); ``close()``
and ``resume()``: Ctrl-B, then Ctrl-D (main.py runs again).

Bytes are counted by wrapping the serial object's ``read``/``write``: every
byte on the wire, REPL prompts, flow control and encodings included.
Failures raise ``LinkError`` subclasses (link/base.py), never hang: every
wait has a silence timeout (``timeout``, 20 s) or a deadline. After a
``LinkError`` other than ``LinkExecError`` the link refuses further use;
open a new one.
"""

import os
import re
import struct
import time

import serial

from .base import LinkClosed, ReplLink, LinkError, LinkExecError, LinkReset, LinkTimeout, NotSporadic, FailsAtStart
from .ports import at_open, close_port, open_failure, open_port

__all__ = ["RawRepl", "onboard_source", "onboard_code", "onboard_request", "RAW_BANNER", "STREAM_IDLE_MS",
           "RETRY_CTRL_C", "text"]

ONBOARD_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onboard")


def onboard_source(name):
    """The text of companion/link/onboard/NAME.py: code exec'd on a board."""
    with open(os.path.join(ONBOARD_DIR, name + ".py"), encoding="utf-8") as f:
        return f.read()


_onboard_cache = {}


def onboard_code(name):
    """companion/link/onboard/NAME.py as it goes on the wire: comment and blank
    lines dropped, each 4-space indentation level sent as one space (the
    files keep to that: no inline comments, no continuation lines)."""
    code = _onboard_cache.get(name)
    if code is None:
        out = []
        for line in onboard_source(name).splitlines():
            body = line.lstrip(" ")
            if not body or body.startswith("#"):
                continue
            depth, rest = divmod(len(line) - len(body), 4)
            if rest:
                raise ValueError("onboard/%s.py: indentation not a multiple of 4: %r" % (name, line))
            out.append(" " * depth + body)
        code = _onboard_cache[name] = "\n".join(out) + "\n"
    return code


def onboard_request(name, request_expr):
    """onboard/NAME.py with its REQUEST placeholder replaced by request_expr."""
    head, marker, tail = onboard_code(name).partition("REQUEST")
    assert marker, name
    return head + request_expr + tail


RAW_BANNER = b"raw REPL; CTRL-B to exit\r\n"
# Output that means the board rebooted under a running request.
RESET_SIGNS = (b"soft reboot\r\n", RAW_BANNER, b'Type "help()" for more information.')
POLL = 0.05  # serial read timeout: the granularity of every wait
# a board streaming data in gives up after this much silence (stream_in.py)
STREAM_IDLE_MS = int(re.search(r"^_IDLE_MS = const\((\d+)\)$", onboard_source("stream_in"), re.M).group(1))
RETRY_CTRL_C = 2.5  # seconds between Ctrl-C attempts (> STREAM_IDLE_MS)
FILLER = 256  # at most this many filler bytes to unstick a cut-off stream (>= a window)


class CountingSerial:
    """A pyserial object whose read/write count bytes into a Link."""

    def __init__(self, ser, link):
        object.__setattr__(self, "_ser", ser)
        object.__setattr__(self, "_link", link)

    def read(self, size=1):
        data = self._ser.read(size)
        if data:
            self._link._count(received=len(data))
        return data

    def write(self, data):
        n = self._ser.write(data)
        self._link._count(sent=len(data) if n is None else n)
        return n

    def __getattr__(self, name):
        return getattr(self._ser, name)

    def __setattr__(self, name, value):
        setattr(self._ser, name, value)


class RawRepl(ReplLink):
    """A MicroPython board's raw REPL on a serial line: run code, read what
    it printed, stream bytes to it. port_url: anything pyserial opens;
    baud: line speed (ignored by USB CDC and ptys); timeout: seconds of
    silence after which a request fails with LinkTimeout; interrupt_timeout:
    how long Ctrl-C may take to reach a prompt."""

    def __init__(self, port_url, baud=115200, timeout=20.0, interrupt_timeout=15.0):
        self.port_url = port_url
        self.timeout = timeout
        self.interrupt_timeout = interrupt_timeout
        self.bytes_sent = 0
        self.bytes_received = 0
        self._rx = bytearray()
        self._raw_paste = None  # unknown until the first execution
        self._window = 128  # the board's raw-paste flow-control window
        self._in_raw = False
        self._broken = None
        self._closed = False
        try:
            self.serial = open_port(port_url, baud, POLL)
        except (serial.SerialException, OSError, ValueError) as e:
            raise at_open(open_failure(port_url, e)) from None
        self._ser = CountingSerial(self.serial, self)
        try:
            self.enter_raw_repl()
        except LinkError as e:
            e.at_open = True
            self._close_port()
            raise
        except BaseException:
            self._close_port()
            raise

    def _rebooted(self):
        """The board rebooted: what the raw REPL's globals held is gone
        (SerialLink forgets the helpers it defined)."""

    # -- the wire --------------------------------------------------------
    def _fail(self, exc):
        self._broken = exc
        raise exc

    def _write(self, data):
        try:
            self._ser.write(data)
        except (serial.SerialException, OSError) as e:
            self._fail(LinkClosed("%s went away (cable pulled? write failed: %s)" % (self.port_url, e)))

    def _fill(self):
        """Read what the line has (waiting at most POLL); return the count."""
        try:
            n = self._ser.in_waiting
            data = self._ser.read(n if n else 1)
        except (serial.SerialException, OSError) as e:
            self._fail(LinkClosed("%s went away (cable pulled? read failed: %s)" % (self.port_url, e)))
        if data:
            self._rx += data
        return len(data)

    def _read_until(self, ending, timeout=None, overall=None, watch_reset=False):
        """Bytes up to and including ``ending``.

        timeout: seconds of silence allowed (default self.timeout);
        overall: an absolute time.monotonic() deadline;
        watch_reset: fail fast with LinkReset if the board reboots meanwhile.
        """
        timeout = self.timeout if timeout is None else timeout
        silent_until = time.monotonic() + timeout
        start = scanned = 0
        while True:
            i = self._rx.find(ending, start)
            if i >= 0:
                end = i + len(ending)
                out = bytes(self._rx[:end])
                del self._rx[:end]
                return out
            start = max(0, len(self._rx) - len(ending) + 1)
            if watch_reset:
                lo = max(0, scanned - 48)
                window = bytes(self._rx[lo:])
                for sign in RESET_SIGNS:
                    if sign in window:
                        self._fail(LinkReset("%s: the board rebooted during the request" % self.port_url))
                scanned = len(self._rx)
            now = time.monotonic()
            if self._fill():
                silent_until = time.monotonic() + timeout
            elif now > silent_until:
                self._fail(LinkTimeout("%s: no answer for %.1f s (last bytes %r)"
                                       % (self.port_url, timeout, bytes(self._rx[-60:]))))
            if overall is not None and now > overall:
                raise LinkTimeout("%s: timed out (last bytes %r)" % (self.port_url, bytes(self._rx[-60:])))

    def _read_exact(self, n, timeout=None):
        silent_until = time.monotonic() + (self.timeout if timeout is None else timeout)
        while len(self._rx) < n:
            if self._fill():
                silent_until = time.monotonic() + (self.timeout if timeout is None else timeout)
            elif time.monotonic() > silent_until:
                self._fail(LinkTimeout("%s: no answer (last bytes %r)" % (self.port_url, bytes(self._rx[-60:]))))
        out = bytes(self._rx[:n])
        del self._rx[:n]
        return out

    def _waiting(self):
        try:
            return self._ser.in_waiting
        except (serial.SerialException, OSError) as e:
            self._fail(LinkClosed("%s: %s" % (self.port_url, e)))

    def _drain(self):
        """Drop what is already on the line."""
        try:
            while self._fill():
                pass
        finally:
            self._rx.clear()

    def _check(self):
        if self._closed:
            raise LinkClosed("%s: link closed" % self.port_url)
        if self._broken is not None:
            raise LinkError("%s: link unusable after: %s" % (self.port_url, self._broken))

    # -- the raw REPL ---------------------------------------------------------
    def enter_raw_repl(self):
        """Interrupt the board (Ctrl-C) and enter the raw REPL, no soft reset.

        Ctrl-C is sent again (after 5 s, then every 2.5 s) until a prompt shows, up to
        ``interrupt_timeout`` (a program may catch one KeyboardInterrupt).
        """
        deadline = time.monotonic() + self.interrupt_timeout
        attempts = 0
        while True:
            attempts += 1
            if attempts == 2:
                self._unstick()
            self._write(b"\r\x03")
            if attempts == 1:
                self._drain()  # stale output: what main.py printed while nobody listened
            self._write(b"\r\x01")
            try:
                # A board still booting takes the first Ctrl-C late: wait longer for it.
                wait = RETRY_CTRL_C * (2 if attempts == 1 else 1)
                self._read_until(RAW_BANNER + b">", timeout=max(self.timeout, wait) + 1,
                                 overall=min(deadline, time.monotonic() + wait))
                break
            except LinkTimeout:
                if self._broken is not None:
                    raise
                if time.monotonic() > deadline:
                    if not self.bytes_received:
                        self._fail(LinkTimeout(
                            "nothing answers on %s (no MicroPython prompt after Ctrl-C for %.0f s): "
                            "is the board plugged in and running MicroPython? (a board in its "
                            "bootloader is silent too)" % (self.port_url, self.interrupt_timeout)))
                    failed = FailsAtStart.seen(self.port_url, bytes(self._rx), self.interrupt_timeout)
                    if failed:
                        self._fail(failed)
                    self._fail(NotSporadic(
                        "%s answers, but not as MicroPython does (no raw REPL after Ctrl-C for %.0f s; "
                        "it sent %r): is this the board's port, and does it run MicroPython?"
                        % (self.port_url, self.interrupt_timeout, bytes(self._rx[-40:]))))
        if attempts > 1:
            # Queued Ctrl-As of earlier attempts print more banners: wait for
            # the line to go quiet, then we sit at the last raw prompt.
            quiet_until = time.monotonic() + 0.3
            while time.monotonic() < quiet_until:
                if self._fill():
                    quiet_until = time.monotonic() + 0.3
            self._rx.clear()
        self._in_raw = True

    def _unstick(self):
        """A board cut off in the middle of a stream (``_sp_in``) blocks
        until its current window is whole, reading our Ctrl-C as data. Send
        filler one byte at a time until it answers (a window credit, or the
        digest failure once the stream is complete), then let it give up
        (STREAM_IDLE_MS): it is back at its raw prompt, and the filler it took
        fails the stream's digest, so nothing of it is ever used."""
        self._drain()
        for _ in range(FILLER):
            self._write(b" ")
            until = time.monotonic() + 0.01
            while not self._waiting() and time.monotonic() < until:
                time.sleep(0.0005)
            if self._waiting():
                break
        else:
            return  # not a stuck stream: on with Ctrl-C
        try:
            self._read_until(b"\x04>", overall=time.monotonic() + STREAM_IDLE_MS / 1000 + 1.5)
        except LinkTimeout:
            if self._broken is not None:
                raise
        self._rx.clear()

    def _paste(self, code):
        window = struct.unpack("<H", self._read_exact(2))[0]
        self._window = window
        if not self._send_credited(code, window, window, "board stopped reading raw-paste data",
                                   "during raw-paste"):
            del self._rx[0]  # its 0x04: the board stopped reading (compile error)
            self._write(b"\x04")
            return
        self._write(b"\x04")
        self._read_until(b"\x04")  # acknowledged (window bytes before it dropped)

    def _exec_raw(self, code, watch_reset=True, payload=None):
        """Run code (bytes) at the raw prompt; return (stdout, stderr) bytes.

        payload: bytes the code reads from stdin through ``_sp_in`` (raw-paste
        boards only), streamed under the board's flow control.
        """
        self._check()
        if not self._in_raw:
            self.enter_raw_repl()
        if self._raw_paste is not False:
            self._write(b"\x05A\x01")
            resp = self._read_exact(2)
            if resp == b"R\x01":
                self._raw_paste = True
                self._paste(code)
            else:
                if resp != b"R\x00":
                    # No raw-paste here: \x01 reset the raw REPL; its banner follows.
                    self._read_until(b"w REPL; CTRL-B to exit\r\n>")
                self._raw_paste = False
        if self._raw_paste is False:
            for i in range(0, len(code), 256):
                self._write(code[i:i + 256])
                time.sleep(0.01)  # boards without flow control on their UART
            self._write(b"\x04")
            ok = self._read_exact(2)
            if ok != b"OK":
                self._fail(LinkError("%s: board refused the command (%r)" % (self.port_url, ok)))
        complete = True
        if payload is not None:
            complete = self._stream(payload)
        out = self._read_until(b"\x04", watch_reset=watch_reset)[:-1]
        err = self._read_until(b"\x04", watch_reset=watch_reset)[:-1]
        self._read_until(b">")
        if not complete:
            self._resync()
        if payload is not None:
            out = out.lstrip(b"\x01")  # the board's last window credits
        return out, err

    def _stream(self, data):
        """Send data to ``_sp_in`` running on the board, at most two windows
        ahead of what it has consumed (as raw-paste does). False if the board
        stopped reading before the end (it raised)."""
        return self._send_credited(data, 0, 2 * self._window, "board stopped reading the data",
                                   "while sending data")

    def _send_credited(self, data, credit, first_grant, stalled, doing):
        """Send data under the board's flow control: each 0x01 it sends grants
        one more window; the first grants first_grant (with no credit yet, even
        empty data waits for it). Bytes that arrive are taken before each write.
        False if the board ended (0x04) before taking all of it."""
        window = self._window
        granted = credit > 0
        i = 0
        while i < len(data) or not granted:
            silent_until = time.monotonic() + self.timeout
            while credit == 0 or self._rx or self._waiting():
                if not self._rx:
                    if not self._fill():
                        if time.monotonic() > silent_until:
                            self._fail(LinkTimeout("%s: %s" % (self.port_url, stalled)))
                        continue
                    silent_until = time.monotonic() + self.timeout
                c = self._rx[0]
                if c == 0x04:  # the board's code ended: leave it to the caller
                    return i >= len(data)
                if c != 0x01:
                    self._fail(LinkError("%s: unexpected byte %r %s" % (self.port_url, bytes([c]), doing)))
                del self._rx[0]
                credit += window if granted else first_grant
                granted = True
                if i >= len(data):
                    return True
            piece = data[i:i + credit]
            self._write(piece)
            credit -= len(piece)
            i += len(piece)
        return True

    def _resync(self):
        """After a transfer cut short: clear what reached the raw REPL's line
        buffer and come back to a fresh raw prompt."""
        self._write(b"\x03")
        self._write(b"\r\x01")
        self._read_until(RAW_BANNER + b">")
        quiet_until = time.monotonic() + 0.2
        while time.monotonic() < quiet_until:
            if self._fill():
                quiet_until = time.monotonic() + 0.2
        self._rx.clear()

    def _run(self, code, payload=None):
        """Run code; return stdout bytes; raise LinkExecError on a board exception."""
        if isinstance(code, str):
            code = code.encode("utf-8")
        out, err = self._exec_raw(code, payload=payload)
        if err:
            raise LinkExecError(text(err), text(out))
        return out

    def exec(self, code):
        """Run code on the board; return what it printed (``\\r\\n`` read as ``\\n``)."""
        return text(self._run(code))

    def soft_reset(self):
        """Ctrl-D at the raw prompt: the board reboots (main.py does not run)
        and comes back to the raw REPL; modules are imported afresh."""
        self._check()
        if not self._in_raw:
            self.enter_raw_repl()
        self._write(b"\x04")
        self._onboard.clear()
        self._read_until(b"soft reboot\r\n")
        self._read_until(RAW_BANNER + b">")

    # -- leaving ------------------------------------------------------------------
    def resume(self):
        """Leave the raw REPL and soft-reset: the board reboots, main.py runs."""
        self._check()
        self._write(b"\r\x02")
        self._in_raw = False
        self._rebooted()
        try:
            self._read_until(b">>> ", timeout=min(self.timeout, 3.0))
        except LinkTimeout:
            pass
        self._broken = None
        self._write(b"\x04")
        try:
            self._read_until(b"soft reboot\r\n", timeout=min(self.timeout, 3.0))
        except LinkTimeout:
            pass
        self._broken = None

    def close(self, resume=True):
        """Let the board go: by default it reboots and runs main.py again."""
        if self._closed:
            return
        try:
            if resume and self._broken is None:
                self.resume()
        except LinkError:
            pass
        finally:
            self._close_port()

    def _close_port(self):
        self._closed = True
        close_port(self.serial)


def text(b):
    """Board output as text: UTF-8, its \\r\\n read as \\n."""
    return b.decode("utf-8", "replace").replace("\r\n", "\n")
