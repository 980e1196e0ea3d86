"""A TCP link to a board (Wi-Fi): the same requests as the serial link,
framed and authenticated as firmware/sporadic/net/wire.py says (docs/wifi.md).

    TcpLink(host, port=7370, secret=None, fleet_key=None, me='companion', timeout=10)
        .call(request) -> response      bytes counted (framing and handshake included)

A Link (link/base.py) in full; not a ReplLink: a board runs no code and
takes no file over TCP (deploy is serial).

The companion speaks as ``companion`` and proves it with the board's own
per-device secret (``secret``: hex text, or a callable board_id -> hex text,
None in an insecure fleet); a board checks it before it answers ``T`` (set
the clock) or ``A`` (acknowledge the outbox). ``me`` other than 'companion'
speaks as a fleet peer with ``fleet_key`` (tests, tools).

make_server(handle, secret_for, port) and serve(server, until) are the
listening end, so that boards that wake up sync to the companion (a sleeping
board cannot be reached): each board authenticates with its own secret.
What answers them (the fleet's lines, recon.Responder) is the sync layer's:
syncer.fleet_server, run by `companion serve`.
"""
import binascii
import socket
import time

from sporadic.net import peer, server, wire
from companion.link.base import Link, LinkError, LinkClosed, LinkTimeout, LinkRefused, NotSporadic, AuthRefused

PORT = wire.PORT


def _unhex(s):
    return binascii.unhexlify(s) if s else None


def _open_error(where, e, asked, timeout):
    """The LinkError for a connection or hello that failed (peer.PeerLink
    raises OSError, with the peer's words for a refused handshake: 'refused:
    ERR ...', 'peer failed authentication', 'not a sporadic peer: ...')."""
    if isinstance(e, socket.timeout):
        return LinkTimeout('nothing answers at %s (no sporadic hello in %.0f s): is the board awake '
                           'and on this network?' % (where, timeout))
    if isinstance(e, ConnectionRefusedError):
        return LinkRefused('nothing listens at %s (connection refused): is the board on, and is %s its '
                           'sync port (companion deploy --sync-port)?' % (where, where.rpartition(':')[2]))
    if isinstance(e, socket.gaierror):
        return LinkClosed('cannot reach %s: no such host (%s)' % (where, e.strerror or e))
    text = str(e)
    if isinstance(e, UnicodeError):
        text = 'garbage from peer'
    board = asked.get('id')
    if text.startswith('refused: ERR auth'):
        if not asked.get('key'):
            return AuthRefused('%s (board %s) refused this companion: the fleet holds no secret for %s '
                               '(it was deployed by another fleet, or the fleet folder is not the right one)'
                               % (where, board, board))
        return AuthRefused('%s (board %s) refused this companion\'s proof: the board holds another secret '
                           '(deployed by another fleet, or since redeployed): run `companion deploy` for it'
                           % (where, board))
    if text.startswith('peer failed authentication'):
        return AuthRefused('%s (board %s) could not prove it holds the secret this fleet keeps for %s: '
                           'not this fleet\'s board, or someone else answers there' % (where, board, board))
    if text.startswith(('not a sporadic peer', 'garbage from peer')):
        return NotSporadic('%s answers, but not as a sporadic board (%s)' % (where, text))
    if text.startswith('refused: '):
        return LinkError('%s refused the connection: %s' % (where, text[9:]))
    return LinkClosed('%s: %s' % (where, text))


class TcpLink(Link):
    """A board's sync server over TCP (or a fleet peer's: me, fleet_key)."""

    def __init__(self, host, port=PORT, secret=None, fleet_key=None, me=wire.COMPANION, timeout=10.0,
                 max_resp=1 << 24):
        self.host = host
        self.port = int(port)
        self.bytes_sent = 0
        self.bytes_received = 0

        asked = {}

        def keyfor(board_id):
            asked['id'] = board_id
            if me == wire.COMPANION:
                s = secret(board_id) if callable(secret) else secret
                asked['key'] = bool(s)
                return _unhex(s)
            asked['key'] = bool(fleet_key)
            return _unhex(fleet_key)
        where = '%s:%d' % (host, self.port)
        try:
            self._p = peer.PeerLink(me, host, self.port, keyfor, int(timeout * 1000), max_resp)
        except (OSError, UnicodeError) as e:
            err = _open_error(where, e, asked, timeout)
            err.at_open = True
            raise err from None
        self.board = self._p.peer
        self._sync_counts()

    def _sync_counts(self):
        ds = self._p.bytes_sent - self.bytes_sent
        dr = self._p.bytes_received - self.bytes_received
        self._count(ds, dr)

    def call(self, request, stream=False):
        """One request; the answer comes whole in one frame (stream_answers
        is False: stream changes nothing here)."""
        try:
            return self._p.call(request)
        except socket.timeout as e:
            raise LinkTimeout('%s:%d: timed out (%s)' % (self.host, self.port, e))
        except OSError as e:
            raise LinkClosed('%s:%d: %s' % (self.host, self.port, e))
        except UnicodeError as e:
            raise LinkError('%s:%d: garbage (%s)' % (self.host, self.port, e))
        finally:
            self._sync_counts()

    def reset_counters(self):
        Link.reset_counters(self)
        self._p.bytes_sent = 0
        self._p.bytes_received = 0

    def soft_reset(self):
        """Nothing to do: the board answers from its running loop, whose
        sync server has its heap to itself."""

    def close(self):
        self._p.close()


# -- the listening end: boards that wake up sync to the companion -------------------


def make_server(handle, secret_for, port=PORT, bind='0.0.0.0'):
    """A server.Server (the board's own sync server) answering each board's requests with handle(request).
    secret_for(board_id): the board's hex secret, '' for a board not known
    (its hello cannot verify), None for no authentication (an insecure
    fleet). Raises OSError when the port cannot be bound."""

    def keyfor(board_id):
        s = secret_for(board_id)
        if s is None:
            return None
        # an unknown board gets a key no board holds: its hello cannot verify
        return _unhex(s) if s else b'\x00unknown' + board_id.encode()

    return server.Server(wire.COMPANION, handle, port, bind, keyfor)


def serve(srv, until=None):
    """Answer boards until the time.time() `until` (None: forever)."""
    # CPython's poll answers file descriptors; the server's event() takes sockets
    while until is None or time.time() < until:
        for fd, ev in srv.poller.poll(200):
            for s in [srv.sock] + [c.sock for c in srv.conns]:
                if s.fileno() == fd:
                    srv.event(s, ev)
                    break
        srv.expire()
