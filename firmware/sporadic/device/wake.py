# The wake index (docs/device.md#the-wake-index): what the loop's last full
# pass found, so that a wake with nothing due decides in O(1) instead of
# streaming the whole job file through the parser and the planner.
#
#   w1 KEY DUE AT JOBS PENDING LEASE FS MAC
#
#   KEY      the store it was computed from: size and mtime of jobs.txt,
#            log.txt, in.txt, jobs.ok (its stamp, which a compaction
#            rewrites) and cfg.json. A run (log.txt grows), a sync (in.txt, a
#            compaction), a deploy (cfg.json) or a file edited behind the
#            store's back changes it: the index no longer matches.
#   DUE      the earliest time any job's decision changes ('-': none ever)
#   AT       the time of the pass (a clock set back before it: no match)
#   LEASE    0/1, the section leader's lease as the pass saw it (net.py)
#   FS       time.time() at the write: the file system's clock (its mtimes)
#   MAC      hmac of the rest under the board's secret (sha256 without one):
#            a torn or forged index does not match
#
# A mismatch only costs a full pass. Kept in RTC memory where the board has
# some (board.RTC_MEM; the unix board's rtc_memory is a small file), else in
# wake.idx on the flash (written only when a full pass changes it). Loaded
# for a read or a write and dropped again: never in RAM during a pass.
# store.WAKE_INDEX = False turns it off (bench/wake.py's baseline).
import hashlib
import binascii
import os
from sporadic.device import store


def key(st):
    """The store's state as the index records it (5 stats, no file opened)."""
    k = 'k'
    for p in (st.jobs, st.log, st.inp, st.root + 'jobs.ok', st.root + 'cfg.json'):
        try:
            s = os.stat(p)
            k += ',%d.%d' % (s[6], s[8])
        except OSError:
            k += ',-'
    return k


def _mac(secret, body):
    if secret:
        from sporadic.core import hmac
        return hmac.mac_hex(secret, body)
    return binascii.hexlify(hashlib.sha256(body.encode()).digest()[:8]).decode()


def _rtc():
    # the board module where it keeps RTC memory, else None (wake.idx)
    try:
        import board
    except ImportError:   # CPython (a tool reading a board's flash)
        return None
    return None if getattr(board, 'RTC_MEM', -1) == 0 else board


def read(st, secret):
    """The index's fields [key, due, at, jobs, pending, lease] when it is
    whole, under this board's MAC and matches the store now, else None."""
    b = _rtc()
    try:
        if b is not None:
            text = b.rtc_memory().decode()
        else:
            with open(st.root + 'wake.idx') as f:
                text = f.read(256)
    except (OSError, ValueError, UnicodeError):
        return None
    f = text.split(' ')
    if len(f) != 9 or f[0] != 'w1' or _mac(secret, text[:-len(f[8]) - 1]) != f[8].strip() \
            or f[1] != key(st):
        return None
    return f[1:8]


def idle(rt, now, led, max_sleep):
    """The loop's step at `now` answered by the index (rt's figures set):
    nothing is due before its DUE. False: a full pass is needed."""
    f = read(rt.store, rt.cfg.get('secret'))
    if f is None or int(f[2]) > now or f[5] != ('1' if led else '0'):
        return False
    nw = now + max_sleep
    if f[1] != '-':
        due = int(f[1])
        if due <= now:
            return False
        if due < nw:
            nw = due
    rt.next_wake = nw
    rt.jobs = int(f[3])
    rt.pending = int(f[4])
    rt.bad_jobs = 0
    return True


def save(st, secret, rt, now, led):
    """Record a full pass's result: rt.next_wake its earliest WAIT (None:
    none). rt None, or a job the pass could not decide (rt.bad_jobs: out of
    memory, a planner error, a bad line): the index is cleared."""
    data = ''
    if rt is not None and not rt.bad_jobs:
        w = rt.next_wake
        import time
        data = 'w1 %s %s %d %d %d %d %d' % (key(st), '-' if w is None else str(w), now, rt.jobs,
                                            rt.pending, 1 if led else 0, time.time())
        data += ' ' + _mac(secret, data) + '\n'
    b = _rtc()
    if b is not None:
        store.crashpoint()
        b.rtc_memory(data.encode())
        return
    path = st.root + 'wake.idx'
    try:
        with open(path) as f:
            if f.read(256) == data:
                return        # unchanged: no flash write
    except OSError:
        pass
    f = open(path, 'w')
    try:
        store._write(f, data)
    finally:
        f.close()


def vouches(st):
    """Store.recover: the index matches the store (jobs.txt's size and mtime
    among its key): the open takes jobs.txt's stamp unhashed."""
    try:
        import json
        with open(st.root + 'cfg.json') as f:
            secret = json.load(f).get('secret')
    except (OSError, ValueError):
        secret = None
    f = read(st, secret)
    # "racy" as git says: jobs.txt written in the second the index was (a
    # compaction just before), an edit in that same second keeps its mtime
    return f is not None and int(f[0].split(',')[1].split('.')[1]) + 2 <= int(f[6])
