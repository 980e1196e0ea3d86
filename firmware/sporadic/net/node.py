# A board on the network (docs/wifi.md): the Node loop: server, heartbeats, election, board-to-board sync.
# MicroPython (real boards and the unix port); imports on CPython too (tests, bench).
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
from sporadic.net import server, wire
from sporadic.net.wire import ticks_ms, ticks_diff
from sporadic.net.wifi import wifi_join  # noqa: F401 (node.wifi_join)

try:
    import binascii
except ImportError:
    import ubinascii as binascii

SYNC_MS = const(5000)      # board-to-board sync period
_POLL_MS = const(200)       # longest wait in one poll: connection timeouts are checked between
_HB_BATCH = const(16)       # heartbeats read per wake-up
_HOSTS_MS = const(5000)     # the host list is read again at most this often for an id not on it
SLICE_MS = const(2000)      # the most one board-to-board sync may take: the loop's network slice
BACKOFF_MS = const(300000)  # the longest a peer that failed is left alone (doubling from sync_ms)
FORGET_MS = const(30000)    # a peer not heard this long is forgotten
MAX_PEERS = const(16)       # peers heard kept at once (the stalest goes for a new one)


class Node:
    """A board on the network: server + heartbeats + election + periodic
    board-to-board sync. Drive it with poll(ms) from the board's loop.
    source()/receive(lines) are the store's (recon's Responder API);
    handler the device's syncsrv.pieces (a request -> its answer, a str or
    the answer's pieces); unix_now() the board clock (or None)."""

    def __init__(self, me, cfg, handler, source, receive, unix_now=None, ticks=ticks_ms,
                 append=None, board=None):
        # board: the board module; its NET_BIND, NET_BROADCAST, NET_DROP are
        # the defaults under cfg's bind, broadcast, net.drop (the unix board:
        # loopback, no broadcast, several boards on one machine); its
        # NET_TUNE, the defaults under cfg's net tuning keys
        n = cfg.get('net') or {}
        tune = getattr(board, 'NET_TUNE', None)
        if tune:
            tune = dict(tune)
            tune.update(n)
            n = tune
        self.me = me
        self.cfg = cfg
        self.key = wire.fleet_key(cfg)
        sec = cfg.get('secret')
        self.dev_key = binascii.unhexlify(sec) if sec else None
        self.ticks = ticks
        self.port = cfg.get('sync_port', wire.PORT)
        bind = cfg.get('bind') or getattr(board, 'NET_BIND', None) or '0.0.0.0'
        self.source = source
        self.receive = receive
        self.append = append
        self.unix_now = unix_now
        self.sync_ms = n.get('sync_ms', SYNC_MS)
        self.call_ms = n.get('call_ms')     # None: peer.CALL_MS
        self.slice_ms = n.get('slice_ms', SLICE_MS)
        self.forget_ms = n.get('forget_ms', FORGET_MS)
        self.drop_path = n.get('drop') or getattr(board, 'NET_DROP', None)
        self._drop = []
        self._drop_t = None
        def served(req):
            # lines pushed to this board (P) wake the runtime, as a sync it drives does
            r = handler(req)
            if req[:2] == 'P ':
                self.changed = True
            return r
        # one poll object for the node's life: sockets are registered when
        # they open and unregistered when they close (server.py's and the UDP one)
        self.poller = select.poll()
        self.server = server.Server(me, served, self.port, bind, self.keyfor, ticks,
                                    n.get('max_conn', server.MAX_CONN), n.get('max_req', server.MAX_REQ),
                                    n.get('auth_ms', server.AUTH_MS), n.get('stall_ms', server.STALL_MS),
                                    n.get('idle_ms', server.IDLE_MS), self.allowed, self._extra, self.poller,
                                    n.get('frame_ms', server.FRAME_MS))
        now = ticks()
        self.elector = leader.Elector(me, now, n.get('lease_ms', leader.TIMEOUT),
                                      n.get('hb_ms', leader.PERIOD))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(socket.getaddrinfo(bind, self.port)[0][-1])
        self.udp.setblocking(False)
        self.poller.register(self.udp, select.POLLIN)
        self.hb_seq = now & 0xffffff
        self.bcast = cfg.get('broadcast', getattr(board, 'NET_BROADCAST', bind == '0.0.0.0'))
        self.peers = {}                       # id -> (host, port) heard
        self.seqs = {}                        # id -> last heartbeat seq
        self.heard_at = {}                    # id -> ticks of its last heartbeat
        self.backoff = {}                     # (host, port) -> (failures in a row, ticks of the next try)
        self.static = [wire.parse_addr(p) for p in cfg.get('peers', [])]
        self.next_sync = now
        self.next_forget = now
        self.turn = 0
        self.changed = False                  # lines arrived or the lease changed
        self.was_led = False
        self.stats = {'syncs': 0, 'sync_fail': 0, 'lines_in': 0, 'hb_in': 0, 'hb_bad': 0,
                      'assigned': 0, 'forgotten': 0}
        self.last_err = ''
        self.hb_reasons = []
        self._hosts = None                    # the signed host list (.h records), as last read
        self._hosts_t = 0
        self.broker = None                    # net/broker.py's link when cfg has mqtt (its figures in status)

    def keyfor(self, peer_id):
        # the companion proves itself with this board's own secret; boards
        # with the fleet key
        if peer_id == wire.COMPANION and self.dev_key is not None:
            return self.dev_key
        return self.key

    # ---- drop list (tests: cut links between boards) ----

    def allowed(self, peer_id):
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
        return peer_id not in self._drop

    def fleet_host(self, host):
        """In a signed fleet, a heartbeat counts only from a host of the
        store's signed host list (`.h` records): an id nobody deployed
        cannot join the election, let alone lead (docs/security.md). The
        list is read again when an id not on it is heard, at most every
        _HOSTS_MS (a board deployed since arrives with its `.h` record)."""
        if self.key is None:
            return True
        hs = self._hosts
        if hs is not None and host in hs:
            return True
        now = self.ticks()
        if hs is None or ticks_diff(now, self._hosts_t) >= _HOSTS_MS:
            self._hosts_t = now
            from sporadic.core import jobline
            hs = []
            for line in self.source():
                if line[0] != '.' or line[:3] > '.h ':
                    break
                if line[:3] == '.h ':
                    hs.append(jobline.host_of(line))
            self._hosts = hs
        return host in hs

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
        d['backoff'] = ['%s:%d %d' % (a[0], a[1], self.backoff[a][0]) for a in self.backoff]
        d['hb_rejected'] = self.hb_reasons
        d['secure'] = self.key is not None
        if self.broker is not None:
            d['mqtt'] = self.broker.status()
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
        for _ in range(_HB_BATCH):
            try:
                data, addr = self.udp.recvfrom(256)
            except OSError:
                return
            try:
                host, term, claim, port, seq = leader.decode(data, self.key)
            except ValueError as e:
                self.stats['hb_bad'] += 1
                self.hb_reasons.append(str(e))
                if len(self.hb_reasons) > server.REASONS_KEPT:
                    self.hb_reasons.pop(0)
                continue
            if host == self.me or not self.allowed(host):
                continue
            if not self.fleet_host(host):
                self.stats['hb_bad'] += 1
                self.hb_reasons.append('heartbeat from %s: not in the fleet\'s signed host list' % host)
                if len(self.hb_reasons) > server.REASONS_KEPT:
                    self.hb_reasons.pop(0)
                continue
            last = self.seqs.get(host)
            if last is not None and seq <= last and seq > last - 1000000:
                self.stats['hb_bad'] += 1
                continue
            now = self.ticks()
            if host not in self.peers and len(self.peers) >= MAX_PEERS:
                # a key holder inventing ids cannot grow the table: the stalest goes
                old = None
                for p in self.heard_at:
                    if old is None or ticks_diff(self.heard_at[p], self.heard_at[old]) < 0:
                        old = p
                self._forget(old)
            self.seqs[host] = seq
            self.stats['hb_in'] += 1
            self.peers[host] = (wire.ip(addr), port)
            self.heard_at[host] = now
            self.elector.heard(host, term, claim, now)

    def _forget(self, host):
        a = self.peers.pop(host, None)
        self.heard_at.pop(host, None)
        self.seqs.pop(host, None)
        if a is not None and a not in self.static:
            self.backoff.pop(a, None)
        self.stats['forgotten'] += 1

    def forget_silent(self, now):
        """Forget the peers not heard for forget_ms (their address, their
        heartbeat count, their back-off): a peer heard once is not synced,
        nor sent heartbeats, for ever."""
        if ticks_diff(now, self.next_forget) < 0:
            return
        self.next_forget = now + 1000
        for p in list(self.heard_at):
            if ticks_diff(now, self.heard_at[p]) > self.forget_ms:
                self._forget(p)

    # ---- board-to-board sync ----

    def _targets(self, now):
        # heard peers with a higher id (a pair syncs one way round: no two
        # boards block on each other), then static peers not heard yet;
        # less those backed off (a peer that failed waits its turn out)
        out = []
        heard = list(self.peers.values())
        for p in sorted(self.peers):
            if p > self.me and self.allowed(p):
                out.append(self.peers[p])
        for a in self.static:
            if a not in heard:
                out.append(a)
        return [a for a in out if a not in self.backoff or ticks_diff(now, self.backoff[a][1]) >= 0]

    def sync_with(self, host, port):
        # the client end loads with the first peer to sync: a board only the
        # companion syncs never holds it
        from sporadic.core import recondrv
        from sporadic.net import peer
        # the whole sync, connect to last answer, within slice_ms: a peer
        # trickling its bytes or never answering costs the loop that much
        link = peer.PeerLink(self.me, host, port, self.keyfor,
                             peer.CALL_MS if self.call_ms is None else self.call_ms,
                             deadline=self.ticks() + self.slice_ms)
        try:
            if not self.allowed(link.peer):
                return None
            st = recondrv.reconcile(self.source, self.receive, link.call, put_bytes=1024, get_lines=32,
                                    verify=False)
        finally:
            link.close()
        if st['lines_in']:
            self.changed = True
            self.stats['lines_in'] += st['lines_in']
        self.stats['syncs'] += 1
        return st

    def sync_round(self):
        now = self.ticks()
        t = self._targets(now)
        if not t:
            return
        self.turn = (self.turn + 1) % len(t)
        a = t[self.turn]
        try:
            self.sync_with(a[0], a[1])
            self.backoff.pop(a, None)
        except Exception as e:
            self.stats['sync_fail'] += 1
            self.last_err = '%s:%d %s' % (a[0], a[1], e)
            if 'ERR busy' in self.last_err:
                return      # a peer at work answers at once: tried again next round
            # skipped for sync_ms x 2^failures (at most BACKOFF_MS)
            n = self.backoff[a][0] + 1 if a in self.backoff else 1
            w = self.sync_ms << (n if n < 16 else 16)
            self.backoff[a] = (n, self.ticks() + (w if w < BACKOFF_MS else BACKOFF_MS))

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
        lines = leader.assignments(self.source(), self.me, alive, t, cfg=self.cfg)
        signed = False
        for line in lines:
            if self.dev_key is not None:
                # a device record, MACed as results are: a signed fleet's
                # boards refuse one without (trust.py), the companion checks it
                mac = hmac.mac_hex(self.dev_key, line)
                if self.cfg.get('sign'):
                    # and the leader's board signature: its peers check that
                    # this board assigned it (core/recsig.py, trust.py)
                    signed = True
                    try:
                        from sporadic.core import recsig
                        mac = recsig.sign(self.cfg['sign'], self.cfg['sign_pub'], line, mac)
                    except MemoryError:
                        continue    # unsigned, its peers would refuse it: none (rule 4 covers it)
                line = line[:-1] + mac
            self.append(line)
        if signed:   # its code (~11 KB) goes: a lease's assignments are rare
            import sporadic
            sporadic.forget('sporadic.core.recsig')
            sporadic.forget('sporadic.core.ed25519')
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
            self.forget_silent(now)
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
            for s, ev in self.poller.poll(wait if wait < _POLL_MS else _POLL_MS):
                if s is self.udp:
                    self._hb_in()
                else:
                    self.server.event(s, ev)
            self.server.expire()

    def close(self):
        self.server.close()
        self.poller.unregister(self.udp)
        self.udp.close()


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
        node = Node(rt.id, cfg, syncsrv.pieces, lambda: storesync.lines(st), receive, clock.now, ticks_ms, st.append, board)
    except OSError as e:
        print('sporadic: no network (%s): running without it' % e)
        return runtime.main(max_steps=max_steps)
    print('sporadic: %s listening on port %d' % (rt.id, node.port))
    if cfg.get('mqtt'):
        # a broker beside the TCP network: its step in the same loop (docs/mqtt.md)
        from sporadic.net import broker
        node.broker = broker.Broker(rt.id, cfg, st)
        return broker.loop(rt, node.broker, node, max_ms, max_steps)
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
            wake = rt.step(now, node.led)
            if wake is None:
                wake = (now or 0) + 60
        board.wdt_feed()
        node.poll(200)
    node.close()
    return node
