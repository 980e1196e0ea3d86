# Re-importing a store file that was not as the store wrote it (recover.py
# finds them at open): its lines through storesync.receive as an untrusted
# delivery. Loaded at open only, in the emptiest heap, then dropped; out of
# storesync so that a sync session's heap (and a status read beside the
# loop's) does not hold it.
from sporadic.core import jobline
from sporadic.device import store
from sporadic.device.store import size, read_lines, write, remove
from sporadic.device.storesync import receive

CHUNK_LINES = 32     # lines of a re-checked file in one delivery (reimport)
CHUNK_CHARS = 2048
SEGS_MAX = 32        # batches a re-check looks lines up in at once (covered)


def reimport(st, path, name, signed):
    """The lines of a store file that was not as this store wrote it
    (recover.py), then the file goes. Signed: as an untrusted delivery
    (receive, stored=True): the batch records first, then each fleet line
    must be covered by one of them that verified (covered: a bitmap,
    one lookup pass a window of batches), the others go through receive
    as they come (MACs). Accepted lines in byte order go to jobs.chk and
    are merged in one pass at the end; the few out of order (a line added
    by hand) go through in.txt. Constant memory; a file the store wrote
    costs a few passes, not a compaction a chunk."""
    import gc
    src = 'edited ' + name
    q = st.quarantined
    gc.collect()
    if not signed:
        st._tr = None       # nothing to check: trust.py is not even loaded
    side = st.root + 'jobs.chk'
    out = open(side, 'w')
    last = ['']
    late = []

    def sink(c):
        if c > last[0]:
            write(out, c)       # (a batch record is 2.4 KB: no copy of it with '\n')
            write(out, '\n')
            last[0] = c
        else:
            late.append(c)
    try:
        bits = None
        if signed:
            chunk = []
            n = 0
            for line in read_lines(path, True):
                k = line.lstrip()[:3]
                if k == '.b ' or k == '.k ':
                    chunk.append(line)
                    n += len(line)
                    if len(chunk) >= CHUNK_LINES or n >= CHUNK_CHARS:
                        chunk = _take(st, chunk, src, sink)
                        n = 0
            if chunk:
                _take(st, chunk, src, sink)
            out.close()         # the verified batch records, for the look-ups
            from sporadic.device import trust as tm
            bits = covered(st, path, side)
            out = open(side, 'a')
            batch = tm.batch
        chunk = []
        i = -1
        for line in read_lines(path, True):
            i += 1
            if bits is not None:
                k = line.lstrip()[:3]
                if k == '.b ' or k == '.k ':
                    continue
                if batch.needs_batch(line):
                    if chunk:
                        chunk = _take(st, chunk, src, sink)
                    if bits[i >> 3] & (1 << (i & 7)):
                        sink(jobline.canonical(line))      # covered: it parsed
                    else:
                        st.quarantine(line, 'not signed: no verified batch covers this line', src)
                    continue
            chunk.append(line)
            if len(chunk) >= CHUNK_LINES:
                chunk = _take(st, chunk, src, sink)
            if len(late) >= CHUNK_LINES:
                late = _take(st, late, src)
        if chunk:
            _take(st, chunk, src, sink)
        if late:
            _take(st, late, src)
    finally:
        out.close()
    st.compact(read_lines(side))
    remove(side)
    remove(path)
    st.notes.append('%s not as this store wrote it: re-imported, %d line(s) refused'
                    % (name, st.quarantined - q))


def reimport_all(st, todo, signed):
    """recover.py's list of (file, name) not as the store wrote them, each
    through reimport(). Out of memory, it fails closed: what is not
    re-checked yet stays in its .bad file, runs nothing, and the next open
    (a sync session's, with no loop in RAM) tries again."""
    # the compaction's names (fold.py, merge.py) interned first, in the
    # open's emptiest heap, their code let go at once: the qstr pool's next
    # block (640 entries, one piece) is not left to the first delivery's
    # compaction, in a heap its lines cut up (a 2,000-line file at 128K
    # on the 64-bit port failed so: `allocating 640 bytes`)
    import sys
    import sporadic
    had = list(sys.modules)
    from sporadic.device import fold  # noqa: F401
    fold = None
    sporadic.forget_since(had)
    for path, name in todo:
        try:
            reimport(st, path, name, signed)
        except (MemoryError, OSError) as e:    # out of memory, or a full flash
            if isinstance(e, OSError) and e.args[0] != store.ENOSPC:
                raise
            st._pend = None
            st.log_size = size(st.log)
            st.in_size = size(st.inp)
            st.notes.append('%s re-checking %s: the next open tries again'
                            % ('out of memory' if isinstance(e, MemoryError) else 'flash full', name))
            return


def _take(st, chunk, src, sink=None):
    # one delivery of a re-check, in a heap as empty as it gets (the boot's)
    import gc
    gc.collect()
    receive(st, chunk, src, None, True, sink)
    return []


def covered(st, path, held):
    """A bitmap (bytearray, bit i for line i of the file at path): which
    fleet-authored lines a .b record of the file `held` (batch records
    verified by this store) covers: trust.admit's held look-up for a whole file
    (reimport), in constant memory: the lines' digests go to
    jobs.dig (8 bytes a line, one parse a line), then each window of
    batches (batch.WINDOW digests, at most SEGS_MAX batches) is looked up
    by one read of that file; a batch record is read once."""
    from sporadic.core import batch
    dig = st.root + 'jobs.dig'
    zero = bytes(batch.DIGEST)
    f = open(dig, 'wb')
    n = 0
    try:
        for line in read_lines(path, True):
            d = zero
            k = line.lstrip()[:3]
            if k != '.b ' and k != '.k ' and batch.needs_batch(line):
                try:
                    d = batch.line_digest(jobline.canonical(line) or '')
                except MemoryError:
                    raise
                except Exception:
                    pass         # the store refuses it with the parse error
            write(f, d)
            n += 1
    finally:
        f.close()
    bits = bytearray((n + 7) // 8)
    segs = []
    used = 0
    for line in read_lines(held):
        seg = batch.held_digests(line)   # (its signature was checked on arrival)
        if seg is None:
            continue
        line = None
        if segs and (used + len(seg) // batch.DIGEST > batch.WINDOW or len(segs) >= SEGS_MAX):
            _mark(batch, dig, segs, bits, zero)
            segs = []
            used = 0
        segs.append(seg)
        used += len(seg) // batch.DIGEST
    if segs:
        _mark(batch, dig, segs, bits, zero)
    remove(dig)
    return bits


def _mark(batch, dig, segs, bits, zero):
    # one read of jobs.dig: the lines these batches cover get their bit
    w = batch.DIGEST
    buf = bytearray(64 * w)
    mv = memoryview(buf)
    i = 0
    f = open(dig, 'rb')
    try:
        while True:
            r = f.readinto(buf)
            if not r:
                break
            for o in range(0, r, w):
                if not bits[i >> 3] & (1 << (i & 7)):
                    d = bytes(mv[o:o + w])
                    if d != zero:
                        for seg in segs:
                            if batch.find_digest(seg, d):
                                bits[i >> 3] |= 1 << (i & 7)
                                break
                i += 1
            if store.feed is not None:
                store.feed()
    finally:
        f.close()
