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
