# The store's sync-time methods (read as Store.NAME through
# Store.__getattr__): taking lines from a peer, the trust check, the
# compacted view, the outbox and the health report. Only a sync (serial
# after a soft reset, or TCP) and the store's recovery of a hand-written
# job file load this module; the loop never does (docs/device.md#memory).
import hashlib
from sporadic import jobline, merge, store
from sporadic.store import IN_MAX, size, read_lines, _write, _remove

HASH_CHUNK = 512     # bytes read at a time to take a file's stamp
CHUNK_LINES = 32     # lines of a re-checked file in one delivery (reimport)
CHUNK_CHARS = 2048


def lines(st):
    """The compacted view of everything the device holds (for sync).
    With nothing pending it is jobs.txt itself (compacted when written):
    each pass of a sync then reads the file with no merge on top."""
    if not st.pending():
        return st.jobs_lines()
    return merge.compact(st.stream())


def receive(st, lines, src='sync', refused=None, stored=False):
    """Lines from a peer: each is parsed; a bad one is quarantined with its
    reason (and added to `refused` as (line, reason) when given), a good one
    appended to in.txt in canonical form. Compacts as in.txt fills, so any
    number of lines fits. Returns (accepted, refused). In a signed fleet
    sporadic/trust.py checks the delivery first; `stored`: the lines come
    from one of the store's own files that did not match its stamp (its
    batch records may be ones the store already held). in.txt is stamped
    after the lines are written (in.ok)."""
    acc = 0
    ref = 0
    tr = trust(st)
    if tr is not None:
        lines, ref = tr.admit(st, lines, src, refused, stored)
    f = None
    try:
        for raw in lines:
            try:
                c = jobline.canonical(raw)
            except MemoryError:
                raise       # not the line's fault: the sender sends it again
            except Exception as e:
                st.quarantine(raw, str(e), src)
                if refused is not None:
                    refused.append((raw, str(e)))
                ref += 1
                continue
            if c is None:
                continue
            if f is None:
                f = open(st.inp, 'a')
            data = c + '\n'
            _write(f, data)
            st.in_size += len(data)
            acc += 1
            if st.in_size > IN_MAX:
                f.close()
                f = None
                st._pend = None
                st.compact()
    finally:
        if f is not None:
            f.close()
            store.put(st.inp[:-4] + '.ok', file_stamp(st.inp))
    st._pend = None
    if tr is not None:
        tr.commit(st)   # after the lines are durable
    return acc, ref


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


def trust(st):
    """The signed-batch check (sporadic/trust.py), None when insecure."""
    if st._tr == 0:
        from sporadic import trust
        st._tr = trust.load(st.root)
    return st._tr


def seal(st):
    """Move the current log into the outbox (compacting); returns the
    highest outbox segment number (0 when empty)."""
    if st.log_size or size(st.log):
        st.compact()
    s = st.out_seqs()
    return s[-1] if s else 0


def outbox(st, upto=None):
    """Own records not yet acknowledged, oldest segment first."""
    for n in st.out_seqs():
        if upto is not None and n > upto:
            break
        for line in read_lines(st._seg(n)):
            yield line


def ack(st, upto):
    """The companion holds every outbox segment <= upto: remove them."""
    k = 0
    for n in st.out_seqs():
        if n <= upto:
            _remove(st._seg(n))
            k += 1
    return k


def health(st):
    return {'jobs_bytes': size(st.jobs), 'log_bytes': st.log_size,
            'in_bytes': st.in_size, 'outbox': len(st.out_seqs()),
            'outbox_dropped': st.out_dropped, 'compactions': st.compactions,
            'conflicts': st.conflicts, 'quarantined': st.quarantined,
            'recovered': st.notes, 'ok': True}


def jobs_sorted(st):
    """Is jobs.txt sorted and canonical, as a store writes it? (An
    insecure fleet's edited file is then taken as it is.)"""
    last = ''
    n = 0
    for line in read_lines(st.jobs):
        if not line or line <= last:
            return False
        if line[0] != '.' and not (line[jobline.ID_LEN:jobline.ID_LEN + 1] == ' '
                                   and jobline.is_id(line[:jobline.ID_LEN])):
            return False
        last = line
        n += len(line) + 1
    return n == size(st.jobs)


def reimport(st, path, name, signed):
    """The lines of a store file that was not as this store wrote it
    (recover.py), through receive(), then the file goes. Signed: as an
    untrusted delivery (stored=True), batch records first, so that the
    lines they cover find them held, CHUNK_LINES lines at a time
    (trust.BUF_MAX bounds the held-batch look-ups of one delivery)."""
    src = 'edited ' + name
    q = st.quarantined
    if not signed:
        st._tr = None       # nothing to check: trust.py is not even loaded
        st.receive(read_lines(path, True), src)
    else:
        for recs in (True, False):
            chunk = []
            n = 0
            for line in read_lines(path, True):
                k = line.lstrip()[:3]
                if (k == '.b ' or k == '.k ') != recs:
                    continue
                chunk.append(line)
                n += len(line)
                if len(chunk) >= CHUNK_LINES or n >= CHUNK_CHARS:
                    st.receive(chunk, src, None, True)
                    chunk = []
                    n = 0
            if chunk:
                st.receive(chunk, src, None, True)
    st.compact()
    _remove(path)
    st.notes.append('%s not as this store wrote it: re-imported, %d line(s) refused'
                    % (name, st.quarantined - q))
