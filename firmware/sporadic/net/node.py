# The network side of a board (docs/wifi.md): the TCP sync server, the
# board-to-board sync client, UDP heartbeats for leader.py. MicroPython
# (real boards and the unix port); imports on CPython too (tests, bench).
#
# One TCP connection:
#   server -> "SPS1 SID SNONCE\n"                  (hello: id, 16 hex nonce)
#   client -> "SPC1 CID CNONCE MAC\n"              MAC = mac(K, "c SNONCE CNONCE CID SID")
#   server -> "OK MAC\n" | "ERR reason\n"          MAC = mac(K, "s SNONCE CNONCE CID SID")
#   then frames both ways, one response per request:
#             "LEN MAC\n" + LEN bytes (UTF-8 text)   MAC = mac(S, DIR SEQ " " payload)
#   K the fleet key (cfg "fleet_key", hex), S = HMAC(K, SNONCE CNONCE), DIR
#   "q" (request) or "r" (response), SEQ counts frames of the connection.
#   Without a fleet key (insecure fleet) every MAC is "-".
# A request is a syncsrv.h request (recon S N G P, I, ...), or "net?" (this
# module's status, JSON).
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import json
import os
import select
import socket
import time

from sporadic.core import hmac, leader

try:
    import binascii
except ImportError:
    import ubinascii as binascii

PORT = const(7370)
MAX_CONN = const(4)        # concurrent server connections; more are refused ("busy")
MAX_REQ = const(8192)      # bytes of one request frame
MAX_RESP = const(32768)    # bytes of one response frame (client side)
AUTH_MS = const(3000)      # hello -> authenticated, or closed (half-open)
STALL_MS = const(3000)     # no progress inside a frame, or output not drained
COMPANION = 'companion'   # the id the companion speaks as (per-device secret)
IDLE_MS = const(20000)     # an authenticated connection without a request
SYNC_MS = const(5000)      # board-to-board sync period
CALL_MS = const(3000)      # client: one request's timeout
REASONS_KEPT = const(8)
HELLO_MAX = const(160)

try:
    _raw = time.ticks_ms
    _PERIOD = time.ticks_add(0, -1) + 1
    _mono = [0, 0]          # last raw reading, wraps seen x period

    def ticks_ms():
        """Milliseconds that never wrap (time.ticks_ms wraps after days)."""
        r = _raw()
        if r < _mono[0]:
            _mono[1] += _PERIOD
        _mono[0] = r
        return r + _mono[1]
except AttributeError:  # CPython
    def ticks_ms():
        return int(time.monotonic() * 1000)


def ticks_diff(a, b):
    return a - b

_EAGAIN = (11, 115, 119, 35)   # EAGAIN, EINPROGRESS (linux, lwip), EAGAIN (bsd)


def nonce():
    return binascii.hexlify(os.urandom(8)).decode()


def _mac(key, text):
    return hmac.mac_hex(key, text) if key else '-'


def _check(key, text, mac):
    if not key:
        return True
    return hmac.check_hex(key, text, mac)


def session_key(key, sn, cn):
    if not key:
        return None
    return hmac.hmac_sha256(key, sn + cn)


def frame(skey, d, seq, payload):
    """One frame as bytes: header + payload."""
    b = payload.encode() if isinstance(payload, str) else payload
    m = _mac(skey, d + str(seq) + ' ' + payload) if skey else '-'
    return ('%d %s\n' % (len(b), m)).encode() + b


def _key(cfg):
    k = cfg.get('fleet_key')
    if not k:
        return None
    return binascii.unhexlify(k)


def parse_addr(s, port=PORT):
    h, _, p = s.rpartition(':')
    if not h:
        return s, port
    return h, int(p)


class Conn:
    """One server-side connection (non-blocking)."""

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
        self.out = b''
        self.seq = 0
        self.closing = False
        self.elevated = False


class Server:
    """Non-blocking TCP server: handler(request str) -> response str."""

    def __init__(self, me, handler, port=PORT, bind='0.0.0.0', keyfor=None, ticks=ticks_ms,
                 max_conn=MAX_CONN, max_req=MAX_REQ, auth_ms=AUTH_MS, stall_ms=STALL_MS,
                 idle_ms=IDLE_MS, allow=None, extra=None):
        self.me = me
        self.h = handler
        self.keyfor = keyfor or (lambda cid: None)   # peer id -> key bytes or None
        self.ticks = ticks
        self.max_conn = max_conn
        self.max_req = max_req
        self.auth_ms = auth_ms
        self.stall_ms = stall_ms
        self.idle_ms = idle_ms
        self.allow = allow        # allow(peer_id) -> bool (drop lists, tests)
        self.extra = extra        # extra(request) -> response or None (net?)
        self.conns = []
        self.stats = {'accepted': 0, 'busy': 0, 'rejected': 0, 'timeouts': 0, 'requests': 0}
        self.reasons = []
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(socket.getaddrinfo(bind, port)[0][-1])
        s.listen(8)
        s.setblocking(False)
        self.sock = s

    def _reason(self, c, why):
        self.stats['rejected'] += 1
        self.reasons.append('%s: %s' % (c.peer or _addr_text(c.addr), why))
        if len(self.reasons) > REASONS_KEPT:
            self.reasons.pop(0)

    def _close(self, c):
        try:
            c.sock.close()
        except OSError:
            pass
        if c in self.conns:
            self.conns.remove(c)

    def _refuse(self, c, why):
        self._reason(c, why)
        try:
            c.sock.send(('ERR ' + why + '\n').encode())
        except OSError:
            pass
        self._close(c)

    def register(self, poller):
        poller.register(self.sock, select.POLLIN)
        for c in self.conns:
            poller.register(c.sock, select.POLLIN | (select.POLLOUT if c.out else 0))

    def accept(self):
        now = self.ticks()
        try:
            s, addr = self.sock.accept()
        except OSError:
            return
        s.setblocking(False)
        c = Conn(s, addr, now, nonce())
        if len(self.conns) >= self.max_conn:
            self.stats['busy'] += 1
            try:
                s.send(b'ERR busy\n')
            except OSError:
                pass
            s.close()
            return
        self.stats['accepted'] += 1
        self.conns.append(c)
        c.out = ('SPS1 %s %s\n' % (self.me, c.sn)).encode()
        self._flush(c)

    def _flush(self, c):
        if not c.out:
            return
        try:
            n = c.sock.send(c.out)
        except OSError as e:
            if e.args and e.args[0] in _EAGAIN:
                return
            self._close(c)
            return
        if n:
            c.out = c.out[n:]
            c.t = self.ticks()
        if not c.out and c.closing:
            self._close(c)

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
        c.inb += b
        while c in self.conns and not c.closing and c.inb:
            if not self._step(c):
                break

    def _step(self, c):
        # consume one unit of input if complete; False when more is needed
        i = c.inb.find(b'\n')
        if c.state == 0:
            if i < 0:
                if len(c.inb) > HELLO_MAX:
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
            if not _check(key, 'c %s %s %s %s' % (c.sn, cn, cid, self.me), m):
                self._refuse(c, 'authentication failed (wrong or no key)')
                return False
            if self.allow is not None and not self.allow(cid):
                self._refuse(c, 'dropped')
                return False
            c.peer = cid
            c.skey = session_key(key, c.sn, cn)
            c.elevated = cid == COMPANION or key is None
            c.state = 1
            c.out += ('OK %s\n' % _mac(key, 's %s %s %s %s' % (c.sn, cn, cid, self.me))).encode()
            self._flush(c)
            return True
        if i < 0:
            if len(c.inb) > 40:
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
        try:
            req = body.decode()
        except Exception:
            self._refuse(c, 'garbage (request not UTF-8)')
            return False
        if c.skey is not None and not hmac.check_hex(c.skey, 'q' + str(c.seq) + ' ' + req, m):
            self._refuse(c, 'frame MAC does not verify')
            return False
        self.stats['requests'] += 1
        resp = None
        if not c.elevated and req[:2] in ('T ', 'A '):
            resp = '!error not allowed from a peer board (companion only)'
        if resp is None and self.extra is not None:
            resp = self.extra(req)
        if resp is None:
            try:
                resp = self.h(req)
            except Exception as e:  # a handler bug: an answer, never a crash
                resp = '!error %s' % e
        c.out += frame(c.skey, 'r', c.seq, resp)
        c.seq += 1
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
            elif (c.inb or c.out) and age > self.stall_ms:
                self.stats['timeouts'] += 1
                self._reason(c, 'stalled mid-message')
                self._close(c)
            elif age > self.idle_ms:
                self._close(c)

    def close(self):
        for c in list(self.conns):
            self._close(c)
        self.sock.close()


def _addr_text(a):
    return _ip(a)


class PeerLink:
    """Client side of one connection (blocking with timeouts): the device
    end of board-to-board sync; call(request) -> response."""

    def __init__(self, me, host, port, keyfor=None, timeout_ms=CALL_MS, max_resp=MAX_RESP):
        self.me = me
        self.max_resp = max_resp
        self.seq = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.buf = b''
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout_ms / 1000)
        self.sock = s
        try:
            s.connect(socket.getaddrinfo(host, port)[0][-1])
            hello = self._line(HELLO_MAX).decode().split(' ')
            if len(hello) != 3 or hello[0] != 'SPS1':
                raise OSError('not a sporadic peer: ' + ' '.join(hello)[:60])
            self.peer = hello[1]
            sn = hello[2]
            key = keyfor(self.peer) if keyfor is not None else None
            cn = nonce()
            m = _mac(key, 'c %s %s %s %s' % (sn, cn, me, self.peer))
            self._send(('SPC1 %s %s %s\n' % (me, cn, m)).encode())
            ok = self._line(HELLO_MAX).decode().split(' ')
            if len(ok) != 2 or ok[0] != 'OK':
                raise OSError('refused: ' + ' '.join(ok)[:80])
            if not _check(key, 's %s %s %s %s' % (sn, cn, me, self.peer), ok[1]):
                raise OSError('peer failed authentication')
            self.skey = session_key(key, sn, cn)
        except Exception:
            s.close()
            raise

    def _send(self, b):
        self.sock.sendall(b) if hasattr(self.sock, 'sendall') else self.sock.write(b)
        self.bytes_sent += len(b)

    def _fill(self):
        b = self.sock.recv(2048)
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
        self._send(frame(self.skey, 'q', self.seq, req))
        h = self._line(40).decode().split(' ')
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
        if self.skey is not None and not hmac.check_hex(self.skey, 'r' + str(self.seq) + ' ' + resp, h[1]):
            raise OSError('response MAC does not verify')
        self.seq += 1
        return resp

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def wifi_join(cfg, board=None):
    """Join the Wi-Fi in cfg['wifi'] ("SSID:KEY" or {"ssid","key"}); True when
    connected (or no Wi-Fi is needed: the unix port)."""
    w = cfg.get('wifi')
    if not w:
        return True
    if board is not None and hasattr(board, 'wifi_connect'):
        return board.wifi_connect(w)
    if isinstance(w, str):
        ssid, _, pw = w.partition(':')
    else:
        ssid, pw = w.get('ssid'), w.get('key', '')
    try:
        import network
    except ImportError:
        return True
    sta = network.WLAN(network.STA_IF)
    sta.active(True)
    if not sta.isconnected():
        sta.connect(ssid, pw)
        t = ticks_ms()
        while not sta.isconnected() and ticks_diff(ticks_ms(), t) < 15000:
            time.sleep_ms(100)
    return sta.isconnected()


class Node:
    """A board on the network: server + heartbeats + election + periodic
    board-to-board sync. Drive it with poll(ms) from the board's loop.
    source()/receive(lines) are the store's (recon's Responder API);
    handler the device's syncsrv.h; unix_now() the board clock (or None)."""

    def __init__(self, me, cfg, handler, source, receive, unix_now=None, ticks=ticks_ms,
                 append=None, board=None):
        # board: the board module; its NET_BIND, NET_BROADCAST, NET_DROP are
        # the defaults under cfg's bind, broadcast, net.drop (the unix board:
        # loopback, no broadcast, several boards on one machine)
        n = cfg.get('net') or {}
        self.me = me
        self.cfg = cfg
        self.key = _key(cfg)
        sec = cfg.get('secret')
        self.dev_key = binascii.unhexlify(sec) if sec else None
        self.ticks = ticks
        self.port = cfg.get('sync_port', PORT)
        bind = cfg.get('bind') or getattr(board, 'NET_BIND', None) or '0.0.0.0'
        self.source = source
        self.receive = receive
        self.append = append
        self.unix_now = unix_now
        self.sync_ms = n.get('sync_ms', SYNC_MS)
        self.call_ms = n.get('call_ms', CALL_MS)
        self.drop_path = n.get('drop') or getattr(board, 'NET_DROP', None)
        self._drop = []
        self._drop_t = None
        def served(req):
            # lines pushed to this board (P) wake the runtime, as a sync it drives does
            r = handler(req)
            if req[:2] == 'P ':
                self.changed = True
            return r
        self.server = Server(me, served, self.port, bind, self.keyfor, ticks,
                             n.get('max_conn', MAX_CONN), n.get('max_req', MAX_REQ),
                             n.get('auth_ms', AUTH_MS), n.get('stall_ms', STALL_MS),
                             n.get('idle_ms', IDLE_MS), self.allowed, self._extra)
        now = ticks()
        self.elector = leader.Elector(me, now, n.get('lease_ms', leader.TIMEOUT),
                                      n.get('hb_ms', leader.PERIOD))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(socket.getaddrinfo(bind, self.port)[0][-1])
        self.udp.setblocking(False)
        self.hb_seq = now & 0xffffff
        self.bcast = cfg.get('broadcast', getattr(board, 'NET_BROADCAST', bind == '0.0.0.0'))
        self.peers = {}                       # id -> (host, port) heard
        self.seqs = {}                        # id -> last heartbeat seq
        self.static = [parse_addr(p) for p in cfg.get('peers', [])]
        self.next_sync = now
        self.turn = 0
        self.changed = False                  # lines arrived or the lease changed
        self.was_led = False
        self.stats = {'syncs': 0, 'sync_fail': 0, 'lines_in': 0, 'hb_in': 0, 'hb_bad': 0,
                      'assigned': 0}
        self.last_err = ''
        self.hb_reasons = []

    def keyfor(self, peer):
        # the companion proves itself with this board's own secret; boards
        # with the fleet key
        if peer == COMPANION and self.dev_key is not None:
            return self.dev_key
        return self.key

    # ---- drop list (tests: cut links between boards) ----

    def allowed(self, peer):
        if not self.drop_path:
            return True
        try:
            st = os.stat(self.drop_path)[8]
        except OSError:
            self._drop = []
            return True
        if st != self._drop_t:
            self._drop_t = st
            try:
                with open(self.drop_path) as f:
                    self._drop = f.read().split()
            except OSError:
                self._drop = []
        return peer not in self._drop

    def _extra(self, req):
        if req == 'net?':
            return json.dumps(self.status())
        return None

    def status(self):
        now = self.ticks()
        d = self.elector.status(now)
        d['id'] = self.me
        d['server'] = self.server.stats
        d['rejected'] = self.server.reasons
        d['sync'] = self.stats
        d['last_error'] = self.last_err
        d['peers'] = sorted(self.peers)
        d['hb_rejected'] = self.hb_reasons
        d['secure'] = self.key is not None
        try:
            d['duplicates'] = leader.duplicates(self.source())
        except Exception as e:
            d['duplicates'] = ['? ' + str(e)]
        return d

    # ---- heartbeats ----

    def _beat(self, now):
        b = self.elector.beat(now)
        if b is None:
            return
        self.hb_seq += 1
        msg = leader.encode(b[0], b[1], b[2], self.port, self.hb_seq, self.key).encode()
        dests = list(self.static)
        for p in self.peers:
            if self.peers[p] not in dests:
                dests.append(self.peers[p])
        for h, p in dests:
            try:
                self.udp.sendto(msg, socket.getaddrinfo(h, p)[0][-1])
            except OSError:
                pass
        if self.bcast:
            try:
                self.udp.sendto(msg, ('255.255.255.255', self.port))
            except OSError:
                pass

    def _hb_in(self):
        for _ in range(16):
            try:
                data, addr = self.udp.recvfrom(256)
            except OSError:
                return
            try:
                host, term, claim, port, seq = leader.decode(data, self.key)
            except ValueError as e:
                self.stats['hb_bad'] += 1
                self.hb_reasons.append(str(e))
                if len(self.hb_reasons) > REASONS_KEPT:
                    self.hb_reasons.pop(0)
                continue
            if host == self.me or not self.allowed(host):
                continue
            last = self.seqs.get(host)
            if last is not None and seq <= last and seq > last - 1000000:
                self.stats['hb_bad'] += 1
                continue
            self.seqs[host] = seq
            self.stats['hb_in'] += 1
            ip = _ip(addr)
            self.peers[host] = (ip, port)
            self.elector.heard(host, term, claim, self.ticks())

    # ---- board-to-board sync ----

    def _targets(self):
        # heard peers with a higher id (a pair syncs one way round: no two
        # boards block on each other), then static peers not heard yet
        out = []
        heard = list(self.peers.values())
        for p in sorted(self.peers):
            if p > self.me and self.allowed(p):
                out.append(self.peers[p])
        for a in self.static:
            if a not in heard:
                out.append(a)
        return out

    def sync_with(self, host, port):
        from sporadic.core import recondrv
        link = PeerLink(self.me, host, port, self.keyfor, self.call_ms)
        try:
            if not self.allowed(link.peer):
                return None
            got = []

            def recv(lines):
                got.append(len(lines))
                return self.receive(lines)
            st = recondrv.reconcile(self.source, recv, link.call, put_bytes=1024,
                                 get_lines=32, verify=False)
        finally:
            link.close()
        if st['lines_in']:
            self.changed = True
            self.stats['lines_in'] += st['lines_in']
        self.stats['syncs'] += 1
        return st

    def sync_round(self):
        t = self._targets()
        if not t:
            return
        self.turn = (self.turn + 1) % len(t)
        host, port = t[self.turn]
        try:
            self.sync_with(host, port)
        except Exception as e:
            self.stats['sync_fail'] += 1
            self.last_err = '%s:%d %s' % (host, port, e)

    # ---- leader duties ----

    def led(self):
        return self.elector.led(self.ticks())

    def lead(self):
        """While leading: assign unsettled single-run instances."""
        now = self.ticks()
        if not self.elector.leading or self.append is None or self.unix_now is None:
            return 0
        t = self.unix_now()
        if t is None:
            return 0
        alive = [h for h in self.elector.alive(now) if self.allowed(h)]
        lines = leader.assignments(self.source(), self.me, alive, t)
        for line in lines:
            if self.dev_key is not None:
                # a device record, MACed as results are: a signed fleet's
                # boards refuse one without (trust.py), the companion checks it
                line = line[:-1] + hmac.mac_hex(self.dev_key, line)
            self.append(line)
        if lines:
            self.changed = True
            self.stats['assigned'] += len(lines)
        return len(lines)

    # ---- the loop ----

    def poll(self, ms):
        """Serve, heartbeat, elect and sync for up to ms milliseconds."""
        end = self.ticks() + ms
        while True:
            now = self.ticks()
            self._beat(now)
            led = self.elector.led(now)
            if led != self.was_led:
                self.was_led = led
                self.changed = True
                self.next_sync = now
            if ticks_diff(now, self.next_sync) >= 0:
                self.next_sync = now + self.sync_ms
                self.sync_round()
                self.lead()
            left = ticks_diff(end, self.ticks())
            if left <= 0:
                return
            wait = left
            nb = ticks_diff(self.elector.next_beat, self.ticks())
            if nb < wait:
                wait = nb if nb > 0 else 0
            p = select.poll()
            self.server.register(p)
            p.register(self.udp, select.POLLIN)
            for s, ev in p.poll(wait if wait < 200 else 200):
                if s is self.udp:
                    self._hb_in()
                else:
                    self.server.event(s, ev)
            self.server.expire()

    def close(self):
        self.server.close()
        self.udp.close()


def _ip(addr):
    if isinstance(addr, tuple):
        return addr[0]
    # MicroPython: a sockaddr bytes object (family, port, 4 address bytes)
    try:
        b = bytes(addr)
        return '%d.%d.%d.%d' % (b[4], b[5], b[6], b[7])
    except Exception:
        return '127.0.0.1'


def main(max_ms=None, max_steps=None):
    """The board's loop with the network: the runtime's steps between
    network polls. boot.main() runs it when cfg has a network; a board that
    cannot join its Wi-Fi or open its sync port says why and runs the plain
    loop (its jobs do not wait for the network)."""
    import board
    from sporadic.device import runtime, syncsrv, clock, storesync
    rt = runtime.get()
    cfg = rt.cfg
    st = rt.store

    def receive(lines):
        ref = []
        storesync.receive(st, lines, 'peer', ref)
        return ref

    try:
        if not wifi_join(cfg, board):
            raise OSError('Wi-Fi not joined')
        node = Node(rt.id, cfg, syncsrv.h, lambda: storesync.lines(st), receive, clock.now, ticks_ms, st.append, board)
    except OSError as e:
        print('sporadic: no network (%s): running without it' % e)
        return runtime.main(max_steps=max_steps)
    print('sporadic: %s listening on port %d' % (rt.id, node.port))
    runtime.lease = node.led
    t0 = ticks_ms()
    wake = None
    steps = 0
    while max_ms is None or ticks_diff(ticks_ms(), t0) < max_ms:
        now = clock.now()
        if node.changed or wake is None or (now is not None and now >= wake):
            if max_steps is not None and steps >= max_steps:
                break
            steps += 1
            node.changed = False
            if node.lead():
                node.changed = False
            wake = rt.step(now)
            if wake is None:
                wake = (now or 0) + 60
        board.wdt_feed()
        node.poll(200)
    node.close()
    return node
