"""What any link to a board can do (model: mpremote's transport.py).

A link moves requests and files; it never knows the sync verbs, and the verbs
never touch bytes. Every link counts every byte it puts on or takes off the
wire, protocol overhead (REPL prompts, framing, encodings) included, so that
a sync can report what it really cost.

Two interfaces, each honoured in full by the links that claim it:

Link: what a sync uses (sync/syncer.py), every link (serial, TCP):
    link.call(request, stream=False)  one request/response of the sync protocol (text);
                              stream: the answer may come as the board makes it,
                              where the link can (stream_answers); else whole
    link.stream_answers       True: call(req, stream=True) takes a whole
                              reconciliation node in one answer (recondrv.WHOLE)
    link.soft_reset()         before a sync: the board's main loop stopped and its
                              heap fresh for the sync (serial: Ctrl-D in the raw
                              REPL); a link whose board answers from its running
                              loop (TCP) has nothing to do
    link.own_heap             True: after soft_reset the sync has the board's heap
                              to itself, no loop beside it (serial)
    link.bytes_sent, link.bytes_received, link.progress, link.reset_counters()
    link.close()              let the board go back to what it was doing

ReplLink(Link): what a deploy uses besides (a board's REPL: serial only):
    link.exec(code)           run code on the board, return what it printed
    link.put_file(path, data) write a whole file (atomically where possible)
    link.get_file(path)       read a whole file

(link/mqtt.py's BrokerLink is neither: it carries messages to and from a
broker, where no board answers a request; sync/mqtt.py drives it.)

Errors: every failure of the link itself (cable pulled, board reset or
silent, garbage on the line) raises ``LinkError`` or a subclass; an exception
raised *on the board* by the code a link ran raises ``LinkExecError`` with
the board's traceback. Nothing a link does hangs without a timeout.

A link's message says what happened in words a user can act on, the port or
address first; the verbs turn a LinkError into a UserError (one line), and the
subclass tells them what happened when they need to know:

    PortUnavailable  the port cannot be opened: no such port, busy, no permission
    LinkRefused      nothing listens at the TCP address
    LinkTimeout      nothing answers (no MicroPython REPL, no sporadic peer)
    NotSporadic      something answers, but not sporadic (plain MicroPython, another program)
    FailsAtStart     MicroPython answers, but what it runs at start fails again and again
    AuthRefused      the board refused our proof, or could not prove itself
"""
import re

__all__ = ["Link", "ReplLink", "LinkError", "LinkClosed", "LinkTimeout", "LinkReset", "LinkExecError",
           "PortUnavailable", "LinkRefused", "NotSporadic", "FailsAtStart", "AuthRefused"]


class LinkError(Exception):
    """The link failed: the request may or may not have run on the board.
    ``at_open``: it failed while the link was being opened (nothing was done)."""

    at_open = False


class LinkClosed(LinkError):
    """The line went away (cable pulled, port closed, board process gone)."""


class PortUnavailable(LinkClosed):
    """The port cannot be opened; ``reason`` is 'no such port', 'busy' or
    'permission denied' (or the system's words for anything else)."""

    def __init__(self, message, reason=None):
        super().__init__(message)
        self.reason = reason


class LinkRefused(LinkClosed):
    """Nothing listens at the address (connection refused)."""


class NotSporadic(LinkError):
    """Something answers on the line, but it does not run sporadic."""


# the last line of a MicroPython traceback: "MemoryError: memory allocation failed, ..."
ERROR_LINE = re.compile(rb'(?:^|[\r\n])([A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception)(?:: [^\r\n]*)?)\r?\n')


class FailsAtStart(LinkError):
    """The board runs MicroPython, but what it runs at start fails over and
    over (it restarts before it takes Ctrl-C)."""

    @classmethod
    def seen(cls, port, printed, seconds):
        """The error when what a board printed while it was interrupted
        holds an exception's last line twice or more (a main.py out of
        memory resets the board: sporadic/device/boot.py), else None."""
        found = ERROR_LINE.findall(printed)
        if len(found) < 2:
            return None
        last = found[-1].decode('utf-8', 'replace')[:120]
        return cls('%s runs MicroPython, but what it runs as it starts failed %d times in %.0f s (%s), and it '
                   'restarts before it takes Ctrl-C%s' % (port, len(found), seconds, last,
                   ': its heap is too small for what is on it' if last.startswith('MemoryError') else ''))


class AuthRefused(LinkError):
    """The handshake failed: the board refused our proof of its secret, or
    it could not prove it holds the key we hold for it."""


class LinkTimeout(LinkError):
    """The board stayed silent longer than the link's timeout."""


class LinkReset(LinkError):
    """The board rebooted while a request was running."""


class LinkExecError(LinkError):
    """Code run on the board raised; ``traceback`` is the board's text,
    ``raised`` its last line (``MemoryError: ...``)."""

    def __init__(self, traceback, output=""):
        self.traceback = traceback
        self.output = output
        self.raised = (traceback.strip().splitlines()[-1:] or [""])[0]
        super().__init__("board raised: " + self.raised)


class Link:
    """What every link does (the module docstring says each method's part).
    Subclasses implement call, soft_reset and close; counters are shared.

    ``bytes_sent`` / ``bytes_received``: every byte written to / read from the
    wire since the link was opened (or ``reset_counters()``).
    ``progress``: optional callable ``progress(bytes_sent, bytes_received)``
    called as bytes move (for a progress bar); keep it cheap.
    """

    bytes_sent = 0
    bytes_received = 0
    progress = None
    stream_answers = False
    own_heap = False

    def call(self, request: str, stream: bool = False) -> str:
        raise NotImplementedError

    def soft_reset(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def reset_counters(self):
        self.bytes_sent = 0
        self.bytes_received = 0

    def _count(self, sent=0, received=0):
        self.bytes_sent += sent
        self.bytes_received += received
        if self.progress is not None and (sent or received):
            self.progress(self.bytes_sent, self.bytes_received)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ReplLink(Link):
    """A link to a board's REPL: code and files besides the requests."""

    def exec(self, code: str) -> str:
        raise NotImplementedError

    def put_file(self, path: str, data: bytes) -> None:
        raise NotImplementedError

    def get_file(self, path: str) -> bytes:
        raise NotImplementedError
