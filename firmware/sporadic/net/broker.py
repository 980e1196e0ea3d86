# A board's sync through an MQTT broker (docs/mqtt.md): one bounded step of
# the loop, connect to disconnect within slice_ms (a broker that is down,
# slow or hostile costs the loop that slice, never its jobs).
#
#   PRE/d/ID     QoS 1, board ID's records every board needs (done records
#                of any/one jobs and rollouts, assignments: they stop the others)
#   PRE/r/ID     QoS 1, its results of each/who jobs: only the companion takes them
#   PRE/f/NAME   QoS 1, retained: the fleet's signed lines (the companion's
#                snapshot: one message per batch SEQ, 8 digits, holding the
#                .b record and the live lines it covers; u0..uf the lines
#                that need no batch, by digest)
#   PRE/q/ID     QoS 1, what this board refused of what it took: REASON<TAB>LINE (reported)
#
# The session is persistent (fixed client id, clean_session 0): the broker
# queues what the fleet publishes while the board sleeps. Its first wake, or
# one after the broker lost the session (expired, wiped), subscribes again:
# the retained snapshot then comes whole. What arrives is spooled to flash
# (mq/NAME) before it is acknowledged, then merged message by message, in
# name order (batches by SEQ, then the rest) through storesync.receive: the
# same trust checks as every other link (signed batches, replay marks,
# device MACs, the signed host list). Refused lines are quarantined, never
# run, and reported on PRE/q/ID.
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import os
from sporadic.net import mqtt
from sporadic.net.wire import ticks_ms, ticks_diff

SLICE_MS = const(3000)     # connect to disconnect, at most
EVERY_MS = const(5000)     # a sync each this often (and after the loop wrote records)
QUIET_MS = const(100)      # nothing more for this long after the PINGRESP: done (what comes later waits in the session)
PUB_CHARS = const(2048)    # characters of own records in one message
SPOOL_MAX = const(64)      # messages spooled in one wake (more wait for the next)
REPORT_MAX = const(8)      # refusals published in one report
SUBS = '2'                 # the subscriptions' version (mq.sub): f/# and d/+


class Full(Exception):
    pass


def parse_url(url):
    """mqtt://[USER[:PASSWORD]@]HOST[:PORT] or mqtts://... -> dict of the
    cfg keys (host, port, tls, user, password), or ValueError(reason)."""
    scheme, sep, rest = url.partition('://')
    if not sep or scheme not in ('mqtt', 'mqtts'):
        raise ValueError('want mqtt://HOST[:PORT] or mqtts://HOST[:PORT]')
    rest = rest.rstrip('/')
    d = {'tls': scheme == 'mqtts'}
    auth, sep, hp = rest.rpartition('@')
    if sep:
        u, sep, p = auth.partition(':')
        d['user'] = u
        if sep:
            d['password'] = p
    host, sep, port = hp.rpartition(':')
    if not sep:
        host, port = hp, ''
    if not host:
        raise ValueError('no host')
    if port:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError('port %r: want 1..65535' % port)
        d['port'] = int(port)
    else:
        d['port'] = 8883 if d['tls'] else 1883
    d['host'] = host
    return d


def topic_of(cfg):
    """The fleet's topic prefix: sporadic/ + the id of its fleet key
    (provisioning writes it into cfg mqtt.topic; this for a cfg without)."""
    fk = cfg.get('fleet_key')
    if not fk:
        return 'sporadic/insecure'
    from sporadic.core import hmac
    return 'sporadic/' + hmac.key_id(fk)


def _digest(text):
    import hashlib
    import binascii
    return binascii.hexlify(hashlib.sha256(text).digest()[:8]).decode()


def _safe(name):
    # a spool file name from a topic level: short, [0-9a-z.] only
    if not name or len(name) > 24:
        return None
    for c in name:
        if not ('0' <= c <= '9' or 'a' <= c <= 'z' or c == '.'):
            return None
    return name


class Broker:
    """The board's broker link (cfg['mqtt']) and its figures (status)."""

    def __init__(self, me, cfg, st, ticks=ticks_ms):
        m = cfg['mqtt']
        self.me = me
        self.m = m
        self.st = st
        self.ticks = ticks
        self.pre = m.get('topic') or topic_of(cfg)
        self.slice_ms = m.get('slice_ms', SLICE_MS)
        self.every_ms = m.get('every_ms', EVERY_MS)
        self.max_msg = m.get('max_msg', mqtt.MAX_MSG)
        self.spool = st.root + 'mq'
        try:
            os.mkdir(self.spool)
        except OSError:
            pass
        self.next = ticks()
        self.stats = {'syncs': 0, 'fail': 0, 'lines_in': 0, 'lines_out': 0, 'refused': 0,
                      'bytes_last': 0, 'ms_last': 0, 'subscribed': 0}
        self.last_err = ''
        self.reasons = []
        self.steps = []          # the last few steps: [ms, bytes, lines in, lines out] (status)
        self._k = 0

    def due(self, now):
        return ticks_diff(now, self.next) >= 0

    def client(self):
        m = self.m
        tls = None
        if m.get('tls'):
            tls = {'ca': m.get('ca')}
        return mqtt.Client('sporadic-' + self.me, m['host'], m.get('port', 1883), m.get('user'),
                           m.get('password'), m.get('keepalive', 60), tls, self.max_msg, self.ticks)

    def sync(self):
        """One broker sync, bounded by slice_ms; returns the lines taken
        (0 when the broker could not be reached: the loop goes on)."""
        t0 = self.ticks()
        self.next = t0 + self.every_ms
        c = self.client()
        self.taken = 0
        self.refusals = []
        out0 = self.stats['lines_out']
        try:
            self._merge()           # what a wake cut short (a reset) left spooled
            try:
                present = c.connect(t0 + self.slice_ms, clean=False)
                mark = self.st.root + 'mq.sub'
                if not present or _read(mark) != SUBS:
                    # a new session: subscribe again, the retained snapshot comes whole
                    _remove(mark)
                    c.subscribe([self.pre + '/f/#', self.pre + '/d/+'], self._msg)
                    _put(mark, SUBS)
                    self.stats['subscribed'] += 1
                self._publish_own(c)
                c.ping()
                c.poll(self._msg, QUIET_MS)
            except Full:
                pass        # the rest waits in the session (not acknowledged)
            self._merge()
            if self.refusals:
                c.publish(self.pre + '/q/' + self.me, '\n'.join(self.refusals[:REPORT_MAX]) + '\n')
                c.wait_acks(self._msg)
            c.disconnect()
            self.stats['syncs'] += 1
        except Exception as e:
            c.close()
            self.stats['fail'] += 1
            self.last_err = str(e) or repr(e)
            try:
                self._merge()       # what was spooled (acknowledged) is merged all the same
            except Exception:
                pass
        self.stats['bytes_last'] = c.bytes_in + c.bytes_out
        self.stats['ms_last'] = ticks_diff(self.ticks(), t0)
        self.stats['lines_in'] += self.taken
        self.steps.append([self.stats['ms_last'], self.stats['bytes_last'], self.taken,
                           self.stats['lines_out'] - out0])
        if len(self.steps) > 8:
            self.steps.pop(0)
        return self.taken

    # ---- what this board wrote goes up ----

    def _publish_own(self, c):
        from sporadic.device import storesync
        from sporadic.device.store import read_lines
        st = self.st
        storesync.seal(st)       # the log into an outbox segment (no-op when empty)
        seqs = st.out_seqs()
        if not seqs:
            return
        mp = st.root + 'mq.out'
        start = 0
        try:
            with open(mp) as f:
                n, d = f.read().split()
            n = int(n)
            if n in seqs and self._first(n) == d:
                start = n       # segments up to n went up (the same segment, not a new n)
        except (OSError, ValueError):
            pass
        for n in seqs:
            if n <= start:
                continue
            private = self._private(n)
            bufs = ([], [])         # (what every board needs, what only the companion needs)
            sizes = [0, 0]
            for line in read_lines(st._seg(n)):
                i = 1 if line[8:11] == ' r ' and line[:8] in private else 0
                bufs[i].append(line)
                sizes[i] += len(line) + 1
                if sizes[i] >= PUB_CHARS:
                    self._put_up(c, i, bufs[i])
                    sizes[i] = 0
            for i in (0, 1):
                if bufs[i]:
                    self._put_up(c, i, bufs[i])
            c.wait_acks(self._msg)      # the broker holds segment n: it is not sent again
            _put(mp, '%d %s' % (n, self._first(n)))

    def _put_up(self, c, i, buf):
        c.publish(self.pre + ('/r/' if i else '/d/') + self.me, '\n'.join(buf) + '\n')
        self.stats['lines_out'] += len(buf)
        del buf[:]

    def _private(self, n):
        """The job ids of segment n's results that no other board needs:
        `each`/`who` jobs that are no staged rollout (syncer.board_view's
        rule). One pass over the store for a segment's few ids; a job not
        found goes to every board (the safe side)."""
        from sporadic.device import storesync
        from sporadic.device.store import read_lines
        ids = []
        for line in read_lines(self.st._seg(n)):
            if line[8:11] == ' r ' and line[:8] not in ids:
                ids.append(line[:8])
        out = []
        if ids:
            for line in storesync.lines(self.st):
                if line[:8] in ids and line[8:9] == ' ':
                    k = line[9:13]
                    if (k == 'each' or k == 'who:') and 'waves=' not in line:
                        out.append(line[:8])
        return out

    def _first(self, n):
        from sporadic.device.store import read_lines
        for line in read_lines(self.st._seg(n)):
            return _digest(line)
        return '-'

    # ---- what the fleet wrote comes down ----

    def _msg(self, topic, payload):
        pre = self.pre
        if topic[:len(pre) + 1] != pre + '/':
            return
        rest = topic[len(pre) + 1:]
        kind = rest[:2]
        if kind == 'd/' and rest[2:] == self.me or kind not in ('f/', 'd/'):
            return          # its own records back, or what it did not subscribe to
        if payload is None:
            self._refused(topic, 'message longer than %d bytes: skipped' % self.max_msg)
            return
        if not payload:
            return          # a retained message cleared
        if kind == 'f/':
            name = _safe(rest[2:])
            name = 'f' + name if name is not None else 'x%05d' % self._n()
        else:
            name = 'r%05d' % self._n()
        if len(os.listdir(self.spool)) >= SPOOL_MAX:
            raise Full()
        f = open(self.spool + '/' + name, 'wb')
        try:
            f.write(payload)
            if payload[-1] != 10:
                f.write(b'\n')
        finally:
            f.close()

    def _n(self):
        self._k += 1
        return self._k

    def _refused(self, line, why):
        self.st.quarantine(line, why, 'mqtt')
        self.stats['refused'] += 1
        if len(self.reasons) >= 4:
            self.reasons.pop(0)
        self.reasons.append(why)
        self.refusals.append('%s\t%s' % (why, line[:200]))

    def _merge(self):
        """The spooled messages through the store's checks, in name order
        (batches by SEQ first), each file removed once merged."""
        import gc
        from sporadic.device import storesync
        from sporadic.device.store import read_lines
        names = os.listdir(self.spool)
        names.sort()
        for name in names:
            p = self.spool + '/' + name
            # out of memory (a signature check in a full heap): the file
            # stays, merged at the next wake; nothing is refused for it
            gc.collect()
            lines = list(read_lines(p))
            ref = []
            acc, _ = storesync.receive(self.st, lines, 'mqtt', ref)
            self.taken += acc
            for line, why in ref:
                self._refused(line, why)
            os.remove(p)

    def status(self):
        d = dict(self.stats)
        d['last_error'] = self.last_err
        d['refusals'] = self.reasons
        d['steps'] = self.steps
        d['broker'] = '%s:%d' % (self.m['host'], self.m.get('port', 1883))
        return d


def main(max_ms=None, max_steps=None):
    """The board's loop with a broker and no TCP network (cfg mqtt, no
    sync_port or peers: boot.main picks it): the runtime's steps, a broker
    step every every_ms. Never imports net/node.py nor the TCP server. A
    board that cannot join its Wi-Fi says why and runs the plain loop."""
    import board
    from sporadic.device import runtime
    from sporadic.net.wire import wifi_join
    rt = runtime.get()
    if not wifi_join(rt.cfg, board):
        print('sporadic: no network (Wi-Fi not joined): running without it')
        return runtime.main(max_steps=max_steps)
    bk = Broker(rt.id, rt.cfg, rt.store)
    return loop(rt, bk, None, max_ms, max_steps)


def loop(rt, bk, node=None, max_ms=None, max_steps=None):
    """The runtime's steps, the broker's step when due (a bounded slice;
    at once after a step that wrote records: the others wait on a done
    record of an any/one job), and the TCP node's polls when there is one
    (net/node.py main), else a 200 ms rest."""
    import time
    import board
    from sporadic.device import clock
    st = rt.store
    print('sporadic: %s syncs through %s' % (rt.id, bk.status()['broker']))
    t0 = ticks_ms()
    wake = None
    steps = 0
    changed = False
    # a wake takes what the fleet wrote while the board slept before its first
    # step (a cancel, another board's done record decide what is due now);
    # a broker that is down costs that one slice
    bk.sync()
    board.wdt_feed()
    while max_ms is None or ticks_diff(ticks_ms(), t0) < max_ms:
        now = clock.now()
        if node is not None and node.changed:
            changed = True
            node.changed = False
        if changed or wake is None or (now is not None and now >= wake):
            if max_steps is not None and steps >= max_steps:
                break
            steps += 1
            changed = False
            if node is not None and node.lead():
                node.changed = False
            logged = st.log_size
            wake = rt.step(now, None if node is None else node.led)
            if wake is None:
                wake = (now or 0) + 60
            if st.log_size != logged:
                bk.next = ticks_ms()
        board.wdt_feed()
        if bk.due(ticks_ms()):
            if bk.sync():
                changed = True
            board.wdt_feed()
        if node is not None:
            node.poll(200)
        elif hasattr(time, 'sleep_ms'):
            time.sleep_ms(200)
        else:
            time.sleep(0.2)
    if node is not None:
        node.close()
        return node
    return bk


def _read(p):
    try:
        with open(p) as f:
            return f.read()
    except OSError:
        return None


def _remove(p):
    try:
        os.remove(p)
    except OSError:
        pass


def _put(p, text):
    f = open(p, 'w')
    try:
        f.write(text)
    finally:
        f.close()
