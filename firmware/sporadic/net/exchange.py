# A broker wake's network phase (net/broker.py sync): connect, subscribe
# when the session is new, report the last merge's refusals, put this
# board's outbox segments up, take what the broker holds for this board
# into the spool (mq/NAME, written piece by piece as it arrives, then
# acknowledged), disconnect. Its code and the client's (net/mqtt.py) are in
# RAM for this phase only: the merge of the spool comes after, alone.
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import os

from sporadic.device import store

QUIET_MS = const(100)      # nothing more for this long after the PINGRESP: done (what comes later waits in the session)
PUB_CHARS = const(2048)    # characters of own records in one message
SPOOL_MAX = const(64)      # messages spooled in one wake (more wait for the next)
SUBS = '2'                 # the subscriptions' version (mq.sub): f/# and d/+


class Full(Exception):
    pass


def client(bk):
    from sporadic.net import mqtt
    m = bk.m
    if bk.max_msg is None:
        bk.max_msg = mqtt.MAX_MSG
    tls = None
    if m.get('tls'):
        tls = {'ca': m.get('ca')}
    return mqtt.Client('sporadic-' + bk.me, m['host'], m.get('port', 1883), m.get('user'),
                       m.get('password'), m.get('keepalive', 60), tls, bk.max_msg, bk.ticks)


def run(bk, deadline):
    """Connect to disconnect by `deadline` (ticks); raises what broke it
    off (the socket closed). bk.stats['bytes_last']: the MQTT bytes."""
    c = client(bk)
    take = _taker(bk)
    try:
        for name in os.listdir(bk.spool):
            # names of messages spooled by a wake whose merge broke off stay taken
            if name[0] in 'rx' and name[1:].isdigit() and int(name[1:]) > bk.k:
                bk.k = int(name[1:])
        try:
            present = c.connect(deadline, clean=False)
            mark = bk.st.root + 'mq.sub'
            if not present or _read(mark) != SUBS:
                # a new session: subscribe again, the retained snapshot comes whole
                _remove(mark)
                c.subscribe([bk.pre + '/f/#', bk.pre + '/d/+'], take)
                store.put(mark, SUBS)
                bk.stats['subscribed'] += 1
            _report(bk, c, take)
            _publish_own(bk, c, take)
            c.ping()
            c.poll(take, QUIET_MS)
        except Full:
            pass        # the rest waits in the session (not acknowledged)
        c.disconnect()
    finally:
        c.close()
        bk.stats['bytes_last'] = c.bytes_in + c.bytes_out


def _taker(bk):
    return lambda topic, size, piece: _take(bk, topic, size, piece)


def _report(bk, c, take):
    # the refusals of the last merge (mq.q: the merge runs after the
    # disconnect), reported on PRE/q/ID
    p = bk.st.root + 'mq.q'
    text = _read(p)
    if text:
        c.publish(bk.pre + '/q/' + bk.me, text)
        c.wait_acks(take)
        _remove(p)


def _publish_own(bk, c, take):
    from sporadic.device import storesync
    from sporadic.device.store import read_lines
    st = bk.st
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
        if n in seqs and _first(bk, n) == d:
            start = n       # segments up to n went up (the same segment, not a new n)
    except (OSError, ValueError):
        pass
    for n in seqs:
        if n <= start:
            continue
        private = _private(bk, n)
        bufs = ([], [])         # (what every board needs, what only the companion needs)
        sizes = [0, 0]
        for line in read_lines(st._seg(n)):
            i = 1 if line[8:11] == ' r ' and line[:8] in private else 0
            bufs[i].append(line)
            sizes[i] += len(line) + 1
            if sizes[i] >= PUB_CHARS:
                _put_up(bk, c, i, bufs[i])
                sizes[i] = 0
        for i in (0, 1):
            if bufs[i]:
                _put_up(bk, c, i, bufs[i])
        c.wait_acks(take)      # the broker holds segment n: it is not sent again
        store.put(mp, '%d %s' % (n, _first(bk, n)))


def _put_up(bk, c, i, buf):
    c.publish(bk.pre + ('/r/' if i else '/d/') + bk.me, '\n'.join(buf) + '\n')
    bk.stats['lines_out'] += len(buf)
    del buf[:]


def _private(bk, n):
    """The job ids of segment n's results that no other board needs:
    `each`/`who` jobs that are no staged rollout (syncer.board_view's
    rule). One pass over the store for a segment's few ids; a job not
    found goes to every board (the safe side)."""
    from sporadic.device import storesync
    from sporadic.device.store import read_lines
    ids = []
    for line in read_lines(bk.st._seg(n)):
        if line[8:11] == ' r ' and line[:8] not in ids:
            ids.append(line[:8])
    out = []
    if ids:
        for line in storesync.lines(bk.st):
            if line[:8] in ids and line[8:9] == ' ':
                k = line[9:13]
                if (k == 'each' or k == 'who:') and 'waves=' not in line:
                    out.append(line[:8])
    return out


def _first(bk, n):
    from sporadic.device.store import read_lines
    for line in read_lines(bk.st._seg(n)):
        return _digest(line)
    return '-'


def _take(bk, topic, size, piece):
    # one message as the client hands it over (mqtt.poll), written to
    # the spool piece by piece: never whole in RAM
    pre = bk.pre
    if topic[:len(pre) + 1] != pre + '/':
        return
    rest = topic[len(pre) + 1:]
    kind = rest[:2]
    if kind == 'd/' and rest[2:] == bk.me or kind not in ('f/', 'd/'):
        return          # its own records back, or what it did not subscribe to
    if size is None:
        bk.refused(topic, 'message longer than %d bytes: skipped' % bk.max_msg)
        return
    if not size:
        return          # a retained message cleared
    if kind == 'f/':
        name = _safe(rest[2:])
        name = 'f' + name if name is not None else 'x%05d' % _n(bk)
    else:
        name = 'r%05d' % _n(bk)
    if len(os.listdir(bk.spool)) >= SPOOL_MAX:
        raise Full()
    # written whole under a temporary name, then renamed: the merge never
    # takes a message cut short (it comes again: not acknowledged)
    tmp = bk.spool + '/tmp'
    f = open(tmp, 'wb')
    try:
        last = 10
        while True:
            mv = piece()
            if mv is None:
                break
            f.write(mv)
            last = mv[-1]
        if last != 10:
            f.write(b'\n')
    finally:
        f.close()
    os.rename(tmp, bk.spool + '/' + name)
    bk.spooled += 1


def _n(bk):
    bk.k += 1
    return bk.k


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

