"""A serial line to a MicroPython board, driven through its raw REPL.

``SerialLink(port_url)`` opens ``port_url`` with pyserial (URLs such as
``/dev/ttyUSB0``, ``/dev/pts/N``, ``COM3``, ``socket://host:port``; opened
exclusively), interrupts whatever the board runs (Ctrl-C; main.py stops,
also inside ``time.sleep``; Ctrl-C is repeated if a program swallows one)
and enters the raw REPL *without* a soft reset, so nothing on the board
restarts.

The raw-REPL protocol is wholly ours, not mpremote's: mpremote's
``SerialTransport`` reads a byte per call with a 10 ms sleep when the line is
idle, waits without a deadline for raw-paste's window bytes, returns from a
silence timeout without saying so and has one error type, where this link
must read in bulk (a full sync is ~670 KB), give up on a silent board after
``timeout`` (while a board at work keeps it alive with 0x06 bytes), and fail
with the LinkError subclass that says what happened. mpremote stays the
user's tool (and the benches' yardstick) on the same line.

Board-side code is in ``companion/link/onboard/*.py`` (real files, compiled by
mpy-cross in the tests), read as text and sent with comment lines dropped
and indentation shrunk (``onboard_code``); each defines its ``_sp_*``
helpers once per boot of the board, in the raw REPL's globals.

Requests. ``call(request)`` is one raw-REPL execution of onboard/request.py
(or request_repr.py) with ``REQUEST`` replaced by ``repr(request)`` (a
Python ``str`` literal); ``syncsrv.h(req: str) -> str`` is the device end of
sync. In the repr form the board prints the ``repr`` of the response on one
line, so the response crosses the line exactly whatever the board does to
newlines (boards print ``\r\n``); the last line of the output is parsed
with ``ast.literal_eval``. Requests longer than ``stream_threshold`` (2 KiB)
are streamed instead (below), as ``_sp_req(n, window, sha256)``. Anything
raised on the board comes back as ``LinkExecError`` with the board's
traceback.

Streamed answers (``call(request, stream=True)``, ``syncsrv.w``): the board
writes STX, the answer as it makes it, ETX. While it works (a pass over its
job file, a compaction) it writes a keep-alive byte (0x06) each time it
feeds its watchdog (every 64 lines read); they are dropped from the answer,
and each one restarts the silence timeout: a slow board with a large file
is waited for as long as it works, a silent one is given up after
``timeout``.

Streams (big requests, files over 2 KiB). One execution reads the raw bytes
from stdin with Ctrl-C off, under the same flow control as raw-paste: the
board grants two windows (its raw-paste window, 128 bytes on most ports) and
one more each time it has consumed one, so no UART buffer overflows. The
SHA-256 of the stream is checked on the board before the data is used: a
cut, or the filler a reconnecting companion sends to unstick a board left
mid-stream, is never taken for data. A board whose companion vanished gives
up after 1.5 s of silence and is back at its raw prompt. Needs raw-paste,
``select.poll`` and ``hashlib.sha256`` (every current port); without them
files go as one execution per ``chunk_size`` bytes. (onboard/stream_in.py)

Files. ``put_file`` writes ``PATH.part`` (parent folders made) and renames it
over ``PATH`` once complete and checked by size: a pulled cable leaves the
old file whole (onboard/put_file.py). Small files go in one execution as a
``repr`` or base64 literal, whichever is shorter. ``get_file`` runs one loop
on the board (onboard/get_file.py) that
prints the file in 1.5 KiB lines, each as ``repr`` (text) or base64
(binary), whichever is shorter, between its size and its SHA-256. Stray
lines a board prints meanwhile (a finalizer's complaint) are ignored.

``soft_reset()`` is Ctrl-D in the raw REPL: the board reboots without
running main.py and comes back to the raw REPL (fresh heap, modules reloaded).
``close()`` (and ``resume()``) leaves the raw REPL (Ctrl-B) and soft-resets
from the friendly REPL (Ctrl-D): the board reboots and main.py runs again,
as after any interruption; ``close(resume=False)`` just lets go of the port.

Bytes are counted by wrapping the serial object's ``read``/``write``: every
byte on the wire, REPL prompts, flow control and encodings included.
Failures raise ``LinkError`` subclasses (see transport.py), never hang: every
wait has a silence timeout (``timeout``, 20 s) or a deadline. After a
``LinkError`` other than ``LinkExecError`` the link refuses further use;
open a new one.
"""

import ast
import base64
import errno
import hashlib
import os
import re
import struct
import time

import serial

from .base import (Link, LinkClosed, LinkError, LinkExecError, LinkReset, LinkTimeout,
                        NotSporadic, PortUnavailable)

__all__ = ["SerialLink", "ports_seen", "describe_ports", "board_ports", "choose_port", "open_failure",
           "onboard_source", "onboard_code"]

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
            text = line.lstrip(" ")
            if not text or text.startswith("#"):
                continue
            depth, rest = divmod(len(line) - len(text), 4)
            if rest:
                raise ValueError("onboard/%s.py: indentation not a multiple of 4: %r" % (name, line))
            out.append(" " * depth + text)
        code = _onboard_cache[name] = "\n".join(out) + "\n"
    return code


def _onboard_request(name, request_expr):
    head, marker, tail = onboard_code(name).partition("REQUEST")
    assert marker, name
    return head + request_expr + tail

RAW_BANNER = b"raw REPL; CTRL-B to exit\r\n"
# Output that means the board rebooted under a running request.
_RESET_SIGNS = (b"soft reboot\r\n", RAW_BANNER, b'Type "help()" for more information.')
_POLL = 0.05  # serial read timeout: the granularity of every wait
# a board streaming data in gives up after this much silence (stream_in.py)
STREAM_IDLE_MS = int(re.search(r"^_IDLE_MS = const\((\d+)\)$", onboard_source("stream_in"), re.M).group(1))
RETRY_CTRL_C = 2.5  # seconds between Ctrl-C attempts (> STREAM_IDLE_MS)
FILLER = 256  # at most this many filler bytes to unstick a cut-off stream (>= a window)


# -- which port ---------------------------------------------------------------

# USB vendor ids of the boards sporadic runs on and of the USB-serial bridges
# on their development boards (the USB ID repository, http://www.linux-usb.org/usb.ids):
# MicroPython's own USB CDC on the RP2040 enumerates as 2E8A (Raspberry Pi),
# an ESP32-S3/S2/C3's native USB as 303A (Espressif); other ESP boards sit
# behind a CP210x (10C4), a CH340/CH9102 (1A86) or an FTDI chip (0403).
BOARD_VIDS = {0x2E8A: "Raspberry Pi", 0x303A: "Espressif", 0x10C4: "Silicon Labs CP210x",
              0x1A86: "QinHeng CH340/CH9102", 0x0403: "FTDI"}


def ports_seen():
    """The serial ports this machine has (pyserial's list_ports), by name."""
    try:
        from serial.tools import list_ports
        return sorted(list_ports.comports(), key=lambda p: p.device)
    except Exception:  # a platform pyserial cannot list on: no names to offer
        return []


def describe_ports(ports, limit=6):
    """'/dev/ttyACM0 "Board in FS mode", /dev/ttyS0' (or 'none')."""
    if not ports:
        return "none"
    out = []
    for p in ports[:limit]:
        d = p.description if p.description and p.description not in ("n/a", p.device, p.name) else ""
        out.append('%s "%s"' % (p.device, d) if d else p.device)
    if len(ports) > limit:
        out.append("%d more" % (len(ports) - limit))
    return ", ".join(out)


def board_ports(ports=None):
    """The ports that look like a MicroPython board: a USB vendor id of BOARD_VIDS."""
    ports = ports_seen() if ports is None else ports
    return [p for p in ports if p.vid in BOARD_VIDS]


def choose_port(ports=None):
    """The one port that looks like a board; PortUnavailable when there are
    none or several (the message lists them)."""
    ports = ports_seen() if ports is None else ports
    boards = board_ports(ports)
    if len(boards) == 1:
        return boards[0].device
    if not boards:
        raise PortUnavailable("no port given, and no USB serial port looks like a MicroPython board "
                              "(ports seen: %s): plug the board in, or give its port" % describe_ports(ports),
                              "no board")
    raise PortUnavailable("no port given, and %d USB serial ports look like boards (%s): give one"
                          % (len(boards), describe_ports(boards)), "several boards")


def open_failure(port, exc=None):
    """A PortUnavailable saying why ``port`` does not open: no such port (with
    the ports this machine has), busy (another program holds it: pyserial's
    exclusive lock), no permission. ``exc``: the error opening it raised, if
    known; otherwise the port is opened once more (exclusively) to learn it."""
    if exc is None:
        try:
            probe = serial.serial_for_url(port, do_not_open=True, exclusive=True)
            probe.open()
            probe.close()
            exc = OSError("it did not open, then it did (unplugged and plugged back?): try again")
        except (serial.SerialException, OSError, ValueError) as e:
            exc = e
    code = getattr(exc, "errno", None)
    text = str(exc)
    if code in (errno.ENOENT, errno.ENODEV, errno.ENXIO) or "FileNotFoundError" in text:
        return PortUnavailable("cannot open %s: no such port (ports seen: %s)" % (port, describe_ports(ports_seen())),
                               "no such port")
    if code in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EBUSY) or "Access is denied" in text:
        return PortUnavailable("cannot open %s: busy: another program holds it (a serial monitor, "
                               "mpremote, Thonny, another companion): close it and try again" % port, "busy")
    if code in (errno.EACCES, errno.EPERM) or "PermissionError" in text:
        return PortUnavailable("cannot open %s: permission denied (on Linux join the dialout group: "
                               "sudo usermod -aG dialout $USER, then log in again)" % port, "permission denied")
    why = getattr(exc, "strerror", None) or text
    return PortUnavailable("cannot open %s: %s" % (port, why), why)


def _at_open(e):
    e.at_open = True
    return e


class _CountingSerial:
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


class SerialLink(Link):
    """A board on a serial line (see the module docstring for the protocol).

    port_url: anything pyserial opens; baud: line speed (ignored by USB CDC
    and ptys); timeout: seconds of silence after which a request fails with
    LinkTimeout (a board that does not answer never hangs the companion);
    interrupt_timeout: how long Ctrl-C may take to reach a prompt;
    chunk_size: bytes per file chunk (lower it for boards with little RAM);
    """

    stream_threshold = 2048  # requests and files above this many bytes are streamed
    stream_answers = True    # answers come framed as they are made (syncsrv.w)

    def __init__(self, port_url, baud=115200, timeout=20.0, interrupt_timeout=15.0,
                 chunk_size=4096):
        self.port_url = port_url
        self.timeout = timeout
        self.interrupt_timeout = interrupt_timeout
        self.chunk_size = chunk_size
        self.bytes_sent = 0
        self.bytes_received = 0
        self._rx = bytearray()
        self._raw_paste = None  # unknown until the first execution
        self._window = 128  # the board's raw-paste flow-control window
        self._onboard = set()  # onboard/*.py defined on the board since it booted
        self._streams = None  # the board can take streams (None: not known yet)
        self._binascii = None
        self._in_raw = False
        self._broken = None
        self._closed = False
        try:
            self.serial = _open_port(port_url, baud)
        except (serial.SerialException, OSError, ValueError) as e:
            raise _at_open(open_failure(port_url, e)) from None
        self._ser = _CountingSerial(self.serial, self)
        try:
            self.enter_raw_repl()
        except LinkError as e:
            e.at_open = True
            self._close_port()
            raise
        except BaseException:
            self._close_port()
            raise

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
        """Read what the line has (waiting at most _POLL); return the count."""
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
                for sign in _RESET_SIGNS:
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
        hdr = self._read_exact(2)
        window = struct.unpack("<H", hdr)[0]
        self._window = window
        remain = window
        i = 0
        while i < len(code):
            silent_until = time.monotonic() + self.timeout
            while remain == 0 or self._rx or self._waiting():
                if not self._rx:
                    if not self._fill():
                        if time.monotonic() > silent_until:
                            self._fail(LinkTimeout("%s: board stopped reading raw-paste data" % self.port_url))
                        continue
                b = self._rx[0]
                del self._rx[0]
                if b == 0x01:
                    remain += window
                elif b == 0x04:  # the board stopped reading (compile error)
                    self._write(b"\x04")
                    return
                else:
                    self._fail(LinkError("%s: unexpected byte %r during raw-paste" % (self.port_url, bytes([b]))))
            piece = code[i:i + remain]
            self._write(piece)
            remain -= len(piece)
            i += len(piece)
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
        w = self._window
        credit, i, started = 0, 0, False
        while i < len(data) or not started:
            silent_until = time.monotonic() + self.timeout
            while credit == 0 or self._rx or self._waiting():
                if not self._rx:
                    if not self._fill():
                        if time.monotonic() > silent_until:
                            self._fail(LinkTimeout("%s: board stopped reading the data" % self.port_url))
                        continue
                    silent_until = time.monotonic() + self.timeout
                c = self._rx[0]
                if c == 0x01:
                    del self._rx[0]
                    credit += w if started else 2 * w
                    started = True
                elif c == 0x04:  # the board's code ended: leave it to the caller
                    return i >= len(data)
                else:
                    self._fail(LinkError("%s: unexpected byte %r while sending data"
                                         % (self.port_url, bytes([c]))))
                if started and i >= len(data):
                    break
            if i < len(data):
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

    def _define(self, name):
        """Run companion/link/onboard/NAME.py on the board once per boot (its
        definitions stay in the raw REPL's globals until a reboot)."""
        if name not in self._onboard:
            self._run(onboard_code(name))
            self._onboard.add(name)

    def _streaming(self):
        """True when this board can take streamed data (onboard/stream_in.py
        defined): it has raw-paste, select.poll and hashlib.sha256."""
        if self._raw_paste is None:
            self._run(b"0")  # learn whether the board has raw-paste
        if not self._raw_paste or self._streams is False:
            return False
        try:
            self._define("stream_in")
        except LinkExecError:
            self._streams = False  # no hashlib: files go in chunks
            return False
        self._streams = True
        return True

    def _stream_args(self, data):
        """``n,w,digest`` for _sp_in / _sp_req."""
        return "%d,%d,%r" % (len(data), self._window, hashlib.sha256(data).digest())

    def _run(self, code, payload=None):
        """Run code; return stdout bytes; raise LinkExecError on a board exception."""
        if isinstance(code, str):
            code = code.encode("utf-8")
        out, err = self._exec_raw(code, payload=payload)
        if err:
            raise LinkExecError(_text(err), _text(out))
        return out

    def exec(self, code):
        """Run code on the board; return what it printed (``\\r\\n`` read as ``\\n``)."""
        return _text(self._run(code))

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

    # -- requests -------------------------------------------------------------
    def call(self, request, stream=False):
        """One request. stream=True: the answer comes framed as the board
        makes it (syncsrv.w), for answers that never hold bytes 0x02-0x04
        (the reconciliation's: printable ASCII); otherwise as a repr.
        NotSporadic when the board has no sync server to import."""
        try:
            return self._call(request, stream)
        except LinkExecError as e:
            last = e.traceback.strip().splitlines()[-1:] or [""]
            if last[0].startswith("ImportError") and "sporadic" in last[0]:
                raise NotSporadic("%s runs MicroPython, but not sporadic (%s): put it on with "
                                  "`companion deploy %s`" % (self.port_url, last[0], self.port_url)) from None
            raise

    def _call(self, request, stream):
        raw = request.encode("utf-8")
        if stream and self.stream_answers:
            # The board writes the answer between STX and ETX as it makes it
            # (syncsrv.w): no repr, no answer held whole in the board's RAM.
            try:
                if len(raw) > self.stream_threshold and self._streaming():
                    code = _onboard_request("request", "_sp_req(%s)" % self._stream_args(raw))
                    out = _text(self._run(code, payload=raw))
                else:
                    out = _text(self._run(_onboard_request("request", repr(request))))
            except LinkExecError as e:
                if "'w'" not in e.traceback:
                    raise
                self.stream_answers = False   # older firmware: the repr form below
            else:
                start = out.rfind("\x02")
                end = out.find("\x03", start + 1)
                if start < 0 or end < 0:
                    self._fail(LinkError("%s: no framed answer to a request (board printed %r)"
                                         % (self.port_url, out[-80:])))
                # the board's keep-alive bytes (syncsrv.KEEPALIVE: it is at
                # work; each one restarted the silence timeout) are no part of it
                return out[start + 1:end].replace("\x06", "")
        if len(raw) > self.stream_threshold and self._streaming():
            code = _onboard_request("request_repr", "_sp_req(%s)" % self._stream_args(raw))
            out = _text(self._run(code, payload=raw))
        else:
            out = _text(self._run(_onboard_request("request_repr", repr(request))))
        # The answer is the last line that is a string literal: anything else
        # the board printed (h's own prints, a finalizer's complaint) is not.
        lines = [ln.strip() for ln in out.split("\n")]
        lines = [ln for ln in lines if ln[:1] in ("'", '"') or ln[:2] in ("b'", 'b"')]
        if not lines:
            self._fail(LinkError("%s: no answer to a request (board printed %r)" % (self.port_url, out[-80:])))
        try:
            value = ast.literal_eval(lines[-1])
        except (ValueError, SyntaxError):
            self._fail(LinkError("%s: garbled answer %r" % (self.port_url, lines[-1][:80])))
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8")
        if not isinstance(value, str):
            self._fail(LinkError("%s: answer is not text: %r" % (self.port_url, type(value))))
        return value

    # -- files ------------------------------------------------------------------
    def _has_binascii(self):
        if self._binascii is None:
            out = self.exec("try:\n import binascii\n print(1)\nexcept ImportError:\n print(0)\n")
            self._binascii = out.strip().endswith("1")
        return self._binascii

    def _literal(self, chunk):
        """A Python expression for chunk, shortest on the wire: repr, or
        base64 through ``_sp_d`` (binascii.a2b_base64) when shorter."""
        lit = repr(chunk)
        if len(lit) > len(chunk) * 4 // 3 + 16 and self._has_binascii():
            return "_sp_d(b'%s')" % base64.b64encode(chunk).decode("ascii")
        return lit

    def put_file(self, path, data):
        """Write ``data`` to ``path`` on the board: parents made, written to
        ``path.part`` then renamed over ``path`` (a cut leaves the old file
        whole), size checked. Big files are streamed raw under the board's
        flow control; small ones go in one execution."""
        data = bytes(data)
        if len(data) > self.stream_threshold and self._streaming():
            self._define("put_file")
            out = self._run("_sp_put_in(%r,%s)" % (path, self._stream_args(data)), payload=data)
        elif len(data) <= self.chunk_size:
            lit = self._literal(data)
            self._define("put_file")
            out = self._run("_sp_put(%r,%s)" % (path, lit))
        else:  # a board without raw-paste: one execution per chunk
            self._define("put_file")
            self._run("_sp_f=_sp_open(%r)" % path)
            n = max(1, int(self.chunk_size))
            for i in range(0, len(data), n):
                self._run("_sp_f.write(%s)" % self._literal(data[i:i + n]))
            out = self._run("_sp_f.close()\ndel _sp_f\n_sp_done(%r)" % path)
        size = [ln.strip() for ln in _text(out).split("\n") if ln.strip().isdigit()][-1:]
        if size != [str(len(data))]:
            self._fail(LinkError("%s: %s has %s bytes on the board, %d sent"
                                 % (self.port_url, path, size[0] if size else "?", len(data))))

    def get_file(self, path):
        """The bytes of ``path`` on the board (FileNotFoundError if absent).

        The board prints ``#SIZE``, then each chunk on a line of its own as
        ``b'...'`` (repr, for text) or ``:BASE64`` (binary), whichever is
        shorter, then ``=SHA256HEX`` when it has hashlib. Other lines (a
        finalizer's complaint, say: boards print those to stdout too) are
        ignored; size and digest are checked."""
        # repr of binary is up to 4x its size: keep the board's peak small.
        n = max(3, min(int(self.chunk_size), 1536) // 3 * 3)
        self._define("get_file")
        code = "_sp_get(%r,%d)" % (path, n)
        try:
            out = self._run(code)
        except LinkExecError as e:
            if "ENOENT" in e.traceback or "Errno 2" in e.traceback:
                raise FileNotFoundError(path) from None
            raise
        size, digest, parts = None, None, []
        try:
            for ln in out.split(b"\n"):
                ln = ln.strip()
                if ln[:2] in (b"b'", b'b"'):
                    parts.append(ast.literal_eval(ln.decode("ascii")))
                elif ln[:1] == b":":
                    parts.append(base64.b64decode(ln[1:], validate=True))
                elif ln[:1] == b"#" and ln[1:].isdigit() and size is None:
                    size = int(ln[1:])
                elif ln[:1] == b"=" and len(ln) == 65:
                    digest = ln[1:].decode("ascii")
        except (ValueError, SyntaxError, UnicodeDecodeError) as e:
            self._fail(LinkError("%s: garbled file data for %s: %s" % (self.port_url, path, e)))
        data = b"".join(parts)
        if size is None or len(data) != size:
            self._fail(LinkError("%s: %s: got %d bytes of %s" % (self.port_url, path, len(data), size)))
        if digest is not None and hashlib.sha256(data).hexdigest() != digest:
            self._fail(LinkError("%s: %s: digest mismatch" % (self.port_url, path)))
        return data

    # -- leaving ------------------------------------------------------------------
    def resume(self):
        """Leave the raw REPL and soft-reset: the board reboots, main.py runs."""
        self._check()
        self._write(b"\r\x02")
        self._in_raw = False
        self._onboard.clear()
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
        _close_port(self.serial)

    def __repr__(self):
        return "SerialLink(%r)" % self.port_url


def _open_port(url, baud):
    """The port, opened exclusively (pyserial's lock: a second program gets
    'busy'). A CP210x on Windows toggles DTR and RTS apart when opened after
    a power-on, which resets an ESP board: open with both low, then raise
    them together (as mpremote's SerialTransport does)."""
    ser = serial.serial_for_url(url, do_not_open=True, baudrate=baud, exclusive=True,
                                timeout=_POLL, inter_byte_timeout=None)
    if os.name == "nt" and _port_vid(url) == 0x10C4:
        ser.dtr = False
        ser.rts = False
        ser.open()
        ser.dtr = True
        ser.rts = True
    if not ser.is_open:
        ser.open()
    return ser


def _port_vid(url):
    for p in ports_seen():
        if p.device == url:
            return p.vid
    return None


def _close_port(ser):
    """Let go of the port; DTR and RTS go low first in that order, so that
    the driver's own drop of them on close does not reset an ESP board."""
    try:
        ser.rts = False
        ser.dtr = False
    except (serial.SerialException, OSError, ValueError):
        pass  # a pty or socket:// has no modem lines
    try:
        ser.close()
    except (serial.SerialException, OSError):
        pass


def _text(b):
    return b.decode("utf-8", "replace").replace("\r\n", "\n")
