# What a step decides from the wake index (wake.py, docs/device.md#the-wake-index):
# nothing (a wake with nothing due), the due jobs alone (their groups read
# at the offsets the index keeps for the earliest decisions to come), or a
# full pass. Loaded by the loop for its plan and after the pass, and dropped
# again: never in RAM during a pass.
#
# Sound because the store's order makes a job's group contiguous in
# jobs.txt (sorted), a job's decision changes only at its WAIT time or when
# the store changes (KEY), and the index lists every job whose decision
# changes before LIMIT. A wake at or past LIMIT, a due job the index does
# not place (an offset that is not a line start of that job's group) or one
# a pass did not decide: a full pass (and the index cleared), never a
# missed or doubled run.
from sporadic.core import jobline

NEW = -2   # an entry's offset '+': a job a sync brought (carry.py), not counted in the index's JOBS and PENDING


def plan(rt, f, now, led, max_sleep):
    """The loop's step at `now` as the index answers it (f: its fields,
    wake.read; rt.jobs, pending and next_wake set). True: nothing is due,
    sleep. A sorted line stream: the groups of the jobs due now (rt._due),
    the only ones to decide; the rest of the agenda in rt._agenda,
    rt._limit. None: a full pass."""
    if int(f[2]) > now or f[5] != ('1' if led else '0'):
        return None
    limit = None if f[1] == '-' else int(f[1])
    ag = []
    try:
        if f[7] != '-':
            for e in f[7].split(','):
                e = e.split(':')
                o = e[1]
                ag.append([int(e[0]), e[2], -1 if o == '-' else None if o == '?' else NEW if o == '+' else int(o)])
    except (ValueError, IndexError):
        return None
    nw = ag[0][0] if ag else limit   # the agenda's entries all come before LIMIT
    rt.jobs = int(f[3])
    rt.pending = int(f[4])
    rt.bad_jobs = 0
    if nw is None or nw > now:
        rt.next_wake = now + max_sleep if nw is None or nw > now + max_sleep else nw
        return True
    if limit is not None and limit <= now:
        return None   # a job outside the agenda may be due
    n = 0
    new = 0
    while n < len(ag) and ag[n][0] <= now:
        if ag[n][2] == NEW:
            new += 1
        n += 1
    lines = _groups(rt.store, ag[:n])
    if lines is None:
        return None
    rt._due = (ag[:n], rt.jobs + new, rt.store.compactions)   # finish() ends this pass
    rt._agenda = ag[n:]
    rt._limit = limit
    rt.jobs = 0          # counts the due jobs decided
    rt.pending -= n - new   # each was waiting (a new job was not counted); its decision counts it again
    return lines


def _groups(st, due):
    # the lines of the due jobs' groups, sorted: jobs.txt's at their
    # offsets (each checked: a line start, the job's id)
    idl = jobline.ID_LEN
    out = []
    try:
        f = open(st.jobs, 'rb')
    except OSError:
        return None
    try:
        for e in due:
            off = e[2]
            if off is None or off == NEW:   # a job a sync changed (carry.py): its group looked up
                off = e[2] = _find(f, f.seek(0, 2), e[1].encode())
                if off < 0:
                    continue    # not in jobs.txt: its lines are in the logs alone
            if off < 0:
                return None
            f.seek(off - 1 if off else 0)
            if off and f.read(1) != b'\n':
                return None
            jid = e[1].encode()
            line = f.readline()
            if line[:idl] != jid or line[idl:idl + 1] != b' ':
                return None
            while line[:idl] == jid and line[-1:] == b'\n':
                out.append(line[:-1].decode())
                line = f.readline()
    except (OSError, ValueError, UnicodeError):
        return None
    finally:
        f.close()
    # and their lines in the logs (what store.pending holds, read here
    # without keeping the logs in RAM: they would outlive this module)
    ids = [e[1] for e in due]
    from sporadic.device import store
    for p in (st.log, st.inp):
        for l in store.read_lines(p):
            if l[:idl] in ids:
                out.append(l)
    out.sort()
    return [l for i, l in enumerate(out) if not i or l != out[i - 1]]   # once each, as store.stream


def compact(rt):
    """The store's compaction after a pass (runtime.step), the agenda kept
    across it. The heaviest moment of a pass gets its room: the agenda
    waits as text meanwhile. A compaction folds the same lines (no job's
    decision changes), so the agenda and _limit still hold; only its jobs'
    groups move (finish looks them up again, as for a due pass's
    compaction). Without it every compaction cost the next idle wake a
    full pass over the whole file."""
    import gc
    from sporadic.device import store
    kept = _text(rt._agenda)
    rt._agenda = None
    gc.collect()
    try:
        rt.store.compact()
    except OSError as e:   # the flash is full: keep running on what it holds
        if e.args[0] != store.ENOSPC:
            raise
        rt.error = str(e)
    rt._agenda = _entries(kept)
    if rt._agenda is None and rt._due is not None:   # no room kept it: the index is cleared
        rt.jobs = rt._due[1]   # the index's count (the due pass counted its own)
        rt._due = None


def _text(a):
    # the agenda as 'DUE:JID,...' (None: none to keep): a third of its lists' room
    if a is None:
        return None
    try:
        return ','.join(['%d:%s' % (e[0], e[1]) for e in a])
    except MemoryError:
        return None   # no index after this pass: the next wake's full pass


def _entries(text):
    # _text back to entries [due, jid, None] (None: their offsets to look
    # up); None when there is nothing, or no room for it
    if text is None:
        return None
    out = []
    if not text:
        return out
    try:
        for e in text.split(','):
            i = e.index(':')
            out.append([int(e[:i]), e[i + 1:], None])
    except MemoryError:
        return None
    return out


def finish(rt):
    """After a pass: end a pass over the due jobs alone (each must have been
    decided, else the index is cleared; their offsets carried unless a
    compaction moved the groups), then look up the offsets the agenda
    lacks (a bisection of the sorted jobs.txt each)."""
    st = rt.store
    if rt._due is not None:
        due, jobs, comp = rt._due
        rt._due = None
        if rt.jobs != len(due):
            rt.bad_jobs += 1
        rt.jobs = jobs
        for e in rt._agenda:
            if st.compactions != comp:
                e[2] = None
            elif e[2] is None:
                for d in due:
                    if d[1] == e[1] and d[2] is not None and d[2] >= 0:
                        e[2] = d[2]
    f = None
    for e in rt._agenda:
        if e[2] is None:
            e[2] = -1
            if f is None:
                try:
                    f = open(st.jobs, 'rb')
                except OSError:
                    continue
                size = f.seek(0, 2)
            e[2] = _find(f, size, e[1].encode())
    if f is not None:
        f.close()


def _find(f, size, jid):
    # the offset of jid's group in a sorted jobs.txt (bisection over its
    # bytes: the first line at or after a byte), -1 when it has none
    idl = jobline.ID_LEN
    lo = 0
    hi = size
    while lo < hi:
        mid = (lo + hi) // 2
        line = _line_from(f, mid)
        if not line or line[:idl] >= jid:
            hi = mid
        else:
            lo = mid + 1
    line = _line_from(f, lo)
    return f.tell() - len(line) if line[:idl] == jid else -1


def _line_from(f, x):
    f.seek(x - 1 if x else 0)
    if x:
        f.readline()
    return f.readline()
