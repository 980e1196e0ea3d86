# The store's compaction (device/store.py's top says what it does): the
# logs folded into jobs.txt, and the steps after jobs.new is complete
# (finish: recovery ends an interrupted compaction with it). Store.compact
# and Store.finish load this module for that only: a loop's pass runs
# without its code, and a small heap's loop lets it go after a compaction
# (runtime._drop_pass_code).
import hashlib
import sys
import sporadic
from sporadic.device import store
from sporadic.core import merge


def compact(st, extra=None):
    """Fold the logs (and `extra`, a sorted stream of canonical lines)
    into jobs.txt."""
    pend = st.pending()
    if not pend and extra is None:
        return False
    if st.unverified:   # stamp.verify: the open took jobs.txt's stamp on the wake index's word
        from sporadic.device import stamp
        stamp.verify(st)
    conf = []
    cc = None
    if st.rx:
        # a sync's compaction: the wake index carried across it (carry.py;
        # inside a delivery it does not match: the delivery carries it)
        if store.roomy():
            from sporadic.device import carry
            cc = carry.begin(st, False)
            carry = None
        # a sync's store: the index too, and a splice when it is valid;
        # a full flash leaves everything as it was (splice.compact)
        # (its code goes again after it unless a request had it loaded:
        # a P's compaction on a 128K unix board, docs/budgets.md#27)
        had = list(sys.modules) if store.tight() else None
        from sporadic.device import splice
        try:
            splice.compact(st, pend, extra, conf)
        finally:
            splice = None
            if had is not None:
                sporadic.forget_since(had)
    else:
        f = open(st.tmp, 'w')
        try:
            h = hashlib.sha256()
            buf = []
            n = 0
            src = merge.merge_sorted(st.jobs_lines(), pend)
            if extra is not None:
                src = merge.merge_sorted(src, extra)
            for line in merge.compact(src, conf):
                buf.append(line)
                n += len(line) + 1
                if n >= store.CHUNK:
                    buf.append('')
                    store.write(f, '\n'.join(buf), h)
                    buf = []
                    n = 0
            if buf:
                buf.append('')
                store.write(f, '\n'.join(buf), h)
        except OSError:
            # a full flash: the old file and the logs stay (the next try
            # after another LOG_MAX of the logs: needs_compaction)
            f.close()
            store.remove(st.tmp)
            st.full_at = st.log_size + st.in_size
            raise
        f.close()
        store.put(st.root + 'jobs.nok', store.stamp_text(store.size(st.tmp), h))
    st.conflicts = len(conf)
    st.full_at = 0
    store.rename(st.tmp, st.new)
    finish(st)
    st.compactions += 1
    if cc is not None:
        from sporadic.device import carry
        carry.end(st, cc)
    return True


def finish(st):
    # jobs.new is complete: each step below is idempotent
    sealed = False
    if store.exists(st.log):
        if store.size(st.log):
            store.rename(st.log, st._seg(st.out_top()[1] + 1))
            sealed = True
        else:
            store.remove(st.log)
    if store.exists(st.inp):
        store.remove(st.inp)
    store.rename(st.new, st.jobs)
    nok = st.root + 'jobs.nok'     # the stamp of jobs.new, of jobs.txt once renamed
    if store.exists(nok):
        store.rename(nok, st.root + 'jobs.ok')
    st.log_size = 0
    st.in_size = 0
    st._pend = None
    due = st.out_due() if sealed and store.PACK else None
    if due is not None and (due[1] or _roomy()):
        # raw segments packed, room for the next compaction (outbox.py,
        # loaded for this only). Packing waits for the sync's fresh heap
        # on a board whose loop has little to spare: loading and letting
        # go of the code at every pack scatters a small heap (a 72K unix
        # board then failed its next import); room is made whatever the heap
        had = list(sys.modules)
        try:
            from sporadic.device import outbox
            outbox.tidy(st)
        except MemoryError:
            pass
        outbox = None
        sporadic.forget_since(had)


def _roomy():
    # the loop's heap has PACK_FREE bytes free: packing in it costs nothing
    # the loop needs (a Pico: ~200 KB; a 64-72K board packs at its syncs)
    import gc
    gc.collect()
    return not hasattr(gc, 'mem_free') or gc.mem_free() >= store.PACK_FREE
