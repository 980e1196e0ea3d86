# The TCP sync server (non-blocking): accepting, and each connection's hello, frames and timeouts.
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import select
import socket

from sporadic.net import wire
from sporadic.net.wire import ticks_ms, ticks_diff

MAX_CONN = const(4)        # concurrent connections, plus one kept for the companion; more: "busy"
MAX_REQ = const(8192)      # bytes of one request frame
AUTH_MS = const(3000)      # hello -> authenticated, or closed (half-open)
STALL_MS = const(3000)     # no progress inside a frame, or output not drained
IDLE_MS = const(20000)     # an authenticated connection without a request
FRAME_MS = const(5000)     # a request frame's first byte -> its last, however it is paced
HALF_PER_ADDR = const(2)   # half-open connections from one address (more: its oldest goes)
GRACE_MS = const(500)      # a half-open connection is not evicted this young (its hello's round trip)
# Slots: a board answers max_conn + 1 connections at once. Authenticated
# peer boards hold at most max_conn - 2 of them and an address at most
# HALF_PER_ADDR half-open ones; a newcomer when all are taken evicts a
# half-open connection of the address holding the most (at once from one
# at its quota, else past GRACE_MS): so idle connections reopened as fast
# as they are closed, and trickled frames, from any few addresses, leave
# the companion a slot (docs/wifi.md, Server._victim).
REASONS_KEPT = const(8)

_EAGAIN = (11, 115, 119, 35)   # EAGAIN, EINPROGRESS (linux, lwip), EAGAIN (bsd)


class Conn:
    """One server-side connection."""

    def __init__(self, sock, addr, now, sn):
        self.sock = sock
        self.addr = addr
        self.t0 = now
        self.t = now              # last progress
        self.sn = sn
        self.peer = None
        self.skey = None
        self.state = 0            # 0 hello sent, 1 authenticated
        self.inb = b''
        self.out = []             # bytes waiting to be sent, in order
        self.off = 0              # of out[0], sent already
        self.seq = 0
        self.f0 = now             # when the frame being received began
        self.closing = False
        self.elevated = False
        self.polled_out = False   # its poll registration asks for POLLOUT too


class Server:
    """Non-blocking TCP server: handler(request str) -> response str (or
    its pieces, an iterable of str).
    Its sockets stay registered in poller (its own, or the one it is given)
    from the moment they open to the moment they close: hand what
    poller.poll() returns to event()."""

    def __init__(self, me, handler, port=wire.PORT, bind='0.0.0.0', keyfor=None, ticks=ticks_ms,
                 max_conn=MAX_CONN, max_req=MAX_REQ, auth_ms=AUTH_MS, stall_ms=STALL_MS,
                 idle_ms=IDLE_MS, allow=None, extra=None, poller=None, frame_ms=FRAME_MS):
        self.me = me
        self.h = handler
        self.keyfor = keyfor or (lambda cid: None)   # peer id -> key bytes or None
        self.ticks = ticks
        self.max_conn = max_conn
        self.max_req = max_req
        self.auth_ms = auth_ms
        self.stall_ms = stall_ms
        self.idle_ms = idle_ms
        self.frame_ms = frame_ms
        self.allow = allow        # allow(peer_id) -> bool (drop lists, tests)
        self.extra = extra        # extra(request) -> response or None (net?)
        self.conns = []
        self.stats = {'accepted': 0, 'busy': 0, 'rejected': 0, 'timeouts': 0, 'requests': 0, 'evicted': 0}
        self.reasons = []
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(socket.getaddrinfo(bind, port)[0][-1])
        s.listen(8)
        s.setblocking(False)
        self.sock = s
        self.poller = poller if poller is not None else select.poll()
        self.poller.register(s, select.POLLIN)

    def _reason(self, c, why):
        self.stats['rejected'] += 1
        self.reasons.append('%s: %s' % (c.peer or wire.ip(c.addr), why))
        if len(self.reasons) > REASONS_KEPT:
            self.reasons.pop(0)

    def _close(self, c):
        if c in self.conns:
            self.conns.remove(c)
            try:
                self.poller.unregister(c.sock)
            except (OSError, KeyError, ValueError):
                pass
        try:
            c.sock.close()
        except OSError:
            pass

    def _refuse(self, c, why):
        self._reason(c, why)
        try:
            c.sock.send(('ERR ' + why + '\n').encode())
        except OSError:
            pass
        self._close(c)

    def accept(self):
        now = self.ticks()
        try:
            s, addr = self.sock.accept()
        except OSError:
            return
        s.setblocking(False)
        c = Conn(s, addr, now, wire.nonce())
        ip = wire.ip(addr)
        mine = 0
        for x in self.conns:
            if x.state == 0 and wire.ip(x.addr) == ip:
                mine += 1
        full = len(self.conns) > self.max_conn
        if full or mine >= HALF_PER_ADDR:
            old = self._victim(ip, now, mine >= HALF_PER_ADDR)
            if old is not None:
                self.stats['evicted'] += 1
                self._refuse(old, 'half-open, its slot taken by a newcomer')
                full = False
                mine = 0
        if full or mine >= HALF_PER_ADDR:
            self.stats['busy'] += 1
            try:
                s.send(b'ERR busy\n')
            except OSError:
                pass
            s.close()
            return
        self.stats['accepted'] += 1
        self.conns.append(c)
        self.poller.register(s, select.POLLIN)
        c.out.append(('SPS1 %s %s\n' % (self.me, c.sn)).encode())
        self._flush(c)

    def _victim(self, ip, now, own):
        # the half-open connection a newcomer from ip takes the slot of:
        # its own address's oldest past GRACE_MS when that address is at
        # its quota (own), else another address's, from the one holding
        # the most: at once from one holding HALF_PER_ADDR, else only past
        # GRACE_MS. A lone half-open connection (the companion's, its hello
        # on the way) is never taken by another address inside its grace.
        n = {}
        for x in self.conns:
            if x.state == 0:
                a = wire.ip(x.addr)
                n[a] = n.get(a, 0) + 1
        best = None
        for x in self.conns:
            if x.state != 0:
                continue
            a = wire.ip(x.addr)
            if (a == ip) != own:
                continue
            if (own or n[a] < HALF_PER_ADDR) and ticks_diff(now, x.t0) < GRACE_MS:
                continue
            if best is None or n[a] > n[wire.ip(best.addr)] or \
                    (n[a] == n[wire.ip(best.addr)] and ticks_diff(x.t0, best.t0) < 0):
                best = x
        return best

    def _flush(self, c):
        while c.out:
            b = c.out[0]
            try:
                n = c.sock.send(memoryview(b)[c.off:] if c.off else b)
            except OSError as e:
                if not (e.args and e.args[0] in _EAGAIN):
                    self._close(c)
                    return
                n = 0
            if not n:
                break
            c.t = self.ticks()
            c.off += n
            if c.off < len(b):
                break
            c.out.pop(0)
            c.off = 0
        if not c.out and c.closing:
            self._close(c)
            return
        # ask for POLLOUT only while output waits (a writable socket would
        # end every poll at once)
        if bool(c.out) != c.polled_out and c in self.conns:
            c.polled_out = not c.polled_out
            self.poller.modify(c.sock, select.POLLIN | select.POLLOUT if c.out else select.POLLIN)

    def _read(self, c):
        try:
            b = c.sock.recv(1024)
        except OSError as e:
            if e.args and e.args[0] in _EAGAIN:
                return
            self._close(c)
            return
        if not b:
            self._close(c)
            return
        c.t = self.ticks()
        if not c.inb:
            c.f0 = c.t
        c.inb += b
        while c in self.conns and not c.closing and c.inb:
            if not self._step(c):
                break

    def _step(self, c):
        # consume one unit of input if complete; False when more is needed
        i = c.inb.find(b'\n')
        if c.state == 0:
            return self._hello(c, i)
        if i < 0:
            if len(c.inb) > wire.HEADER_MAX:
                self._refuse(c, 'garbage (bad frame header)')
            return False
        try:
            f = c.inb[:i].decode().split(' ')
            n = int(f[0])
            m = f[1]
            if len(f) != 2 or n < 0:
                raise ValueError
        except Exception:
            self._refuse(c, 'garbage (bad frame header)')
            return False
        if n > self.max_req:
            self._refuse(c, 'request too large (%d > %d bytes)' % (n, self.max_req))
            return False
        if len(c.inb) < i + 1 + n:
            return False
        body = c.inb[i + 1:i + 1 + n]
        c.inb = c.inb[i + 1 + n:]
        c.f0 = c.t      # the next frame, if any, began with this read
        try:
            req = body.decode()
        except Exception:
            self._refuse(c, 'garbage (request not UTF-8)')
            return False
        if not wire.frame_ok(c.skey, 'q', c.seq, req, m):
            self._refuse(c, 'frame MAC does not verify')
            return False
        self.stats['requests'] += 1
        resp = None
        if not c.elevated and req[:2] in ('T ', 'A '):
            resp = '!error not allowed from a peer board (companion only)'
        if resp is None and self.extra is not None:
            resp = self.extra(req)
        body = None
        try:
            if resp is None:
                resp = self.h(req)
            # the handler's answer: a str, or its pieces (a long G answer,
            # framed piece by piece and never joined)
            parts = wire.frame_parts(c.skey, 'r', c.seq, (resp,) if isinstance(resp, str) else resp)
        except Exception as e:  # a handler bug or no memory: an answer, never a crash
            parts = wire.frame_parts(c.skey, 'r', c.seq, ('!error %s: %s' % (type(e).__name__, e),))
        resp = None
        c.out.extend(parts)
        c.seq += 1
        self._flush(c)
        return True

    def _hello(self, c, i):
        if i < 0:
            if len(c.inb) > wire.HELLO_MAX:
                self._refuse(c, 'garbage (no hello line)')
            return False
        line = c.inb[:i]
        c.inb = c.inb[i + 1:]
        try:
            f = line.decode().split(' ')
        except Exception:
            f = []
        if len(f) != 4 or f[0] != 'SPC1':
            self._refuse(c, 'garbage (not a sporadic peer)')
            return False
        cid, cn, m = f[1], f[2], f[3]
        if len(cn) < 16 or len(cid) > 32:
            self._refuse(c, 'bad hello')
            return False
        key = self.keyfor(cid)
        if not wire.check(key, wire.hello_text('c', c.sn, cn, cid, self.me), m):
            self._refuse(c, 'authentication failed (wrong or no key)')
            return False
        if self.allow is not None and not self.allow(cid):
            self._refuse(c, 'dropped')
            return False
        if cid != wire.COMPANION and self.me != wire.COMPANION:
            # (the companion's own server, `companion serve`, keeps none)
            n = 0
            for x in self.conns:
                if x.state == 1 and x.peer != wire.COMPANION:
                    n += 1
            if n >= self.max_conn - 2:
                # peer boards never take the slots kept for the companion
                self.stats['busy'] += 1
                self._refuse(c, 'busy')
                return False
        c.peer = cid
        c.skey = wire.session_key(key, c.sn, cn)
        c.elevated = cid == wire.COMPANION or key is None
        c.f0 = self.ticks()
        c.state = 1
        c.out.append(('OK %s\n' % wire.mac(key, wire.hello_text('s', c.sn, cn, cid, self.me))).encode())
        self._flush(c)
        return True

    def event(self, sock, ev):
        if sock is self.sock:
            self.accept()
            return
        for c in self.conns:
            if c.sock is sock:
                if ev & select.POLLOUT:
                    self._flush(c)
                if c in self.conns and ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
                    self._read(c)
                return

    def expire(self):
        now = self.ticks()
        for c in list(self.conns):
            age = ticks_diff(now, c.t)
            if c.state == 0 and ticks_diff(now, c.t0) > self.auth_ms:
                self.stats['timeouts'] += 1
                self._reason(c, 'no hello in time (half-open)')
                self._close(c)
            elif c.state == 1 and c.inb and ticks_diff(now, c.f0) > self.frame_ms:
                self.stats['timeouts'] += 1
                self._reason(c, 'frame too slow (deadline)')
                self._close(c)
            elif (c.inb or c.out) and age > self.stall_ms:
                self.stats['timeouts'] += 1
                self._reason(c, 'stalled mid-message')
                self._close(c)
            elif age > self.idle_ms:
                self._close(c)

    def close(self):
        for c in list(self.conns):
            self._close(c)
        try:
            self.poller.unregister(self.sock)
        except (OSError, KeyError, ValueError):
            pass
        self.sock.close()
