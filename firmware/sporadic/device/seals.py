# The seal records (`.b`) a store holds, read for a delivery's check
# (trust._held_cover: which of its lines a held, verified seal covers):
# jobs.txt's leading `.b` records word by word through one small buffer,
# their digests decoded as they pass. A seal record is ~1 KB, and a line
# read whole (readline) grows by reallocation, 16 bytes at a time, which
# scattered a 128K unix board's heap until a delivery found no 1 KB run
# (docs/budgets.md#27). Loaded for that check only: a delivery whose lines
# its own seals cover never loads it. Its names (read, end, flush, value,
# pos, data, buf, hex; _PIECE a private const) are ones the firmware or a
# sync's other modules intern already: loaded in a sync's second P, where
# the qstr pool stands a few names short of a new 4.5 KB block (32-bit),
# it adds four (docs/budgets.md#31).
try:
    from micropython import const
except ImportError:  # CPython (tools that read a board's flash)
    def const(x):
        return x

import binascii
from sporadic.core import batch

_PIECE = const(128)      # bytes of jobs.txt read at a time
SET_MAX = const(512)     # held digests kept as a set at most (~37 bytes each on a 32-bit heap)


class _Dots:
    """The leading records of a sorted job file (jobs.txt: its `.b` records
    come first), read word by word through one small buffer. A seal record
    is ~1 KB, and a line read whole (readline) grows by reallocation, 16
    bytes at a time: on a 128K unix board that scattered the heap until a
    delivery found no 1 KB run (docs/budgets.md#27)."""

    def __init__(self, path):
        self.f = open(path, 'rb')
        self.b = bytearray(_PIECE)
        self.n = 0
        self.pos = 0

    def close(self):
        self.f.close()

    def read(self, out=None, sink=None):
        """The next word (up to a space or the line's end): copied into
        `out` (a bytearray; cut at its length) or handed to sink(memoryview)
        piece by piece, or skipped. Returns (its length, the byte that ended
        it: 32, 10, or -1 at the end of the file)."""
        k = 0
        while True:
            if self.pos >= self.n:
                self.n = self.f.readinto(self.b) or 0
                self.pos = 0
                if not self.n:
                    return k, -1
            b = self.b
            i = self.pos
            n = self.n
            j = b.find(b' ', i, n)
            e = b.find(b'\n', i, j if j >= 0 else n)
            if e >= 0:
                j = e
            end = n if j < 0 else j
            if out is not None and k < len(out):
                m = min(end - i, len(out) - k)
                out[k:k + m] = memoryview(b)[i:i + m]
            elif sink is not None and end > i:
                sink(memoryview(b)[i:end])
            k += end - i
            if j >= 0:
                self.pos = j + 1
                return k, b[j]
            self.pos = n

    def end(self, t):
        # skip what is left of the line whose last word ended with t
        while t == 32:
            t = self.read()[1]
        return t


class _Decoder:
    # a .b record's DIGESTS decoded as its pieces pass (base64 in a slot
    # record, hex in a plain one) into one buffer of MAX_LINES digests
    def __init__(self):
        self.out = bytearray(batch.DIGEST * batch.MAX_LINES)
        self.data = bytearray(64)     # a multiple of 4 (base64) and 2 (hex)
        self.a = 0
        self.k = 0
        self.hex = False

    def start(self, hex):
        self.a = 0
        self.k = 0
        self.hex = hex

    def flush(self):
        if self.a:
            v = memoryview(self.data)[:self.a]
            d = binascii.unhexlify(v) if self.hex else binascii.a2b_base64(v)
            if self.k + len(d) > len(self.out):
                raise ValueError('too many digests')
            self.out[self.k:self.k + len(d)] = d
            self.k += len(d)
            self.a = 0

    def __call__(self, buf):
        acc = self.data
        i = 0
        while i < len(buf):
            m = min(len(buf) - i, len(acc) - self.a)
            acc[self.a:self.a + m] = buf[i:i + m]
            self.a += m
            i += m
            if self.a == len(acc):
                self.flush()

    def value(self):
        self.flush()
        return memoryview(self.out)[:self.k]


def held(st):
    """The DIGESTS of each .b record the store holds (verified when they
    arrived; no signature is checked here): jobs.txt's read in pieces, then
    the pending lines' (in RAM already). Each is a memoryview of one
    buffer, good until the next is asked for."""
    try:
        f = _Dots(st.jobs)
    except OSError:
        f = None
    if f is not None:
        w = bytearray(16)
        dec = _Decoder()
        try:
            while True:
                n, t = f.read(w)
                if n != 2 or t != 32 or w[:2] != b'.b':
                    break                     # past the .b records (sorted first)
                n, t = f.read(w)
                slot = n and w[0] == 64       # '@SLOT SEQ KEYID DIGESTS SIG', else 'SEQ KEYID DIGESTS SIG'
                if slot and t == 32:
                    t = f.read()[1]           # SEQ
                if t == 32:
                    t = f.read()[1]           # KEYID
                seg = None
                if t == 32:
                    dec.start(not slot)
                    try:
                        t = f.read(None, dec)[1]
                        seg = dec.value()
                    except (ValueError, TypeError):
                        seg = None            # not a record this store could have verified: no cover
                if t >= 0:
                    t = f.end(t)
                if seg is not None and len(seg):
                    yield seg
                if t < 0:
                    break
        finally:
            f.close()
    for line in st.pending():
        if line[:3] == '.b ':
            seg = batch.held_digests(line)
            if seg is not None:
                yield seg


def kept(st):
    """held()'s digests, kept across a sync's deliveries (trust._held_segs):
    a set of the 8-byte digests when there are SET_MAX or fewer (a line's
    look-up is then one hash, not a bisection of each seal in Python: ~1 ms
    a line on a Pico, a first sync's 300 lines against its 5 seals,
    docs/budgets.md#27), else a list of each seal's."""
    segs = [bytes(seg) for seg in held(st)]
    n = 0
    for seg in segs:
        n += len(seg)
    if n > SET_MAX * batch.DIGEST:
        return segs
    d = set()
    for seg in segs:
        keep(d, seg)
    return d


def keep(segs, d):
    """A seal's digests d (bytes) into kept()'s segs."""
    if not d:
        return
    if isinstance(segs, set):
        for i in range(0, len(d), batch.DIGEST):
            segs.add(d[i:i + batch.DIGEST])
    else:
        segs.append(d)


def cover(st, lines, segs=None):
    """[bool]: which lines a .b record held in the store covers (they were
    verified when they arrived; here one sha256 a line, no RSA). The held
    records are read in pieces, unless `segs` (kept()) has their digests."""
    ds = [batch.line_digest(c) for c in lines]
    if isinstance(segs, set):
        return [d in segs for d in ds]
    ok = [False] * len(lines)
    left = len(lines)
    for seg in (held(st) if segs is None else segs):
        for i in range(len(ds)):
            if not ok[i] and batch.find_digest(seg, ds[i]):
                ok[i] = True
                left -= 1
        if not left:
            break
    return ok
