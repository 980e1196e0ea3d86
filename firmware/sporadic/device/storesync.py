# The store's sync-time functions (storesync.NAME(store, ...), called by
# the sync server and the network loop): taking lines from a peer, the trust check, the
# compacted view, the outbox and the health report. Only a sync (serial
# after a soft reset, or TCP) and the store's recovery of a hand-written
# job file load this module; the loop never does (docs/device.md#memory).
import gc
from sporadic.device import store
from sporadic.device.store import IN_MAX, size, read_lines, write, remove

try:
    from micropython import const
except ImportError:  # CPython (tools that read a board's flash)
    def const(x):
        return x

WRITE_MAX = const(1024)    # bytes of accepted lines gathered for one write to in.txt
WRITE_ROOMY = const(4096)  # the same on a heap of store.ROOMY (each write ~0.2 M instructions on a Pico)
IN_ROOMY = const(131072)   # free heap from which in.txt may grow to 1/8 of it (else 1/16)

def lines(st):
    """The compacted view of everything the device holds (for sync).
    With nothing pending it is jobs.txt itself (compacted when written):
    each pass of a sync then reads the file with no merge on top."""
    if not st.pending():
        return st.jobs_lines()
    from sporadic.core import merge
    return merge.compact(st.stream())


def receive(st, lines, src='sync', refused=None, stored=False, sink=None, keep=False, defer=False):
    """Lines from a peer: each is parsed; a bad one is quarantined with its
    reason (and added to `refused` as (line, reason) when given), a good one
    appended to in.txt in canonical form. Compacts as in.txt fills, so any
    number of lines fits. Returns (accepted, refused). In a signed fleet
    sporadic/trust.py checks the delivery first; `stored`: the lines come
    from one of the store's own files that did not match its stamp (its
    batch records may be ones the store already held); `sink`: called with
    each accepted line instead of appending it to in.txt (reimport); `keep`:
    trust.admit's; `defer`: no compaction here, the caller compacts after,
    with this delivery's lines and code let go (syncsrv: a serial session on
    a tight heap). in.txt is stamped after the lines are written (in.ok)."""
    acc = 0
    ref = 0
    tr = trust(st)
    if tr is not None:
        lines, ref = tr.admit(st, lines, src, refused, stored, keep)
    f = None
    # in.txt may grow to 1/16 of the free heap (at least IN_MAX) before this
    # compacts: each compaction copies all of jobs.txt (splice.py; it was a
    # rewrite through merge.compact), and at IN_MAX a
    # Pico took 140 of them for 140 KB received (docs/sync.md, rp2). The
    # in-RAM sort of pending() holds about in.txt's size: an ESP8266 stays
    # at IN_MAX. (gc.collect: the requests' garbage is not used memory.)
    # A roomy heap (a Pico's: 128 KB free or more) lets in.txt grow to 1/4
    # of it: a first sync of 300 jobs (27 KB) does not compact in its P
    # requests at all, only once at its end (each compaction of a Pico's
    # first sync was ~0.8 s; pending() holds in.txt's lines, ~1.4x its
    # bytes: a third of the free heap at most). (The seals a P's lines are
    # looked up in are kept across the sync, trust._held_segs: a longer
    # in.txt is not read again for them at each P.) A heap of store.ROOMY
    # in all is roomy whatever is free now: a Pico's sync hovers about
    # 128 KB free, and a few hundred bytes less made its limit 8 KB instead
    # of 32 (a compaction in the P requests of a first sync, ~60 M
    # instructions, docs/budgets.md#27).
    limit = IN_MAX
    if hasattr(gc, 'mem_free'):
        gc.collect()
        free = gc.mem_free()
        limit = max(limit, free >> (2 if free >= IN_ROOMY or store.roomy() else 4))
    buf = []      # accepted lines not yet written: one write a WRITE_MAX bytes
    n = 0
    most = WRITE_ROOMY if store.roomy() else WRITE_MAX
    if defer:
        limit = 0x3fffffff    # (a small int on a 32-bit port)
    ch = None     # in.txt's stamp as a chain (stamp.chain_start), fed what is written
    h = None
    # the wake index carried across the delivery (carry.py): the loop's
    # next step decides the jobs it touched, not the whole file again
    cw = None
    if sink is None and not stored and store.roomy():   # (never loaded on a smaller heap)
        from sporadic.device import carry as cw
    cc = cw.begin(st, lines=lines if isinstance(lines, list) else None) if cw is not None else None
    # and the pending lines kept in RAM across it (carry.pending), else read again after it
    held = None
    if cw is not None:
        held = st._pend if st._pend is not None else None if st.in_size or st.log_size else []
    st._pend = None
    got = []
    try:
        for raw in lines:
            try:
                # what trust.admit lets through is canonical already (a
                # batch record is 2.4 KB: no second copy of it)
                c = raw if tr is not None else _canonical(raw)
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
            acc += 1
            if sink is not None:
                sink(c)
                continue
            if cw is not None:
                cc = cw.note(st, cc, c)
                if held is not None:
                    got.append(c)
            if f is None:
                ch = _chain(st)
                f = open(st.inp, 'a')
                h = ch[1]
            st.in_size += len(c) + 1
            if len(c) >= most:
                # a seal record (~1-2.4 KB) is written as it is: no joined copy of it
                if buf:
                    write(f, ''.join(buf), h)
                    buf = []
                    n = 0
                write(f, c, h)
                write(f, '\n', h)
            else:
                buf.append(c)
                buf.append('\n')
                n += len(c) + 1
                if n >= most or st.in_size > limit:
                    write(f, ''.join(buf), h)
                    buf = []
                    n = 0
            if st.in_size > limit:
                f.close()
                f = None
                _stamp_in(st, ch)      # before the compaction, which a full flash may refuse
                st._pend = None
                if cw is not None:
                    cw.drop(cc)        # (jobs.txt, open for note(): the compaction replaces it)
                st.compact()
                if held is not None:
                    held = []          # (all of it in jobs.txt now)
                    got = []
    finally:
        if cw is not None:
            cw.drop(cc)
        if f is not None:
            try:
                if buf:
                    write(f, ''.join(buf), h)
            finally:
                f.close()
                _stamp_in(st, ch)

    st._pend = None if held is None else cw.pending(held, got)
    if tr is not None:
        tr.commit(st)   # after the lines are durable
    if cc is not None and acc:
        cw.end(st, cc)
    return acc, ref


def _canonical(raw):
    # an insecure board's parse of a line it takes (the parser loads with
    # the first: a signed sync takes its covered lines without it)
    from sporadic.core import jobline
    return jobline.canonical(raw)


def _chain(st):
    # in.txt's stamp so far, to be carried on by what this delivery writes
    # (stamp.chain_start: the file is not read again at each P)
    from sporadic.device import stamp
    t = None
    if st.in_size:
        try:
            with open(st.inp[:-4] + '.ok') as f:
                t = f.read().strip()
        except OSError:
            pass
    return stamp.chain_start(st.inp, st.in_size, t)


def _stamp_in(st, ch):
    # in.ok after a delivery's writes: the chain carried on when in.txt is
    # the size the delivery counted (every byte went through ch's hash),
    # else (a write that failed part-way) the whole file hashed again
    from sporadic.device import stamp
    try:
        n = size(st.inp)
        t = stamp.chain_text(ch, n) if n == st.in_size else stamp.file_stamp(st.inp)
        store.put(st.inp[:-4] + '.ok', t)
    except OSError:
        pass    # no room for the stamp: the next open checks in.txt again


def trust(st):
    """The signed-batch check (sporadic/trust.py), None when insecure."""
    if st._tr == 0:
        # an insecure board never loads trust.py (its names alone, interned
        # at the end of a 96K unix board's sync for its status, found no
        # room: docs/budgets.md#27)
        import json
        try:
            with open(st.root + 'cfg.json') as f:
                cfg = json.load(f)
        except (OSError, ValueError):
            cfg = {}
        from sporadic.device import stamp
        if not stamp.signed(cfg):
            st._tr = None
            return None
        cfg = None
        from sporadic.device import trust
        st._tr = trust.load(st.root)
    return st._tr


def vouch(st, line):
    """`V .v KEYID DIGESTS SIG` (docs/security.md#vouches): the companion's
    one signature over the seal records its sync brings, checked here once;
    a record it lists then needs no RSA check of its own in this session's
    deliveries (st.vouch, given to trust.admit's Verifier: ~125 ms of a
    Pico's time a record). '1', else '!' and why (nothing vouched)."""
    st.vouch = None
    tr = trust(st)
    if tr is None:
        return '!nothing is checked here'
    from sporadic.device import vouch as v
    try:
        st.vouch = v.check(line.strip(), tr.key_ids(), tr.retired)
    except ValueError as e:
        return '!' + str(e)
    return '1'


def let_go(st):
    """The trust check's code may leave RAM (it loads again at the next
    delivery): a broker wake between its merges (net/broker.py). An
    insecure board's None stays (nothing to load)."""
    if st._tr:
        st._tr = 0


def seal(st):
    """Move the current log into the outbox (compacting); returns the
    highest outbox segment number (0 when empty)."""
    if st.log_size or size(st.log):
        st.compact()
    return st.out_top()[1]


def outbox(st, upto=None):
    """Own records not yet acknowledged, oldest first, as full lines (the
    outbox's packed files unpacked: core/outpack.py, loaded only for one)."""
    u = None
    for n in st.out_seqs(upto):
        name = st._seg(n)
        if store.exists(name):
            for line in read_lines(name):
                yield line
            continue
        if u is None:
            from sporadic.core import outpack
            u = outpack.Unpacker()
        for line in read_lines(st.out + '/p' + str(n)):
            line = u.line(line)
            if line is not None:
                yield line
    if u is not None:
        u = outpack = None
        _forget('sporadic.core.outpack')


def ack(st, upto, lost_read=0):
    """The companion holds every outbox file <= upto (raw N, packed pN) and
    has counted `lost_read` records the board dropped for want of flash
    (device/outbox.py make_room): remove them, and take those off the count
    in out/lost. Returns the files removed."""
    k = 0
    for n in st.out_seqs(upto):
        name = st._seg(n)
        if not store.exists(name):
            name = st.out + '/p' + str(n)
        remove(name)
        k += 1
    if lost_read:
        left = st.out_lost() - lost_read
        if left > 0:
            store.put(st.out + '/lost.tmp', str(left))
            store.rename(st.out + '/lost.tmp', st.out + '/lost')
        else:
            remove(st.out + '/lost')
    return k


def _forget(name):
    import sporadic
    sporadic.forget(name)


def health(st):
    return {'jobs_bytes': size(st.jobs), 'log_bytes': st.log_size,
            'in_bytes': st.in_size, 'outbox': st.out_top()[0],
            'outbox_dropped': st.out_lost(), 'compactions': st.compactions,
            'conflicts': st.conflicts, 'quarantined': st.quarantined, 'full': st.full_at > 0,
            'recovered': st.notes, 'ok': True}
