# The wake index carried across a sync (docs/device.md#the-wake-index):
# a sync that changes the store leaves the index matching the new store,
# with the jobs it changed due at once, instead of leaving it stale (the
# loop's next step was then a full pass over the whole file: 13.7 s of a
# Pico's time at 1,000 jobs, ~5.5 G instructions at 5,000).
#
#   f = begin(st)          before a delivery or a compaction: the index's
#                          fields when it matches the store now, else None
#   f = note(st, f, line)  each line the delivery accepts, before it is
#                          stored (None: the index cannot be carried)
#   end(st, f)             after: the index written again for the store now
#   drop(f)                what note() holds let go of (end() does it too)
#   pending(held, got)     and the store's pending lines, carried in RAM
#
# Sound because the index lists every job whose decision changes before
# LIMIT (wake.py), a job's decision depends only on its own group, the
# '.h' host records, the lease, cfg.json and the time, and nothing but
# these calls changes the store between begin() and end() (one thread).
# What end() writes: the old agenda, each entry of a job the delivery
# touched due at the index's time (AT: the next step decides it), every
# offset looked up again after a compaction ('?'), and the jobs the store
# did not hold before as new entries ('+': not counted in JOBS and PENDING
# yet; agenda.py counts them once decided). A line the index cannot vouch
# for leaves it stale (the next step's full pass, as before): a '.h' record
# (a `one` job's rank, a rollout's wave), a line of a job the store held
# outside the agenda (its old decision, in PENDING, is not known), more
# than MAX entries. A compaction changes no decision (merge.compact keeps
# what every job's group says), only the groups' offsets.
#
# A sync on a heap under store.ROOMY (160 KB in all: a 128K unix board, an
# ESP8266) never loads this
# module: its index stays stale, as before.
from sporadic.core.order import ID_LEN, merge_sorted
from sporadic.device import store, wake

MAX = 64        # agenda entries a carried index may hold (runtime.AGENDA and the delivery's jobs)


def begin(st, pend=True, lines=None):
    """The wake index's fields when it matches the store now, as a list
    [fields, entries, ids of the lines pending (pend: a delivery's; a
    compaction adds no line), compactions, secret, the head of jobs.txt's
    last line (_last), jobs.txt as note() keeps it open] (None: no index, a
    heap under store.ROOMY, or `lines`, the delivery's canonical lines,
    such that note() would give up on them: _fits)."""
    if not store.WAKE_INDEX or not store.roomy():
        return None
    if lines is not None and len(lines) > MAX and not _fits((), lines):
        return None    # more new jobs than any agenda has room for: the index is not read (~25 ms of a Pico)
    # (cfg.json's secret read only for an index that matches the store:
    # a sync's deliveries after the first find it stale)
    f = wake.read(st, lambda: _secret(st))
    if f is None:
        return None
    secret = _secret(st)
    ents = []
    if f[7] != '-':
        for e in f[7].split(','):
            e = e.split(':')
            ents.append([e[0], e[1], e[2]])
    if len(ents) > MAX or (lines is not None and not _fits(ents, lines)):
        return None
    ids = []
    for p in (st.log, st.inp) if pend else ():
        for l in store.read_lines(p):
            if l[:1] != '.' and l[:ID_LEN] not in ids:
                ids.append(l[:ID_LEN])
    return [f, ents, ids, st.compactions, secret, _last(st), None]


def note(st, c, line):
    """A line the delivery accepts (c: begin's, or None). Returns c, or
    None when the index cannot be carried past it."""
    if c is None:
        return None
    if line.startswith('.'):
        return None if line.startswith('.h ') else c
    jid = line[:ID_LEN]
    kind = line[ID_LEN + 1:ID_LEN + 3]
    if kind == 'ca':
        drop(c)
        return None    # a cancel: the job leaves the count (the next step's full pass counts it)
    ents = c[1]
    for e in ents:
        if e[2] == jid:
            if e[1] != '+':
                e[0] = c[0][2]     # due at the index's time: the next step decides it
                if e[1] != '?':
                    e[1] = '?'
            return c
    if kind == 'r ' or kind == 'a ' or jid in c[2] or len(ents) >= MAX or (
            (c[5] is None or jid.encode() <= c[5]) and _held(st, c, jid)):
        # a job the store held outside the agenda (its old decision is not
        # known), or a new group's result before its job's line
        drop(c)
        return None
    ents.insert(0, [c[0][2], '+', jid])
    return c


def pending(held, got):
    """The store's pending lines after a delivery (Store.pending: log.txt
    and in.txt, sorted) from those before it (`held`) and those it took
    (`got`, as written): kept in RAM on a roomy heap, so that the
    compaction after a sync's deliveries does not read in.txt again (a
    Pico's first sync of 300 jobs: 305 lines, 0.18 s, docs/budgets.md#27)."""
    for i in range(1, len(got)):
        if got[i] < got[i - 1]:
            got.sort()
            break
    if not got or not held or held[-1] < got[0]:
        held.extend(got)    # (a sync's P requests come in order: no merge in Python)
        return held
    return list(merge_sorted(held, got))


def _fits(ents, lines):
    # False when note() is sure to give up on these lines: a '.h' record,
    # or more jobs outside the agenda than it has entries left (each one
    # either takes an entry or ends the carry). A first sync's deliveries
    # of 300 new jobs found out after 64 notes, each a bisection of
    # jobs.txt (~2 ms of a Pico's time), and wrote the index between.
    room = MAX - len(ents)
    have = [e[2] for e in ents]
    new = []
    for line in lines:
        if line.startswith('.'):     # (no slice: a new string is ~0.2 ms of a Pico's sync)
            if line.startswith('.h '):
                return False
            continue
        jid = line[:ID_LEN]
        if jid not in have and jid not in new:
            if len(new) == room:
                return False
            new.append(jid)
    return True


def end(st, c):
    """The index written again for the store as it is now (c: begin's)."""
    if c is None:
        return
    drop(c)
    f, ents, _, comp, secret, _, _ = c
    if st.compactions != comp:
        for e in ents:
            if e[1] != '+':
                e[1] = '?'
    _order(ents)
    a = ','.join(['%s:%s:%s' % (e[0], e[1], e[2]) for e in ents]) or '-'
    import time
    wake.put(st, secret, 'w2 %s %s %s %s %s %s %d %s' % (wake.key(st), f[1], f[2], f[3], f[4], f[5],
                                                          time.time(), a))


def _order(ents):
    # by due, in place, stably: an insertion sort over the dues parsed once
    # (MicroPython's sort pivots on its last item and calls the key at each
    # comparison: an agenda nearly in order cost it ~n*n/2 calls, ~75 ms of
    # a Pico's time at 62 entries, twice a sync: docs/budgets.md#27)
    ks = [int(e[0]) for e in ents]
    for i in range(1, len(ents)):
        k = ks[i]
        e = ents[i]
        j = i
        while j and ks[j - 1] > k:
            ks[j] = ks[j - 1]
            ents[j] = ents[j - 1]
            j -= 1
        ks[j] = k
        ents[j] = e


_sec = None    # (root, cfg.json's stat, secret): a sync's requests read cfg.json once


def _secret(st):
    global _sec
    import os
    p = st.root + 'cfg.json'
    try:
        k = os.stat(p)
        k = (k[6], k[8])
    except OSError:
        return None
    if _sec is not None and _sec[0] == st.root and _sec[1] == k:
        return _sec[2]
    try:
        import json
        with open(p) as f:
            sec = json.load(f).get('secret')
    except (OSError, ValueError):
        return None
    _sec = (st.root, k, sec)
    return sec


def _last(st):
    # the first ID_LEN bytes of jobs.txt's last line (b'' for no line, None
    # when its last 128 bytes hold no line start): a job whose id sorts
    # after it has no line there, no bisection needed (_held: ~3 ms of a
    # Pico's time a line; every job of a first sync sorts after a store
    # of '.' records alone)
    try:
        f = open(st.jobs, 'rb')
    except OSError:
        return b''
    try:
        n = f.seek(0, 2)
        f.seek(max(0, n - 128))
        b = f.read(128).rstrip(b'\n')
    finally:
        f.close()
    i = b.rfind(b'\n')
    if i < 0 and n > 128:
        return None
    return b[i + 1:i + 1 + ID_LEN]


def drop(c):
    """Let go of the file note() keeps open (c: begin's, or None)."""
    if c is not None and c[6] is not None:
        c[6][1].close()
        c[6] = None


def _held(st, c, jid):
    # has jobs.txt a line of jid's group? (a bisection over its bytes,
    # small reads: no line made). The file stays open from one line of a
    # delivery to the next (c[6], until a compaction replaces it): each
    # open looked its path up on the flash, ~2 ms of a Pico's 4.6 a line
    # (docs/budgets.md#27)
    h = c[6]
    if h is not None and h[0] != st.compactions:
        drop(c)
        h = None
    if h is None:
        try:
            h = c[6] = (st.compactions, open(st.jobs, 'rb'))
        except OSError:
            return False
    f = h[1]
    key = jid.encode()
    lo = 0
    hi = f.seek(0, 2)
    while lo < hi:
        mid = (lo + hi) // 2
        k = _head(f, mid)
        if k is None or k >= key:
            hi = mid
        else:
            lo = mid + 1
    return _head(f, lo) == key


def _head(f, x):
    # the first ID_LEN bytes of the first line starting at or after byte x
    # (None: none)
    p = x - 1 if x else 0
    f.seek(p)
    while x:
        b = f.read(128)
        if not b:
            return None
        i = b.find(b'\n')
        if i >= 0:
            if i + 1 + ID_LEN <= len(b):
                return b[i + 1:i + 1 + ID_LEN]   # in the bytes read: no second read
            f.seek(p + i + 1)
            break
        p += len(b)
    b = f.read(ID_LEN)
    return b or None
