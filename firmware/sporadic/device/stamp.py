# Stamps (docs/device.md#stamps): what the store last wrote, as the size
# of a file and the first 8 bytes of its sha256 (store.stamp_text), hashed
# on the flash here, and whether a board checks what it stores at all
# (signed). Loaded by the store's open (recover.py) and a sync
# (storesync.receive, trust.load); by the loop only for verify() after an
# open on the wake index's word. (Device code: it reads files and resets
# the board; signed() alone would be pure, but a core module of its own
# cost 480 bytes more of a 64-bit heap at each open and sync.)
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import hashlib
from sporadic.device import store

HASH_CHUNK = const(512)   # bytes read at a time
CHAIN_MAX = const(24)     # pieces in in.ok's chain before in.txt is hashed whole again (chain_start)


def signed(cfg):
    """Does a board with this cfg.json check what it stores (trust.py)? Not
    in an insecure fleet, nor on a flash never provisioned with a key."""
    mode = cfg.get('mode')
    return not (mode == 'insecure' or (not mode and not cfg.get('pubkey')))


def file_stamp(path):
    """store.stamp_text of a file on the flash, read HASH_CHUNK bytes at a
    time into one buffer (constant memory; feeds the watchdog as it goes);
    None when there is no such file."""
    try:
        f = open(path, 'rb')
    except OSError:
        return None
    h = hashlib.sha256()
    buf = bytearray(HASH_CHUNK)
    n = 0
    k = 0
    try:
        while True:
            r = f.readinto(buf)
            if not r:
                break
            h.update(buf if r == HASH_CHUNK else memoryview(buf)[:r])
            n += r
            k += 1
            if k == 16:     # every 8 KB, about FEED_LINES lines
                k = 0
                if store.feed is not None:
                    store.feed()
    finally:
        f.close()
    return store.stamp_text(n, h)


# in.txt's stamp (in.ok) is a chain of its pieces, one a delivery, so that
# a sync's P stamps what it appended without reading the whole file again
# (a Pico's first sync of 300 jobs hashed ~100 KB of in.txt for its 7 Ps,
# docs/budgets.md#27): "S1,S2,..,SK HEX", SK the file's size, each Si where
# a delivery ended; HEX the first 8 bytes of D_K, D_1 = sha256(bytes [0, S1))
# and D_i = sha256(D_(i-1) + bytes [S_(i-1), S_i)), 8 bytes each. One piece
# is "SIZE HEX", the stamp of the whole file (store.stamp_text).


def chain_ok(path, text):
    """Does the file at path match in.ok's text (a chain of pieces)?"""
    try:
        a, hx = text.split(' ')
        ends = [int(x) for x in a.split(',')]
    except (AttributeError, ValueError):
        return False
    try:
        f = open(path, 'rb')
    except OSError:
        return False
    buf = bytearray(HASH_CHUNK)
    mv = memoryview(buf)
    d = None
    n = 0
    k = 0
    try:
        for e in ends:
            if e <= n and d is not None:
                return False
            h = hashlib.sha256()
            if d is not None:
                h.update(d)
            while n < e:
                r = f.readinto(mv[:min(HASH_CHUNK, e - n)])
                if not r:
                    return False
                h.update(mv[:r])
                n += r
                k += 1
                if k == 16:
                    k = 0
                    if store.feed is not None:
                        store.feed()
            d = h.digest()[:8]
        if f.read(1):
            return False      # more than the chain says
    finally:
        f.close()
    import binascii
    return d is not None and binascii.hexlify(d).decode() == hx


def chain_start(path, size, text):
    """[the chain's ends so far with a trailing comma, a sha256 fed the
    last digest]: what a delivery appending to in.txt (size bytes now, its
    stamp `text`) feeds the bytes it writes, then chain_text(). A file whose
    stamp is no chain ending at its size, or one of CHAIN_MAX pieces, is
    hashed whole as the first piece (as every delivery did before)."""
    h = hashlib.sha256()
    if not size:
        return ['', h]
    try:
        a, hx = text.split(' ')
        if int(a[a.rfind(',') + 1:]) != size or a.count(',') >= CHAIN_MAX - 1:
            raise ValueError
    except (AttributeError, ValueError):
        a, hx = file_stamp(path).split(' ')
    import binascii
    h.update(binascii.unhexlify(hx))
    return [a + ',', h]


def chain_text(c, size):
    """in.ok's text for a file of size bytes after chain_start's c was fed
    every byte written since."""
    return c[0] + store.stamp_text(size, c[1])


def verify(st):
    """A store whose open took jobs.txt's stamp on the wake index's word
    (size and mtime unchanged: device/wake.py) hashes it once, at its first
    full pass, compaction or sync: a file edited behind the store's back
    that kept both is caught here; the board then starts again with the
    index cleared, and its open deals with the file in the emptiest heap."""
    s = file_stamp(st.jobs)
    try:
        with open(st.root + 'jobs.ok') as f:
            ok = f.read().strip()
    except OSError:
        ok = None
    import sporadic
    sporadic.forget('sporadic.device.stamp')
    if s == ok:
        st.unverified = False
        return
    from sporadic.device import wake
    wake.save(st, None, None, 0, 0)
    sporadic.forget('sporadic.device.wake')
    import board
    board.reset()
