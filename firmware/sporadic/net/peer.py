# The client end of a connection (PeerLink): what a board syncing a peer, and the companion, talk through.
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import socket

from sporadic.net import wire
from sporadic.net.wire import ticks_ms, ticks_diff, TIMED_OUT

MAX_RESP = const(32768)    # bytes of one response frame
CALL_MS = const(3000)      # one request's timeout


class PeerLink:
    """Client side of one connection (blocking with timeouts): the device
    end of board-to-board sync, and the companion's TCP link;
    call(request) -> response.
    deadline: a ticks_ms() time (wire.py's clock) after which the link
    fails ("peer too slow") whatever the peer sends: a board's sync of a
    peer is a bounded slice of its loop, however slowly the peer trickles
    bytes (each wait is min(timeout_ms, time left)). None: no deadline
    (the companion), each wait timeout_ms."""

    def __init__(self, me, host, port, keyfor=None, timeout_ms=CALL_MS, max_resp=MAX_RESP, deadline=None):
        self.me = me
        self.max_resp = max_resp
        self.timeout_ms = timeout_ms
        self.deadline = deadline
        self.seq = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.buf = b''
        self.last_wait = False
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout_ms / 1000)
        self.sock = s
        try:
            self._arm()
            try:
                s.connect(socket.getaddrinfo(host, port)[0][-1])
            except OSError as e:
                raise self._slow(e)
            hello = self._line(wire.HELLO_MAX).decode().split(' ')
            if len(hello) != 3 or hello[0] != 'SPS1':
                raise OSError('not a sporadic peer: ' + ' '.join(hello)[:60])
            self.peer = hello[1]
            sn = hello[2]
            key = keyfor(self.peer) if keyfor is not None else None
            cn = wire.nonce()
            m = wire.mac(key, wire.hello_text('c', sn, cn, me, self.peer))
            self._send(('SPC1 %s %s %s\n' % (me, cn, m)).encode())
            ok = self._line(wire.HELLO_MAX).decode().split(' ')
            if len(ok) != 2 or ok[0] != 'OK':
                raise OSError('refused: ' + ' '.join(ok)[:80])
            if not wire.check(key, wire.hello_text('s', sn, cn, me, self.peer), ok[1]):
                raise OSError('peer failed authentication')
            self.skey = wire.session_key(key, sn, cn)
        except Exception:
            s.close()
            raise

    def _arm(self):
        # the next wait: timeout_ms, or less when the deadline comes first
        if self.deadline is None:
            return
        left = ticks_diff(self.deadline, ticks_ms())
        if left <= 0:
            raise OSError('peer too slow (deadline passed)')
        self.last_wait = left < self.timeout_ms      # this wait ends at the deadline
        self.sock.settimeout((left if self.last_wait else self.timeout_ms) / 1000)

    def _slow(self, e):
        # a wait that timed out says so: at the deadline, the slice's words
        if e.args and e.args[0] in TIMED_OUT:
            if self.last_wait:
                return OSError('peer too slow (deadline passed)')
            return OSError('peer too slow (nothing in %d ms)' % self.timeout_ms)
        return e

    def _send(self, b):
        self._arm()
        try:
            self.sock.sendall(b) if hasattr(self.sock, 'sendall') else self.sock.write(b)
        except OSError as e:
            raise self._slow(e)
        self.bytes_sent += len(b)

    def _fill(self):
        self._arm()
        try:
            b = self.sock.recv(2048)
        except OSError as e:
            raise self._slow(e)
        if not b:
            raise OSError('connection closed by peer')
        self.bytes_received += len(b)
        self.buf += b

    def _line(self, limit):
        while True:
            i = self.buf.find(b'\n')
            if i >= 0:
                line = self.buf[:i]
                self.buf = self.buf[i + 1:]
                return line
            if len(self.buf) > limit:
                raise OSError('garbage from peer')
            self._fill()

    def call(self, req):
        self._send(wire.frame(self.skey, 'q', self.seq, req))
        h = self._line(wire.HEADER_MAX).decode().split(' ')
        if len(h) != 2 or not h[0].isdigit():
            raise OSError('bad frame from peer')
        n = int(h[0])
        if n > self.max_resp:
            raise OSError('response too large')
        while len(self.buf) < n:
            self._fill()
        body = self.buf[:n]
        self.buf = self.buf[n:]
        resp = body.decode()
        if not wire.frame_ok(self.skey, 'r', self.seq, resp, h[1]):
            raise OSError('response MAC does not verify')
        self.seq += 1
        return resp

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

