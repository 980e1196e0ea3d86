"""What any link to a board can do (model: mpremote's transport.py).

A link moves requests and files; it never knows the sync verbs, and the verbs
never touch bytes. Every link counts every byte it puts on or takes off the
wire, protocol overhead (REPL prompts, framing, encodings) included, so that
a sync can report what it really cost.

    link.call(request)        one request/response of the sync protocol (text)
    link.exec(code)           run code on the board, return what it printed
    link.put_file(path, data) write a whole file (atomically where possible)
    link.get_file(path)       read a whole file
    link.close()              let the board go back to what it was doing

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
    AuthRefused      the board refused our proof, or could not prove itself
"""

__all__ = ["Link", "LinkError", "LinkClosed", "LinkTimeout", "LinkReset", "LinkExecError",
           "PortUnavailable", "LinkRefused", "NotSporadic", "AuthRefused"]


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


class AuthRefused(LinkError):
    """The handshake failed: the board refused our proof of its secret, or
    it could not prove it holds the key we hold for it."""


class LinkTimeout(LinkError):
    """The board stayed silent longer than the link's timeout."""


class LinkReset(LinkError):
    """The board rebooted while a request was running."""


class LinkExecError(LinkError):
    """Code run on the board raised; ``traceback`` is the board's text."""

    def __init__(self, traceback, output=""):
        self.traceback = traceback
        self.output = output
        last = traceback.strip().splitlines()[-1:] or [""]
        super().__init__("board raised: " + last[0])


class Link:
    """Abstract link. Subclasses implement the methods; counters are shared.

    ``bytes_sent`` / ``bytes_received``: every byte written to / read from the
    wire since the link was opened (or ``reset_counters()``).
    ``progress``: optional callable ``progress(bytes_sent, bytes_received)``
    called as bytes move (for a progress bar); keep it cheap.
    """

    bytes_sent = 0
    bytes_received = 0
    progress = None

    def call(self, request: str) -> str:
        raise NotImplementedError

    def exec(self, code: str) -> str:
        raise NotImplementedError("this link cannot run code")

    def put_file(self, path: str, data: bytes) -> None:
        raise NotImplementedError

    def get_file(self, path: str) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        pass

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
