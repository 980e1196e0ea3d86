# A compaction whose work follows what changed (store.compact, when
# jobs.txt's digest index jobs.rx is valid): the pending lines (log.txt,
# in.txt, sorted in RAM) are folded in group by group. Each job group they
# touch (merge.unit: a job's group, a '.' record alone) is found by
# bisection over the index's line offsets and compacted alone with them
# (merge.compact's rules never look past a unit). Everything between is copied as
# bytes, a block at a time, and so are the index's records (their offsets
# moved): no line of it is parsed, hashed or merged again. The index's count
# and XOR are updated by what left and what came. The output is written as
# store.compact's is (jobs.tmp, its stamp; jobs.rxn beside it), and the same
# recovery covers it.
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import hashlib
from sporadic.core import merge
from sporadic.device import store
from sporadic.device.store import REC, TRAILER, _write

BLOCK = const(512)     # bytes of jobs.txt copied at a time
RECS = const(32)       # index records copied at a time


def valid(st):
    """(count, xor, index bytes) of jobs.rx when its stamp is jobs.ok's, else None."""
    try:
        with open(st.root + 'jobs.ok') as f:
            ok = f.read().strip()
        f = open(st.root + store.RX, 'rb')
    except OSError:
        return None
    try:
        n = f.seek(0, 2) - TRAILER
        if n < 0 or n % REC:
            return None
        f.seek(n)
        t = f.read(TRAILER).decode().split()
        if len(t) != 4 or ' '.join(t[2:]) != ok or int(t[0], 16) * REC != n:
            return None
        import binascii
        return int(t[0], 16), bytearray(binascii.unhexlify(t[1])), n
    except (ValueError, UnicodeError):
        return None
    finally:
        f.close()


class _Old:
    # jobs.txt and its index, read at record i
    def __init__(self, st, n):
        self.rx = open(st.root + store.RX, 'rb')
        self.jf = open(st.jobs, 'rb')
        self.n = n
        self.size = self.jf.seek(0, 2)
        self.r = bytearray(REC)

    def rec(self, i):
        self.rx.seek(i * REC)
        self.rx.readinto(self.r)
        return self.r

    def off(self, i):
        if i >= self.n:
            return self.size
        r = self.rec(i)
        return r[8] | (r[9] << 8) | (r[10] << 16) | (r[11] << 24)

    def line(self, i):
        self.jf.seek(self.off(i))
        return self.jf.readline()[:-1]

    def lower(self, key, lo):
        # the first record >= lo whose line is >= key (bytes)
        hi = self.n
        while lo < hi:
            m = (lo + hi) >> 1
            if self.line(m) < key:
                lo = m + 1
            else:
                hi = m
        return lo

    def close(self):
        self.rx.close()
        self.jf.close()


def splice(st, pend, conf):
    """Write jobs.tmp and jobs.rxn: jobs.txt with the sorted lines `pend`
    folded in. Returns the stamp of jobs.tmp, or None when jobs.rx is not
    valid (store.compact then rewrites the whole file)."""
    v = valid(st)
    if v is None:
        return None
    n, x, _ = v
    old = _Old(st, n)
    out = open(st.tmp, 'wb')
    rxo = open(st.root + store.RXN, 'wb')
    h = hashlib.sha256()
    w = [0, n]        # bytes written, records in the output
    buf = bytearray(BLOCK)
    rb = bytearray(REC * RECS)

    def copy(a, b):
        # records [a, b) of the old file: their bytes, their index records
        if a >= b:
            return
        o0 = old.off(a)
        o1 = old.off(b)
        old.jf.seek(o0)
        left = o1 - o0
        mv = memoryview(buf)
        while left > 0:
            k = old.jf.readinto(mv[:min(BLOCK, left)])
            if not k:
                raise OSError('jobs.txt shorter than its index')
            _write(out, mv[:k], h)
            left -= k
        delta = w[0] - o0
        w[0] += o1 - o0
        old.rx.seek(a * REC)
        i = a
        rm = memoryview(rb)
        while i < b:
            c = min(RECS, b - i)
            old.rx.readinto(rm[:c * REC])
            for j in range(c):
                p = j * REC + 8
                u = (rb[p] | (rb[p + 1] << 8) | (rb[p + 2] << 16) | (rb[p + 3] << 24)) + delta
                rb[p] = u & 255
                rb[p + 1] = (u >> 8) & 255
                rb[p + 2] = (u >> 16) & 255
                rb[p + 3] = u >> 24
            _write(rxo, rm[:c * REC])
            i += c
            if store.feed is not None:
                store.feed()

    def drop(a, b):
        # records [a, b) leave the file: their digests leave the XOR
        for i in range(a, b):
            r = old.rec(i)
            for j in range(8):
                x[j] ^= r[j]
        w[1] -= b - a

    def put(line):
        e = line.encode()
        d = hashlib.sha256(e).digest()
        r = bytearray(REC)
        u = w[0]
        for j in range(8):
            r[j] = d[j]
            x[j] ^= d[j]
        r[8] = u & 255
        r[9] = (u >> 8) & 255
        r[10] = (u >> 16) & 255
        r[11] = u >> 24
        _write(out, e + b'\n', h)
        _write(rxo, r)
        w[0] = u + len(e) + 1
        w[1] += 1

    try:
        pos = 0
        i = 0
        np = len(pend)
        while i < np:
            u = merge.unit(pend[i])
            j = i + 1
            while j < np and pend[j][:len(u)] == u:
                j += 1
            uk = u.encode()
            lo = old.lower(uk, pos)
            hi = old.lower(uk + b'\xff', lo)   # every line that starts with it ('\xff' is no UTF-8 byte)
            copy(pos, lo)
            had = []
            if hi > lo:
                old.jf.seek(old.off(lo))
                for _ in range(hi - lo):
                    had.append(old.jf.readline()[:-1].decode())
            drop(lo, hi)
            for c in merge.compact(merge.merge_sorted(had, pend[i:j]), conf):
                put(c)
            had = None
            pos = hi
            i = j
        copy(pos, n)
        out.close()
        out = None
        s = store.stamp_text(w[0], h)
        import binascii
        t = '%x %s %s' % (w[1], binascii.hexlify(x).decode(), s)
        _write(rxo, (t + ' ' * (TRAILER - 1 - len(t)) + '\n').encode())
        rxo.close()
        rxo = None
        return s
    finally:
        old.close()
        if out is not None:
            out.close()
        if rxo is not None:
            rxo.close()
