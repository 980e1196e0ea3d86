# jobs.txt's digest index, jobs.rx: written beside each compaction's output
# (Index), read by a sync's requests (index: recon.Responder's), and the
# compaction whose work follows what changed (splice, store.compact when
# jobs.txt's digest index jobs.rx is valid): the pending lines (log.txt,
# in.txt, sorted in RAM) are folded in group by group. Each job group they
# touch (unit(): a job's group, a '.' record alone) is found by
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
import binascii
import hashlib
from sporadic.core import merge
from sporadic.device import store
from sporadic.device.store import write

RX = 'jobs.rx'            # jobs.txt's digest index (Index): what a sync reads instead of the file
RXN = 'jobs.rxn'          # the index of a compaction's output, renamed to RX before it is stamped
REC = const(12)           # recon.REC: an index record (digest, offset)
TRAILER = const(64)       # bytes of jobs.rx's trailer
SLOT_AT = const(9)        # batch.SLOT_AT: len('.b @0001 '), a seal record's slot

BLOCK = const(512)     # bytes of jobs.txt copied at a time
RECS = const(32)       # index records copied at a time
RX_RAM = const(24576)  # bytes of jobs.rx a splice holds in RAM on a heap of store.ROOMY
ROOMY_X = const(8)     # both times this there: a write is ~0.2 M instructions on a Pico


class Index:
    """jobs.rx, written beside a compaction's output: per line its digest
    (recon.digest, 8 bytes) and its offset in the file (u32, little-endian),
    REC bytes a record, in the file's order; then a trailer of the count,
    the XOR of every digest and the stamp of the file it indexes. A cache:
    a sync takes it only when the stamp is jobs.ok's (index()),
    else builds it again; a cut write leaves no trailer."""

    def __init__(self, path, f=None):
        # f: a binary stream to write to instead (companion.files: an image's)
        self.own = f is None
        self.f = open(path, 'wb') if f is None else f
        self.buf = bytearray(REC * RECS)
        self.n = 0           # bytes in buf
        self.count = 0
        self.off = 0         # offset of the next line
        self.x = bytearray(8)

    def add(self, line):
        e = line.encode()
        d = hashlib.sha256(e).digest()
        b = self.buf
        o = self.n
        _rec(b, o, d, self.x, self.off)
        self.off += len(e) + 1
        self.count += 1
        self.n = o + REC
        if self.n == len(b):
            write(self.f, b)
            self.n = 0

    def close(self, stamp):
        if self.n:
            write(self.f, memoryview(self.buf)[:self.n])
        t = '%x %s %s' % (self.count, binascii.hexlify(self.x).decode(), stamp)
        write(self.f, (t + ' ' * (TRAILER - 1 - len(t)) + '\n').encode())
        self.abort()

    def abort(self):
        if self.own:
            try:
                self.f.close()     # (again after close: a no-op)
            except OSError:
                pass


def _rec(b, o, d, x, off):
    # an index record at b[o:]: the digest's first 8 bytes (into the XOR x
    # too) and the line's offset, u32 little-endian (slices: a Python loop
    # over the bytes was ~1 ms a line on a Pico, docs/budgets.md#27)
    b[o:o + 8] = d[:8]
    b[o + 8:o + 12] = off.to_bytes(4, 'little')
    for i in range(8):
        x[i] ^= d[i]


def index(st):
    """jobs.txt's digest index (store.Index) for the sync's requests
    (recon.Responder's `index`): S of the root reads its trailer alone, N,
    D and G its 12-byte records instead of every line of the file. Lines
    pending (in.txt, log.txt) are folded in first: the compaction the sync
    makes anyway, once for all its deliveries (receive compacts only when
    in.txt outgrows the heap). An index whose stamp is not jobs.ok's (the
    loop compacted with an older firmware, a cut write) is made again in
    one pass. None (answer from the lines): the flash is full."""
    st.rx = True     # from now on this store's compactions keep the index
    if st.pending():
        try:
            st.compact()
        except OSError as e:    # store.full: answer from the lines
            if e.args[0] != store.ENOSPC:
                raise
            return None
    if not store.size(st.jobs):
        return _Rx(st, None, 0, bytes(8), 0)
    ok = _read(st.root + 'jobs.ok')
    if ok is None:
        return None
    path = st.root + RX
    try:
        f = open(path, 'rb')
    except OSError:
        f = None
    if f is not None:
        try:
            n = f.seek(0, 2) - TRAILER
            if n >= 0 and n % REC == 0:
                f.seek(n)
                t = f.read(TRAILER).decode().split()
                if len(t) == 4 and ' '.join(t[2:]) == ok and int(t[0], 16) * REC == n:
                    return _Rx(st, path, int(t[0], 16), binascii.unhexlify(t[1]), n)
        except (ValueError, UnicodeError):
            pass
        finally:
            f.close()
    try:
        rx = Index(path)
        for line in st.jobs_lines():
            rx.add(line)
        rx.close(ok)
    except OSError:
        rx.abort()
        return None
    return _Rx(st, path, rx.count, bytes(rx.x), rx.count * REC)


class _Rx:
    # a valid jobs.rx, as recon.Responder reads it
    def __init__(self, st, path, count, xor, nbytes):
        self.st = st
        self.path = path
        self.count = count
        self.xor = xor
        self.nbytes = nbytes

    def chunks(self):
        if not self.nbytes:
            return
        f = open(self.path, 'rb')
        buf = bytearray(REC * 64)
        mv = memoryview(buf)
        left = self.nbytes
        try:
            while left > 0:
                want = min(len(buf), left)
                n = 0
                while n < want:
                    r = f.readinto(mv[n:want])
                    if not r:
                        raise OSError('jobs.rx cut short')
                    n += r
                left -= n
                yield buf, n
                if store.feed is not None:
                    store.feed()
        finally:
            f.close()

    def lines(self, offsets):
        f = open(self.st.jobs, 'rb')
        try:
            for o in offsets:
                f.seek(o)
                yield f.readline().decode()
        finally:
            f.close()


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def unit(line):
    """The prefix of the lines whose compaction decides this line's fate
    (compact() over those alone gives what it gives over the whole file):
    a job's group, 'ID '; a '.' record, which compact passes through, the
    record itself; a slot batch record ('.b @SLOT SEQ ...', where the last of
    a slot replaces the others) its slot's records, '.b @SLOT ' (never all
    the slots': a 1,000-job file's 16 seal records are 17 KB, which a 128K
    unix board's splice could not hold beside a delivery). A compaction of a few
    new lines into a large file (splice) rewrites these alone. Keep in step
    with the rules of merge.compact() (here, not in core/merge.py, which the
    loop holds in its heap: a 72K board ran short by these bytes)."""
    if line[:1] != '.':
        return line[:merge.ID_LEN] + ' '
    if line[:4] == '.b @':
        return line[:SLOT_AT]
    return line


def full(st):
    """The flash cannot take what a compaction or a delivery writes: the
    store stays as it was. OSError(ENOSPC) with one short line for the peer
    (recon cuts at 80): 'board full' is what the companion looks for."""
    return OSError(store.ENOSPC, 'board full: keeps its %d B of jobs' % store.size(st.jobs))


def compact(st, pend, extra, conf):
    """store.compact of a sync's store: jobs.tmp and its index jobs.rxn (a
    splice when jobs.rx is valid and the file holds more lines than come
    in, else the whole file through merge.compact),
    jobs.rxn renamed to jobs.rx, the stamp to jobs.nok. On a full flash what
    it wrote goes, and it raises full() (the old file and the logs stay)."""
    rxn = st.root + RXN
    try:
        t = None
        if extra is None and store.size(st.jobs):
            t = splice(st, pend, conf)
        if t is None:
            t = _rewrite(st, pend, extra, conf)
        if store.exists(rxn):
            store.rename(rxn, st.root + RX)
        store.put(st.root + 'jobs.nok', t)
    except Exception as e:
        for p in (st.tmp, rxn, st.root + 'jobs.nok'):
            if store.exists(p):
                store.remove(p)
        if isinstance(e, OSError) and e.args and e.args[0] == store.ENOSPC:
            st.full_at = st.log_size + st.in_size
            raise full(st)
        raise


def _rewrite(st, pend, extra, conf):
    # the whole file through merge.compact, into jobs.tmp and (without
    # `extra`: a re-import writes none, the next sync makes it) jobs.rxn
    f = open(st.tmp, 'w')
    h = hashlib.sha256()
    rx = Index(st.root + RXN) if extra is None else None
    buf = []
    n = 0
    # a roomy heap (a Pico's) writes 4 KB at a time: a first sync's 27 KB
    # went in 65 writes of CHUNK, ~1 ms of a Pico's time each besides the
    # bytes (docs/budgets.md#27)
    most = store.CHUNK * 16 if store.roomy() else store.CHUNK
    src = merge.merge_sorted(st.jobs_lines(), pend)
    if extra is not None:
        src = merge.merge_sorted(src, extra)
    try:
        for line in merge.compact(src, conf):
            if rx is not None:
                rx.add(line)
            buf.append(line)
            n += len(line) + 1
            if n >= most:
                buf.append('')
                write(f, '\n'.join(buf), h)
                buf = []
                n = 0
        if buf:
            buf.append('')
            write(f, '\n'.join(buf), h)
        f.close()
        f = None
        t = store.stamp_text(store.size(st.tmp), h)
        if rx is not None:
            rx.close(t)
        return t
    finally:
        if f is not None:
            f.close()
        if rx is not None:
            rx.abort()


def valid(st):
    """(count, xor, index bytes) of jobs.rx when its stamp is jobs.ok's, else None."""
    try:
        with open(st.root + 'jobs.ok') as f:
            ok = f.read().strip()
        f = open(st.root + RX, 'rb')
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
        return int(t[0], 16), bytearray(binascii.unhexlify(t[1])), n
    except (ValueError, UnicodeError):
        return None
    finally:
        f.close()


class _Old:
    # jobs.txt and its index, read at record i (an index of up to RX_RAM
    # bytes held in RAM on a roomy heap: a bisection step is one read)
    def __init__(self, st, n):
        self.rx = open(st.root + RX, 'rb')
        self.jf = open(st.jobs, 'rb')
        self.n = n
        self.size = self.jf.seek(0, 2)
        self.r = bytearray(REC)
        self.all = None
        if n * REC <= RX_RAM and store.roomy():
            a = bytearray(n * REC)
            if self.rx.readinto(a) == len(a):
                self.all = a

    def rec(self, i):
        if self.all is not None:
            return memoryview(self.all)[i * REC:(i + 1) * REC]
        self.rx.seek(i * REC)
        self.rx.readinto(self.r)
        return self.r

    def off(self, i):
        if i >= self.n:
            return self.size
        r = self.all
        if r is None:
            r = self.rec(i)
            o = 8
        else:
            o = i * REC + 8
        return r[o] | (r[o + 1] << 8) | (r[o + 2] << 16) | (r[o + 3] << 24)

    def head(self, i, k):
        # the first k bytes of line i (enough to compare it with a k-byte key)
        self.jf.seek(self.off(i))
        return self.jf.read(k)

    def lower(self, key, lo):
        # the first record >= lo whose line is >= key (bytes): a line is
        # below the key exactly when its first len(key) bytes are
        hi = self.n
        k = len(key)
        if lo < hi and self.head(lo, k) >= key:
            return lo      # (a unit the file does not hold: its end is found in one step)
        while lo < hi:
            m = (lo + hi) >> 1
            if self.head(m, k) < key:
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
    if len(pend) > n:
        # more new lines than the file holds (a first sync): each spliced
        # line costs about twice a rewritten one (its unit's look-ups, two
        # small writes), so the whole file is rewritten (0.96 s -> 0.6 s of
        # a Pico's first sync of 300 jobs, docs/budgets.md#27)
        return None
    old = _Old(st, n)
    out = open(st.tmp, 'wb')
    rxo = open(st.root + RXN, 'wb')
    h = hashlib.sha256()
    w = [0, n]        # bytes written, records in the output
    x8 = ROOMY_X if store.roomy() else 1
    buf = bytearray(BLOCK * x8)
    rb = bytearray(REC * RECS * x8)
    pj = []           # put()'s lines and their index records not yet written
    pr = []

    def flush():
        if pj:
            write(out, b''.join(pj), h)
            write(rxo, b''.join(pr))
            del pj[:]
            del pr[:]

    def copy(a, b):
        # records [a, b) of the old file: their bytes, their index records
        flush()
        if a >= b:
            return
        o0 = old.off(a)
        o1 = old.off(b)
        old.jf.seek(o0)
        left = o1 - o0
        mv = memoryview(buf)
        blocks = 0
        while left > 0:
            k = old.jf.readinto(mv[:min(len(buf), left)])
            if not k:
                raise OSError('jobs.txt shorter than its index')
            write(out, mv[:k], h)
            left -= k
            blocks += 1
            if not blocks & (7 // x8) and store.feed is not None:
                # every 4 KB copied: the watchdog, and the companion's
                # silence timeout (a Pico's 445 KB file is ~20 s of it)
                store.feed()
        delta = w[0] - o0
        w[0] += o1 - o0
        old.rx.seek(a * REC)
        i = a
        rm = memoryview(rb)
        while i < b:
            c = min(len(rb) // REC, b - i)
            old.rx.readinto(rm[:c * REC])
            for j in range(c):
                p = j * REC + 8
                u = (rb[p] | (rb[p + 1] << 8) | (rb[p + 2] << 16) | (rb[p + 3] << 24)) + delta
                rb[p] = u & 255
                rb[p + 1] = (u >> 8) & 255
                rb[p + 2] = (u >> 16) & 255
                rb[p + 3] = u >> 24
            write(rxo, rm[:c * REC])
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
        _rec(r, 0, d, x, u)
        pj.append(e + b'\n')
        pr.append(r)
        w[0] = u + len(e) + 1
        w[1] += 1
        if len(pj) >= RECS:
            flush()

    try:
        pos = 0
        i = 0
        np = len(pend)
        while i < np:
            u = unit(pend[i])
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
        copy(pos, n)     # (and what put() holds: flush)
        out.close()
        out = None
        s = store.stamp_text(w[0], h)
        t = '%x %s %s' % (w[1], binascii.hexlify(x).decode(), s)
        write(rxo, (t + ' ' * (TRAILER - 1 - len(t)) + '\n').encode())
        rxo.close()
        rxo = None
        return s
    finally:
        old.close()
        if out is not None:
            out.close()
        if rxo is not None:
            rxo.close()
