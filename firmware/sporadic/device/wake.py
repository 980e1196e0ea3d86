# The wake index (docs/device.md#the-wake-index): what the loop's last pass
# found, so that a wake with nothing due decides in O(1), and a wake with
# jobs due decides those jobs alone (agenda.py), instead of streaming the
# whole job file through the parser and the planner.
#
#   w2 KEY LIMIT AT JOBS PENDING LEASE FS AGENDA MAC
#
#   KEY      the store it was computed from: size and mtime of jobs.txt,
#            log.txt, in.txt, jobs.ok (its stamp, which a compaction
#            rewrites) and cfg.json. A run (log.txt grows), a sync (in.txt, a
#            compaction), a deploy (cfg.json) or a file edited behind the
#            store's back changes it: the index no longer matches.
#   LIMIT    no job outside AGENDA changes its decision before it ('-': none)
#   AT       the time of the pass (a clock set back before it: no match)
#   LEASE    0/1, the section leader's lease as the pass saw it (net/node.py)
#   FS       time.time() at the write: the file system's clock (its mtimes)
#   AGENDA   the jobs whose decision changes before LIMIT (at most
#            runtime.AGENDA, earliest first) as DUE:OFF:JID,... ('-': none):
#            OFF the byte offset of the job's group in jobs.txt ('-': not
#            there, only in log.txt or in.txt)
#   MAC      hmac of the rest under the board's secret (sha256 without one):
#            a torn or forged index does not match
#
# A mismatch only costs a full pass. Kept in RTC memory where the board has
# some (board.RTC_MEM; the unix board's rtc_memory is a small file), else in
# wake.idx on the flash (written only when it changes). This module is what
# the store's open loads (vouches): kept small, the rest is agenda.py.
# store.WAKE_INDEX = False turns the index off (bench/wake.py's baseline).
import hashlib
import binascii
import os
from sporadic.device import store

_SIZE = 2048  # the longest index read back (runtime.AGENDA_LARGE entries: about 1.2 KB)


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
    """The index's fields [key, limit, at, jobs, pending, lease, fs, agenda]
    when it is whole, under this board's MAC and matches the store now,
    else None. secret: the board's, or a function that reads it (called
    only for an index that matches the store)."""
    b = _rtc()
    try:
        if b is not None:
            text = b.rtc_memory().decode()
        else:
            path = st.root + 'wake.idx'
            n = os.stat(path)[6]
            if n > _SIZE:
                return None
            with open(path) as f:
                text = f.read(n)   # its size, not _SIZE: a 2 KB block fragments a small heap
    except (OSError, ValueError, UnicodeError):
        return None
    f = text.split(' ')
    # the store's stats first (five stats): a sync's deliveries find the
    # index stale after the first, and then compute no MAC for it
    if len(f) != 10 or f[0] != 'w2' or f[1] != key(st) \
            or _mac(secret() if callable(secret) else secret, text[:-len(f[9]) - 1]) != f[9].strip():
        return None
    return f[1:9]


def save(st, secret, rt, now, led):
    """Record a pass's result: rt._agenda (entries [due, jid, offset], each
    offset looked up: agenda.finish) and rt._limit. rt None, a job the
    pass could not decide (rt.bad_jobs: out of memory, a planner error, a
    bad line) or an agenda a compaction dropped: the index is cleared."""
    data = ''
    if rt is not None and not rt.bad_jobs and rt._agenda is not None:
        a = ','.join(['%d:%s:%s' % (e[0], '-' if e[2] < 0 else str(e[2]), e[1]) for e in rt._agenda]) or '-'
        lim = rt._limit
        import time
        data = 'w2 %s %s %d %d %d %d %d %s' % (key(st), '-' if lim is None else str(lim), now, rt.jobs,
                                               rt.pending, 1 if led else 0, time.time(), a)
    put(st, secret, data)


def put(st, secret, data):
    """Write the index's text `data` (without its MAC; '': cleared) to its
    home (save; carry.py's index carried across a sync)."""
    if data:
        data += ' ' + _mac(secret, data) + '\n'
    b = _rtc()
    if b is not None:
        if len(data) > getattr(b, 'RTC_MEM', _SIZE):
            data = ''     # more than the memory holds: no index (the next wake's full pass)
        store.crashpoint()
        b.rtc_memory(data.encode())
        return
    if len(data) > _SIZE:
        data = ''         # more than read() takes back
    path = st.root + 'wake.idx'
    try:
        if os.stat(path)[6] == len(data):
            with open(path) as f:
                if f.read(len(data)) == data:
                    return        # unchanged: no flash write
    except OSError:
        pass
    f = open(path, 'w')
    try:
        store.write(f, data)
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
